"""Small objects straight into etcd at v1alpha1, and a streaming etcd check (benchmarks/fleet10.py, million.py).

Same stored bytes as benchmarks/crdops_bench/data.py's seed (JSON, the managedFields entry a create would add),
but: namespaced or cluster scope, a small payload, no storage flip here (the caller decides: fleet10 lets
the release manifests flip it, million flips it itself), and a check that pages through etcd keeping only
counts, so a million keys do not have to fit in memory at once.
"""
from __future__ import annotations

import base64
import datetime
import json
import time
import urllib.request
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from tests.controlplane.etcd_reader import _b64, _post, _prefix_end, encoding_of, resource_prefix
from tests.integration.seed import Seeded, crd_at

PLURAL, KIND = "widgets", "Widget"
TXN = 128  # puts per etcd transaction (etcd's default --max-txn-ops is 128)


def seed_old(kube, etcd_url: str, group: str, n: int, namespaces: tuple[str, ...] = (), payload: int = 64,
             workers: int = 4, wait_s: float = 600) -> Seeded:
    """The CRD served and stored at v1alpha1 only, then `n` objects written into etcd at v1alpha1."""
    s = Seeded(group, PLURAL, KIND, "Namespaced" if namespaces else "Cluster")
    for ns in namespaces:
        kube.ensure_namespace(ns)
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    mf = [{"manager": "bench-seed", "operation": "Update", "apiVersion": f"{group}/v1alpha1", "time": stamp,
           "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:filler": {}, "f:index": {}}}}]
    filler = "x" * payload

    def put(i: int) -> dict:
        name = f"obj-{i:07d}"
        meta = {"creationTimestamp": stamp, "generation": 1, "managedFields": mf, "name": name, "uid": str(uuid.uuid4())}
        if namespaces:
            ns = namespaces[i % len(namespaces)]
            meta["namespace"] = ns
            key = f"/registry/{group}/{PLURAL}/{ns}/{name}"
        else:
            key = f"/registry/{group}/{PLURAL}/{name}"
        obj = {"apiVersion": f"{group}/v1alpha1", "kind": KIND, "metadata": meta, "spec": {"filler": filler, "index": i}}
        value = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        return {"requestPut": {"key": _b64(key.encode()), "value": base64.b64encode(value).decode()}}

    def txn(lo: int) -> None:
        body = json.dumps({"success": [put(i) for i in range(lo, min(lo + TXN, n))]}).encode()
        req = urllib.request.Request(etcd_url.rstrip("/") + "/v3/kv/txn", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()

    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(txn, range(0, n, TXN)))
    wait_listed(kube, group, n, wait_s)
    return s


def wait_listed(kube, group: str, n: int, wait_s: float) -> None:
    """The apiserver learns etcd writes through its watch: wait until a list sees all n."""
    deadline = time.monotonic() + wait_s
    while True:
        body = kube.get(f"/apis/{group}/v1alpha1/{PLURAL}", limit=1)
        got = len(body.get("items") or []) + int(body.get("metadata", {}).get("remainingItemCount") or 0)
        if got >= n:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{group}: the apiserver lists {got} of {n} seeded objects after {wait_s}s")
        time.sleep(0.5)


def etcd_counts(etcd_url: str, group: str, page: int = 5000) -> tuple[int, Counter]:
    """(revision, Counter of stored apiVersion) over every key of the CRD, one snapshot, page by page."""
    prefix = resource_prefix(group, PLURAL)
    end, start, revision, counts = _prefix_end(prefix), prefix, 0, Counter()
    while True:
        payload = {"key": _b64(start), "range_end": _b64(end), "limit": page}
        if revision:
            payload["revision"] = revision
        body = _post(etcd_url, "/v3/kv/range", payload)
        revision = revision or int(body["header"]["revision"])
        kvs = body.get("kvs", [])
        counts.update(encoding_of(base64.b64decode(kv.get("value", ""))) for kv in kvs)
        if not body.get("more") or not kvs:
            return revision, counts
        start = base64.b64decode(kvs[-1]["key"]) + b"\x00"

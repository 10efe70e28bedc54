"""Benchmark data: a fresh CRD group per contender and repetition, seeded straight into etcd.

Objects are written into etcd exactly as the apiserver stores them at v1alpha1 (JSON, with the
managedFields entry a create would add), 128 per etcd transaction: creating 10k-100k objects through the
apiserver would take minutes per contender on 2 cores, and the stored bytes are the same. The proof of a
run is read back from etcd with the engine's own reader (`etcd_scan`), and the data is removed again with
one etcd range delete, so every contender sees the same cluster.
"""
from __future__ import annotations

import base64
import datetime
import json
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

from tests.integration.seed import Seeded, crd_at, flip_storage

from . import engine

PLURAL, KIND = "widgets", "Widget"
NAMESPACES = ("ns-a", "ns-b")
PAYLOAD_BYTES = 2000  # spec.filler: objects are ~2.2 KB stored
TXN_OPS = 128


def crd_name(group: str) -> str:
    return f"{PLURAL}.{group}"


def seeded(group: str) -> Seeded:
    return Seeded(group, PLURAL, KIND, "Namespaced")


def _etcd_post(etcd_url: str, path: str, payload: dict) -> dict:
    req = urllib.request.Request(etcd_url.rstrip("/") + path, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _stored_object(group: str, i: int, stamp: str) -> tuple[bytes, bytes]:
    ns, name = NAMESPACES[i % len(NAMESPACES)], f"obj-{i:06d}"
    managed = [{"manager": "bench-seed", "operation": "Update", "apiVersion": f"{group}/v1alpha1", "time": stamp,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {".": {}, "f:filler": {}, "f:index": {}}}}]
    obj = {"apiVersion": f"{group}/v1alpha1", "kind": KIND,
           "metadata": {"creationTimestamp": stamp, "generation": 1, "managedFields": managed, "name": name,
                        "namespace": ns, "uid": str(uuid.uuid4())},
           "spec": {"filler": "x" * PAYLOAD_BYTES, "index": i}}
    key = f"/registry/{group}/{PLURAL}/{ns}/{name}".encode()
    return key, json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def _put_objects(etcd_url: str, group: str, n: int) -> None:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def txn(lo: int) -> None:
        ops = [{"requestPut": {"key": _b64(k), "value": _b64(v)}}
               for k, v in (_stored_object(group, i, stamp) for i in range(lo, min(lo + TXN_OPS, n)))]
        _etcd_post(etcd_url, "/v3/kv/txn", {"success": ops})

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(txn, range(0, n, TXN_OPS)))


def _wait_listed(kube, group: str, n: int, timeout: float = 120) -> None:
    """Until the apiserver (its watch cache) lists all N objects."""
    path = f"/apis/{group}/v1alpha1/{PLURAL}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = kube.get(path, limit=1)
        if len(body.get("items") or []) + int(body.get("metadata", {}).get("remainingItemCount") or 0) >= n:
            return
        time.sleep(0.2)


def seed(kube, etcd_url: str, group: str, n: int, flip: bool = True) -> float:
    """The CRD at v1alpha1 (through the API), N objects into etcd, then (flip) the storage version flipped
    to v1beta1 through the API. Returns the seconds it took."""
    t0 = time.perf_counter()
    s = seeded(group)
    for ns in NAMESPACES:
        kube.ensure_namespace(ns)
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    _put_objects(etcd_url, group, n)
    _wait_listed(kube, group, n)
    if flip:
        flip_storage(kube, s, "v1beta1")
    return time.perf_counter() - t0


def verify(etcd_url: str, group: str, n: int) -> tuple[bool, str]:
    """(every one of the N keys is stored at v1beta1, the counts per apiVersion), read with the engine."""
    etcd_scan = engine.module("proof.etcd_scan")
    reader = etcd_scan.EtcdReader(etcd_scan.EtcdOptions(url=etcd_url))
    try:
        scan = reader.scan(crd_name(group), group, PLURAL, f"{group}/v1beta1")
    finally:
        reader.close()
    ok = scan.verified and scan.total == n
    return ok, ", ".join(f"{k}={v}" for k, v in sorted(scan.counts.items()))


def revision(etcd_url: str) -> int:
    """etcd's current revision (one count-only range of an empty key)."""
    body = _etcd_post(etcd_url, "/v3/kv/range", {"key": _b64(b"\x00"), "count_only": True})
    return int(body["header"]["revision"])


def first_write_revision(etcd_url: str, group: str) -> int:
    """The smallest mod_revision among the group's keys: the revision of the first object written since the seed
    (keys only, paged)."""
    etcd_scan = engine.module("proof.etcd_scan")
    prefix = etcd_scan.resource_prefix("/registry", group, PLURAL).encode()
    start, end, lowest = prefix, etcd_scan.range_end(prefix), 0
    while True:
        body = _etcd_post(etcd_url, "/v3/kv/range", {"key": _b64(start), "range_end": _b64(end), "keys_only": True,
                                                     "limit": 1000})
        kvs = body.get("kvs") or []
        revs = [int(kv["mod_revision"]) for kv in kvs]
        lowest = min([lowest] + revs) if lowest else min(revs, default=0)
        if not body.get("more") or not kvs:
            return lowest
        start = base64.b64decode(kvs[-1]["key"]) + b"\x00"


def drop(kube, etcd_url: str, group: str) -> None:
    """Remove a finished contender's data: the objects straight from etcd (fast), then the CRD; wait until
    it is gone."""
    etcd_scan = engine.module("proof.etcd_scan")
    prefix = etcd_scan.resource_prefix("/registry", group, PLURAL).encode()
    _etcd_post(etcd_url, "/v3/kv/deleterange", {"key": _b64(prefix), "range_end": _b64(etcd_scan.range_end(prefix))})
    try:
        kube.delete(kube.crd_path(crd_name(group)))
    except Exception:  # already gone
        pass
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            kube.get_crd(crd_name(group))
        except Exception:
            return
        time.sleep(0.2)

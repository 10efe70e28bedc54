"""The confirming passes and their re-reads classify managedFields by the run's policy, on a real apiserver + etcd
(issue #30 finding 2).

Without an etcd URL the proof is the confirming pass: a no-op JSON patch testing each object's listed
resourceVersion. An object another client wrote in between fails the test and is read again; that re-read used to
be classified with conversion None's rule (every version but the storage one, label only), whatever the main pass's
policy said. Under a renaming webhook (v1alpha1 `spec.size` -> v1beta1 `spec.replicas`) an old operator's Update
entry at v1alpha1 was relabelled v1beta1 with its v1alpha1 paths (`f:spec.f:size`, a field v1beta1 does not have).

Staged as seen in the field: 40 objects applied at v1alpha1 by Flux's real apply library (`fluxcd/pkg/ssa`,
manager `kustomize-controller`), a one-time edit of `spec.backupZone` by another manager before the run, storage
flipped to v1beta1, and the old operator (`widget-ctrl`) merge-patching `spec.size` at v1alpha1 twice a second
through the whole run. crd_storage_migrate runs with the role's managedFields options (removed_versions
[v1alpha1], keep_applier_entries, keep_written_since = when the run began) and no etcd URL.

What the run's policy (restore.run_policy -> ManagedFieldsPolicy) says for v1alpha1, removed and still served:
Flux's Apply entry is kept (an applier's declaration), the operator's Update entry is kept (written since the run
began), the one-time edit is translated to `f:spec.f:zones.f:backup` at v1beta1 with its time. The confirming
passes have nothing to fix (`excluded` 0). No entry labelled v1beta1 may own a path v1beta1's schema lacks.
"""
from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.clients import FLUX_MANAGER, Flux
from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import Kube, KubeError, objects_path
from tests.controlplane.webhook import WebhookServer, widget_schemas
from tests.integration.modrun import auth_args, run_module
from tests.integration.test_translate_managed_fields import KIND, PLURAL, crd

NS = "cp-policy"
COUNT = 40
NAMES = [f"w-{i:02d}" for i in range(COUNT)]
OPERATOR, PERIOD, BATCH = "widget-ctrl", 0.5, 10  # twice a second, a quarter of the objects each time
GAP = 5.0  # the longest pause between two of its rounds the test accepts (the webhook shares its process)
EDITOR = "zone-editor"  # one edit before the run: an entry the policy translates
EDITED_PATHS = {"f:spec": {"f:zones": {"f:backup": {}}}}  # its v1beta1 paths (backupZone -> zones.backup)


class Operator(threading.Thread):
    """An operator built against v1alpha1: every PERIOD s a merge patch (an Update) of `spec.size` on the next
    BATCH objects, at v1alpha1 under its own field manager, BATCH reconciles at once (a controller's workers),
    until stopped. At that rate each object is written every 2 s, so some are written between a confirming pass's list and
    its test of them: the re-read this test is about."""

    def __init__(self, kube: Kube, group: str):
        super().__init__(daemon=True)
        self.kube, self.group = kube, group
        self.stopped = threading.Event()
        self.ticks: list[float] = []  # time.time() at the start of each round of writes
        self.errors: list[str] = []

    def write(self, name: str, size: int) -> None:
        path = objects_path(self.group, "v1alpha1", PLURAL, NS, name)
        try:
            self.kube.request("PATCH", path, {"spec": {"size": size}}, "application/merge-patch+json",
                              query={"fieldManager": OPERATOR})
        except KubeError as exc:  # a reconcile loop logs and goes on; the test fails on any
            self.errors.append(str(exc))

    def run(self) -> None:
        with ThreadPoolExecutor(BATCH) as pool:
            while not self.stopped.wait(max(0.0, self.ticks[-1] + PERIOD - time.time()) if self.ticks else 0):
                tick = len(self.ticks)
                self.ticks.append(time.time())
                batch = [NAMES[i % COUNT] for i in range(tick * BATCH, (tick + 1) * BATCH)]
                list(pool.map(self.write, batch, [100 + tick] * BATCH))


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def seed(cluster, kube: Kube, group: str, webhook: WebhookServer) -> None:
    """COUNT objects applied by Flux at v1alpha1 (storage v1alpha1), one edit each by EDITOR, then storage v1beta1."""
    kube.apply_crd(crd(group, webhook, "v1alpha1"))
    kube.ensure_namespace(NS)
    manifests = [{"apiVersion": f"{group}/v1alpha1", "kind": KIND, "metadata": {"name": n, "namespace": NS},
                  "spec": {"size": 1, "color": "blue"}} for n in NAMES]
    applied = Flux(cluster.kubeconfig, cluster.contexts()[0]).apply(manifests)
    assert applied.ok and applied.applied == COUNT, applied
    for name in NAMES:
        kube.merge_patch(objects_path(group, "v1alpha1", PLURAL, NS, name) + f"?fieldManager={EDITOR}",
                         {"spec": {"backupZone": "eu-2"}})
    kube.apply_crd(crd(group, webhook, "v1beta1"))


def next_whole_second() -> str:
    """Wait for the next whole second and return it (RFC 3339): managedFields times are whole seconds, so every
    write before this call is stamped earlier and every write after it at or later (one clock: the apiserver
    runs on this machine)."""
    now = time.time()
    second = math.floor(now) + 1
    time.sleep(second - now)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def foreign_paths(fields: dict, schema: dict, path: str = "") -> list[str]:
    """The paths in a fieldsV1 set that `schema` (an openAPIV3Schema) has no field for; an object whose fields the
    schema does not list (metadata) is not looked into: the apiserver owns its shape."""
    out = []
    for key, sub in fields.items():
        if key == ".":
            continue
        kind, _sep, name = key.partition(":")
        if kind == "f":
            props, extra = schema.get("properties"), schema.get("additionalProperties")
            if props is not None and name not in props:
                out.append(f"{path}.{name}")
                continue
            child = props[name] if props is not None else extra if isinstance(extra, dict) else {}
            out += foreign_paths(sub, child, f"{path}.{name}")
        else:  # k:, v:, i: an item of a list
            out += foreign_paths(sub, schema.get("items") or {}, f"{path}[{name}]")
    return out


def migrate(cluster, group: str, since: str) -> dict:
    """The module as the role's restore runs it (tasks/restore.yml), without an etcd URL: confirming passes. At
    max_qps 10 a pass over the 40 objects takes 4 s, so each object waits 2 s on average between the pass's list
    and its test, as long as the operator takes to come back to it: on the code before the fix 10 to 30 of the 40
    were re-read and relabelled (3 runs)."""
    crd_name = f"{PLURAL}.{group}"
    result = run_module("crd_storage_migrate", dict(
        auth_args(cluster), names=[crd_name], removed_versions=[f"{crd_name}/v1alpha1"], keep_applier_entries=True,
        keep_written_since=since, confirm_passes=3, drain_window=1, max_qps=10))
    assert not result.get("failed"), result.get("msg")
    return result["crds"][0]


def check_entries(obj: dict, group: str, schemas: dict, edited: dict) -> list[str]:
    """What is wrong with one object's managedFields after the run (empty: nothing)."""
    name, wrong = obj["metadata"]["name"], []
    by_manager: dict[str, list[dict]] = {}
    for entry in obj["metadata"].get("managedFields") or []:
        by_manager.setdefault(entry["manager"], []).append(entry)
        version = entry["apiVersion"].rpartition("/")[2]
        if entry["apiVersion"].startswith(f"{group}/"):  # each entry's paths are its version's fields
            for path in foreign_paths(entry.get("fieldsV1") or {}, schemas[version]):
                wrong.append(f"{name}: {entry['manager']} {entry['operation']} at {version} owns {path}")
    versions = {m: sorted(e["apiVersion"] for e in es) for m, es in by_manager.items()}
    # written since the run began, at v1alpha1 (removed, still served): kept there, never relabelled
    if versions.get(OPERATOR) != [f"{group}/v1alpha1"]:
        wrong.append(f"{name}: {OPERATOR} entries at {versions.get(OPERATOR)}")
    # an applier's declaration at v1alpha1 (keep_applier_entries): kept there
    if versions.get(FLUX_MANAGER) != [f"{group}/v1alpha1"]:
        wrong.append(f"{name}: {FLUX_MANAGER} entries at {versions.get(FLUX_MANAGER)}")
    # written before the run: translated to v1beta1's paths, time kept
    [before] = [e for e in edited["metadata"]["managedFields"] if e["manager"] == EDITOR]
    after = by_manager.get(EDITOR) or [{}]
    if [(e.get("apiVersion"), e.get("fieldsV1"), e.get("time")) for e in after] != [
            (f"{group}/v1beta1", EDITED_PATHS, before["time"])]:
        wrong.append(f"{name}: {EDITOR} entries {after}")
    return wrong


def test_confirming_passes_keep_the_runs_managed_fields_policy_under_a_renaming_webhook(
        cluster, kube, group, webhook):
    seed(cluster, kube, group, webhook)
    edited = {o["metadata"]["name"]: o for o in kube.get(objects_path(group, "v1alpha1", PLURAL, NS))["items"]}
    since = next_whole_second()  # the role's keep_written_since: the apiserver's time when the run began
    operator = Operator(kube, group)
    operator.start()
    try:
        started = time.time()
        out = migrate(cluster, group, since)
        ended = time.time()
    finally:
        operator.stopped.set()
        operator.join(30)
    assert operator.errors == [], operator.errors[:3]
    # through the whole run: from before it began to its end, with no pause longer than GAP (it asks for one
    # round every PERIOD; on this shared machine a round under the run's load can take longer)
    gaps = [b - a for a, b in zip(operator.ticks, operator.ticks[1:])]
    assert operator.ticks[0] <= started and operator.ticks[-1] >= ended - GAP and max(gaps) <= GAP, (
        started, ended, operator.ticks)
    proof = out["proof"]
    assert out["record_written"] and out["failed"] == 0 and proof["ok"] and proof["kind"] == "confirming-pass", out

    schemas = widget_schemas()
    wrong = []
    for name in NAMES:  # every object readable at the storage version, renamed field and translated entry there
        obj = kube.get(objects_path(group, "v1beta1", PLURAL, NS, name))
        spec = obj["spec"]
        if "size" in spec or not isinstance(spec.get("replicas"), int) or spec.get("zones") != {"backup": "eu-2"}:
            wrong.append(f"{name}: spec {spec}")
        wrong += check_entries(obj, group, schemas, edited[name])
    assert wrong == [], "\n".join(wrong)
    # nothing for a confirming pass to fix: the main pass fixed what the policy fixes, and a re-read after a failed
    # resourceVersion test finds only entries the policy keeps
    assert [r["excluded"] for r in proof["passes"]] == [0] * len(proof["passes"]), proof
    scan = scan_storage(cluster.etcd_url, group, PLURAL)
    assert scan.counts == {f"{group}/v1beta1": COUNT}, scan.counts

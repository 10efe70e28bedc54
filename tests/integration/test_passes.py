"""The skip rule on a real apiserver + etcd: objects written after the HA barrier passed are not written again.

The pass reads the etcd revision (a quorum LIST with limit=1) right after the barrier. A client then creates
objects at the new version, and server-side applies others at the old one (their managedFields name v1alpha1,
kubernetes#111937). The first are counted ``already_current`` and never written; the applied ones still get the
managedFields fix; every object from before the barrier is written. etcd is read to prove each count.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from tests.controlplane.etcd_reader import current_revision, key_versions, keys_written_since, scan_storage
from tests.controlplane.kube import Kube, objects_path
from tests.integration.engine import transport_for
from tests.integration.modrun import TEST_DRAIN_WINDOW, auth_args, run_module
from tests.integration.seed import Seeded, create_objects, seed_old_objects

from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (  # noqa: E402
    ProgressFile, RunOptions, run_migration)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import validate_record  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd  # noqa: E402

NS = ["ac-a", "ac-b"]
OLD, BETWEEN, AFTER, APPLIED = 300, 100, 150, 20
APPLY = "application/apply-patch+yaml"


class WriterAfterRevision:
    """The engine's transport, plus a client that writes right after the pass has read its barrier revision."""

    def __init__(self, inner: Any, crd_plural: str, write: Any) -> None:
        self.inner, self.plural, self.write = inner, crd_plural, write
        self.revision_reads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def request(self, method: str, path: str, **kw: Any) -> Any:
        resp = self.inner.request(method, path, **kw)
        if method == "GET" and path.endswith("/" + self.plural) and list(kw.get("query") or []) == [("limit", "1")]:
            self.revision_reads += 1
            if self.revision_reads == 1:
                self.write()
        return resp


def apply_at_old_version(kube: Kube, s: Seeded, count: int) -> None:
    for i in range(count):
        ns, name = NS[i % 2], f"applied-{i:04d}"
        body = {"apiVersion": s.old(), "kind": s.kind, "metadata": {"name": name, "namespace": ns},
                "spec": {"index": i}}
        kube.request("PATCH", objects_path(s.group, "v1alpha1", s.plural, ns, name), body, APPLY,
                     query={"fieldManager": "team-old"})


def test_objects_written_after_the_barrier_are_already_current_the_rest_is_rewritten(cluster, kube, group):
    s = seed_old_objects(kube, group, OLD, namespaces=NS)
    # written after the flip but before the pass: at the new version, yet not provably so, hence written (unchanged)
    create_objects(kube, s, "v1beta1", BETWEEN, NS, start=OLD)

    def writer() -> None:
        create_objects(kube, s, "v1beta1", AFTER, NS, start=OLD + BETWEEN)
        apply_at_old_version(kube, s, APPLIED)

    transport = WriterAfterRevision(transport_for(cluster), s.plural, writer)
    options = RunOptions(restore=RestoreOptions(page_size=100, workers=4), drain_window=TEST_DRAIN_WINDOW)
    before = current_revision(cluster.etcd_url)
    try:
        run = run_migration(transport, [get_crd(transport, s.crd_name)], options, {"self": transport},
                            ProgressFile(None, "t", False, print))
    finally:
        transport.close()
    entry = run.crds[0]
    assert transport.revision_reads == 1 and entry["barrier_revision"] > before
    assert not run.problems(), run.problems()
    total = OLD + BETWEEN + AFTER + APPLIED
    counts = tuple(entry[k] for k in ("listed", "rewritten", "unchanged", "already_current", "gone", "failed"))
    assert counts == (total, OLD + APPLIED, BETWEEN, AFTER, 0, 0)
    assert entry["objects_with_stale_managed_fields"] == OLD + APPLIED  # created at v1alpha1: Update entries there

    # etcd: every key at the new version; written once (created) or twice (created, then by the pass)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): total}
    versions = key_versions(cluster.etcd_url, group, s.plural)
    prefix = f"/registry/{group}/{s.plural}/"
    after = {f"{prefix}{NS[i % 2]}/obj-{OLD + BETWEEN + i:06d}" for i in range(AFTER)}
    assert {versions[k] for k in after} == {1}  # already_current: the pass never wrote them
    # created once: BETWEEN (its no-op write elided) and AFTER; written by the pass: OLD and APPLIED
    assert Counter(versions.values()) == {1: BETWEEN + AFTER, 2: OLD + APPLIED}

    record = validate_record(get_crd(transport_for(cluster), s.crd_name))
    assert record.ok, record.reason
    assert (record.record.listed, record.record.already_current) == (total, AFTER)

    trimmed = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name]))
    assert not trimmed.get("failed"), trimmed.get("msg")
    assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1beta1"]
    managers = {(e["manager"], e["apiVersion"]) for o in kube.get(objects_path(group, "v1beta1", s.plural))["items"]
                for e in o["metadata"].get("managedFields") or [] if e["manager"] == "team-old"}
    assert managers == {("team-old", s.new())}


def test_sample_only_plans_from_one_list_of_the_first_objects_and_writes_nothing(cluster, kube, group):
    s = seed_old_objects(kube, group, 240, namespaces=NS)
    revision = current_revision(cluster.etcd_url)
    result = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], sample_only=True,
                                                    preflight_sample=7, force=True), check_mode=True)
    assert not result.get("failed"), result.get("msg")
    crd = result["crds"][0]
    assert (crd["listed"], crd["object_count"], crd["sampled"], crd["pages"], crd["complete"]) == (7, 240, True, 1, True)
    assert crd["predicted_rejections"] == [] and crd["rewritten"] == 0
    assert keys_written_since(cluster.etcd_url, revision) == []
    refused = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], sample_only=True))
    assert refused.get("failed") and "check mode" in refused["msg"]
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): 240}

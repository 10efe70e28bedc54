"""Gone means gone (DESIGN invariant 8), on a real apiserver + etcd.

The engine runs in this process with its real HTTP transport wrapped, so that something happens on cue right
before a chosen object's write: the object is really deleted (counted gone), or the write goes to a version this
apiserver does not serve (the real apiserver answers the plain-text ``404 page not found`` that a lagging HA
member gives), or to another name (a NotFound naming another object). Every answer comes from the real server.
"""
from __future__ import annotations

import pytest

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import objects_path
from tests.integration import reliability
from tests.integration.engine import transport_for
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import seed_old_objects

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import validate_record  # noqa: I100
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, migrate_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd

COUNT = 40
NS = ["gone-a", "gone-b"]


class OnCue:
    """The engine's transport; the PATCH of a chosen object goes through ``fn(path, send)`` instead."""

    def __init__(self, inner, targets: dict):
        self.inner = inner
        self.targets = targets  # object name -> fn(path, send) -> ApiResponse
        self.cluster_label = inner.cluster_label
        self.stats = inner.stats

    def request(self, method, path, **kw):
        name = path.rsplit("/", 1)[-1]
        if method == "PATCH" and name in self.targets:
            return self.targets.pop(name)(path, lambda p: self.inner.request(method, p, **kw))
        return self.inner.request(method, path, **kw)


def run_engine(cluster, s, targets: dict):
    transport = transport_for(cluster)
    try:
        crd = get_crd(transport, s.crd_name)
        return migrate_crd(OnCue(transport, targets), crd, RestoreOptions(page_size=9, workers=4))
    finally:
        transport.close()


def crd_now(cluster, s):
    transport = transport_for(cluster, pool_size=1)
    try:
        return get_crd(transport, s.crd_name)
    finally:
        transport.close()


def chosen(indices):
    return {f"obj-{i:06d}": NS[i % len(NS)] for i in indices}


def test_objects_deleted_between_list_and_write_are_counted_gone(cluster, kube, group):
    s = seed_old_objects(kube, group, COUNT, namespaces=NS)
    victims = chosen((3, 10, 11, 27, 39))

    def delete_first(path, send):
        kube.delete(path)  # a real deletion, right before the engine's write
        return send(path)

    r = run_engine(cluster, s, {name: delete_first for name in victims})
    assert (r.listed, r.rewritten, r.unchanged, r.gone, r.failed) == (COUNT, COUNT - 5, 0, 5, 0)
    assert r.ok and r.record_written and validate_record(crd_now(cluster, s)).ok
    scan = scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.counts == {s.new(): COUNT - 5}
    reliability.record("objects deleted between the list and their write", "5 deleted right before their write: "
                       "counted gone after a NotFound naming them and a confirming GET at v1alpha1",
                       COUNT - 5, scan.total, True)


@pytest.mark.parametrize("answer", ["plain-404", "other-name", "recreated"])
def test_a_404_that_is_not_a_confirmed_deletion_fails_the_object_and_writes_no_record(cluster, kube, group, answer):
    s = seed_old_objects(kube, group, COUNT, namespaces=NS)
    victims = chosen((5, 6, 20))

    def lagging(path, send):  # a version this apiserver does not serve: the real plain-text "404 page not found"
        return send(path.replace("/v1beta1/", "/v1gamma9/"))

    def other_name(path, send):  # a real NotFound Status, naming another object
        return send(path + "-ghost")

    def recreated(path, send):  # a real NotFound naming the object; it is back before the confirming read
        kube.delete(path)
        resp = send(path)
        ns, name = path.split("/namespaces/")[1].split("/")[0], path.rsplit("/", 1)[-1]
        kube.post(objects_path(group, "v1beta1", s.plural, ns),
                  {"apiVersion": s.new(), "kind": s.kind, "metadata": {"name": name}})
        return resp

    fault = {"plain-404": lagging, "other-name": other_name, "recreated": recreated}[answer]
    r = run_engine(cluster, s, {name: fault for name in victims})
    assert (r.listed, r.rewritten, r.gone, r.failed) == (COUNT, COUNT - 3, 0, 3), r.first_failures
    assert r.complete and not r.ok and not r.record_written
    assert sorted(f["name"] for f in r.first_failures) == sorted(victims)
    words = {"plain-404": "without naming the object", "other-name": "without naming the object",
             "recreated": "still finds the object"}[answer]
    assert all(words in f["error"] and "not counted as deleted" in f["error"] for f in r.first_failures)
    if answer == "plain-404":
        assert all(f["message"] == "404 page not found" for f in r.first_failures)
    assert not validate_record(crd_now(cluster, s)).ok
    trimmed = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name]))
    assert trimmed["failed"] is True
    before = scan_storage(cluster.etcd_url, group, s.plural)
    # never written at the new version (or, recreated, new objects): a rerun completes the pass
    again = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name]))
    assert not again.get("failed"), again.get("msg")
    after = scan_storage(cluster.etcd_url, group, s.plural)
    assert after.counts == {s.new(): COUNT}
    reliability.record(f"a re-store write answered 404 that is not a confirmed deletion ({answer})",
                       "3 objects failed with the reason, no record, trim refused; the rerun completed",
                       before.total, after.total, True)

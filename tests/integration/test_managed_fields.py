"""Clients keep working after the upgrade (DESIGN invariant 10, kubernetes#111937), on a real apiserver + etcd.

Objects are server-side applied at v1alpha1 by two managers owning different fields. After the storage flip,
the re-store, the trim and the removal of v1alpha1 from the CRD, every apply must still work: by each original
manager, with ownership kept (a third manager's non-forced change of a field owned by the first is a 409 naming
it), and a re-apply of an unchanged manifest is a no-op. The broken baseline is shown first: re-stored with a
plain ``{}`` merge patch, the same apply fails with HTTP 500.
"""
from __future__ import annotations

import json

import pytest

from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.controlplane.kube import Kube, KubeError, objects_path
from tests.integration import reliability
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import Seeded, crd_at, flip_storage

NS = ["mf-a", "mf-b"]
COUNT = 30
APPLY = "application/apply-patch+yaml"  # JSON is YAML


def apply(kube: Kube, s: Seeded, version: str, ns: str, name: str, manager: str, spec: dict,
          force: bool = False) -> dict:
    body = {"apiVersion": f"{s.group}/{version}", "kind": s.kind, "metadata": {"name": name, "namespace": ns},
            "spec": spec}
    query = {"fieldManager": manager}
    if force:
        query["force"] = "true"
    return kube.request("PATCH", objects_path(s.group, version, s.plural, ns, name), body, APPLY, query=query)


def names() -> list[tuple[str, str]]:
    return [(NS[i % len(NS)], f"obj-{i:04d}") for i in range(COUNT)]


def seed_applied(kube: Kube, group: str) -> Seeded:
    """COUNT objects applied at v1alpha1: team-a owns spec.size, team-b owns spec.color; then storage -> v1beta1."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    for ns in NS:
        kube.ensure_namespace(ns)
    for ns, name in names():
        apply(kube, s, "v1alpha1", ns, name, "team-a", {"size": 3})
        apply(kube, s, "v1alpha1", ns, name, "team-b", {"color": "blue"})
    flip_storage(kube, s, "v1beta1")
    return s


def managed_api_versions(kube: Kube, s: Seeded) -> set[tuple[str, str]]:
    items = kube.get(objects_path(s.group, "v1beta1", s.plural))["items"]
    return {(e["manager"], e["apiVersion"]) for o in items for e in o["metadata"].get("managedFields") or []}


def remove_old_version(kube: Kube, s: Seeded) -> None:
    kube.apply_crd(crd_at(s, "v1beta1", served=("v1beta1",)))


def trim_by_hand(kube: Kube, s: Seeded) -> None:
    """What an older tool (or a person) does: set storedVersions without the fix."""
    kube.merge_patch(kube.crd_path(s.crd_name) + "/status", {"status": {"storedVersions": ["v1beta1"]}})


def migrate(cluster, s: Seeded, check_mode: bool = False, **extra) -> dict:
    result = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], **extra), check_mode)
    assert not result.get("failed"), result.get("msg")
    assert len(result["crds"]) == 1
    return result


def assert_clients_keep_working(kube: Kube, s: Seeded) -> None:
    for ns, name in names():
        # (1) each original manager applies at the new version (HTTP 500 before the fix)
        apply(kube, s, "v1beta1", ns, name, "team-a", {"size": 3})
        before = apply(kube, s, "v1beta1", ns, name, "team-b", {"color": "blue"})["metadata"]["resourceVersion"]
        # (3) the unchanged manifest again: a no-op, the resourceVersion does not move
        again = apply(kube, s, "v1beta1", ns, name, "team-b", {"color": "blue"})["metadata"]["resourceVersion"]
        assert again == before, (ns, name)
    # (2) ownership kept: a third manager's non-forced change of team-a's field conflicts, naming team-a
    ns, name = names()[0]
    with pytest.raises(KubeError) as conflict:
        apply(kube, s, "v1beta1", ns, name, "team-c", {"size": 5})
    assert conflict.value.status == 409 and '"team-a"' in conflict.value.message and ".spec.size" in conflict.value.message


def test_plain_restore_breaks_server_side_apply_after_the_old_version_is_removed(cluster, kube, group):
    """The baseline this fixes: `{}` re-stores the bytes but leaves managedFields at v1alpha1."""
    s = seed_applied(kube, group)
    for ns, name in names():
        kube.merge_patch(objects_path(group, "v1beta1", s.plural, ns, name), {})
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    assert managed_api_versions(kube, s) == {("team-a", s.old()), ("team-b", s.old())}
    trim_by_hand(kube, s)
    remove_old_version(kube, s)
    ns, name = names()[0]
    with pytest.raises(KubeError) as broken:
        apply(kube, s, "v1beta1", ns, name, "team-a", {"size": 3})
    assert broken.value.status == 500 and "invalid group/version" in broken.value.message


def test_restore_rewrites_managed_fields_and_clients_keep_working(cluster, kube, group):
    s = seed_applied(kube, group)
    revision = current_revision(cluster.etcd_url)
    plan = migrate(cluster, s, check_mode=True)["crds"][0]
    assert keys_written_since(cluster.etcd_url, revision) == []
    assert (plan["objects_with_stale_managed_fields"], plan["managed_fields_rewritten"],
            plan["managed_fields_dropped"]) == (COUNT, 2 * COUNT, 0)

    result = migrate(cluster, s, page_size=7, workers=4)
    crd = result["crds"][0]
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["gone"], crd["failed"]) == (COUNT, COUNT, 0, 0, 0)
    assert (crd["objects_with_stale_managed_fields"], crd["managed_fields_rewritten"],
            crd["managed_fields_dropped"]) == (COUNT, 2 * COUNT, 0)
    assert result["totals"]["managed_fields_rewritten"] == 2 * COUNT
    record = json.loads(kube.get_crd(s.crd_name)["metadata"]["annotations"]["migration.crdops.io/storage-migration"])
    assert (record["managedFieldsRewritten"], record["skippedByCheckpoint"], record["listed"]) == (2 * COUNT, 0, COUNT)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    assert managed_api_versions(kube, s) == {("team-a", s.new()), ("team-b", s.new())}

    trimmed = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name]))
    assert not trimmed.get("failed"), trimmed.get("msg")
    remove_old_version(kube, s)
    assert_clients_keep_working(kube, s)
    reliability.record("objects server-side applied at a version that is then removed (kubernetes#111937)",
                       f"{COUNT} objects, 2 managers: {2 * COUNT} managedFields entries rewritten in the one write "
                       "per object; apply by each manager, conflicts and no-op re-apply work after removal",
                       COUNT, scan_storage(cluster.etcd_url, group, s.plural).total, True)


def test_recorded_crd_with_stale_entries_gets_a_managed_fields_only_pass(cluster, kube, group):
    """A CRD re-stored with a plain `{}` (before managedFields were fixed) and recorded is skipped, but its stale
    managedFields entries are still fixed, and only the objects carrying them are written."""
    s = seed_applied(kube, group)
    for ns, name in names():
        kube.merge_patch(objects_path(group, "v1beta1", s.plural, ns, name), {})
    fixed_by_hand = names()[:4]
    for ns, name in fixed_by_hand:  # these carry no stale entry any more
        kube.request("PATCH", objects_path(group, "v1beta1", s.plural, ns, name),
                     [{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}],
                     "application/json-patch+json")
    crd = kube.get_crd(s.crd_name)
    old_record = {"storageVersion": "v1beta1", "generation": crd["metadata"]["generation"], "startedAt": "x",
                  "completedAt": "y", "listed": COUNT, "rewritten": COUNT, "unchanged": 0, "gone": 0, "failed": 0,
                  "crdUid": crd["metadata"]["uid"]}
    kube.merge_patch(kube.crd_path(s.crd_name), {"metadata": {"annotations": {
        "migration.crdops.io/storage-migration": json.dumps(old_record)}}})

    stale = COUNT - len(fixed_by_hand)
    revision = current_revision(cluster.etcd_url)
    plan = migrate(cluster, s, check_mode=True)
    assert keys_written_since(cluster.etcd_url, revision) == [] and plan["changed"] is True
    assert plan["crds"][0]["objects_with_stale_managed_fields"] == stale

    result = migrate(cluster, s)
    crd = result["crds"][0]
    assert "valid migration record" in crd["skipped"] and crd["managed_fields_only"] is True
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["failed"]) == (COUNT, stale, len(fixed_by_hand), 0)
    assert (crd["objects_with_stale_managed_fields"], crd["managed_fields_rewritten"]) == (stale, 2 * stale)
    assert result["changed"] is True
    written = keys_written_since(cluster.etcd_url, revision)
    assert len([k for k in written if f"/{s.group}/widgets/" in k]) == stale  # only the objects that needed it
    again = migrate(cluster, s)
    assert again["changed"] is False and again["crds"][0]["rewritten"] == 0

    # the record of an earlier version names no proof: the trim takes it only when told
    refused = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name]))
    assert refused.get("failed") and "no proof" in refused["msg"]
    trimmed = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name], accept_unproven=True))
    assert not trimmed.get("failed"), trimmed.get("msg")
    remove_old_version(kube, s)
    for ns, name in names()[len(fixed_by_hand):]:
        apply(kube, s, "v1beta1", ns, name, "team-a", {"size": 3})


def test_a_failed_resource_version_test_is_recognised(cluster, kube, group):
    """Which status the apiserver gives a failed JSON patch `test` (the engine then re-reads and retries)."""
    from tests.integration.engine import is_test_failure_of

    s = seed_applied(kube, group)
    ns, name = names()[0]
    with pytest.raises(KubeError) as failed:
        kube.request("PATCH", objects_path(group, "v1beta1", s.plural, ns, name),
                     [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}], "application/json-patch+json")
    assert failed.value.status in (409, 422), failed.value
    assert is_test_failure_of(failed.value.status, failed.value.body), json.dumps(failed.value.body)

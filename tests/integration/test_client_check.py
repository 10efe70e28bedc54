"""The client check on a real kube-apiserver: it fails on the state of kubernetes#111937 and passes when healthy.

Broken state, built by hand the way tools before this collection migrated: objects server-side applied at
v1alpha1, storage flipped to v1beta1, every object re-stored with a plain `{}` merge patch, storedVersions
trimmed, v1alpha1 removed from the CRD. Their managedFields entries still say v1alpha1, so every
server-side apply now fails with HTTP 500 - the check must say so, naming object, manager and message.
"""
from __future__ import annotations

import json

from tests.controlplane import etcd_reader
from tests.controlplane.kube import KubeError, objects_path
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import Seeded, crd_at

APPLY = "application/apply-patch+yaml"
INVALID = "request to convert CR to an invalid group/version"


def ssa(kube, s: Seeded, version: str, ns: str, name: str, manager: str, spec: dict, dry_run=False, force=False,
        labels=None):
    body = {"apiVersion": f"{s.group}/{version}", "kind": s.kind, "metadata": {"name": name, "namespace": ns},
            "spec": spec}
    if labels:
        body["metadata"]["labels"] = labels
    query = {"fieldManager": manager}
    if dry_run:
        query["dryRun"] = "All"
    if force:
        query["force"] = "true"
    return kube.request("PATCH", objects_path(s.group, version, s.plural, ns, name), body, APPLY, query=query)


def lifecycle(kube, group: str, applied: int, posted: int, fix_managed_fields: bool, remove_old: bool = True) -> Seeded:
    """v1alpha1 objects (`applied` by SSA as argocd-controller, `posted` by a plain create) -> storage
    v1beta1 -> `{}` re-store -> trim -> v1alpha1 removed (unless not `remove_old`). With `fix_managed_fields`, each re-store is the
    one-write JSON patch that also moves the entries to v1beta1 (what crd_storage_migrate now does)."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    kube.ensure_namespace("apps")
    for i in range(applied):
        ssa(kube, s, "v1alpha1", "apps", f"applied-{i:02d}", "argocd-controller", {"size": i, "color": "blue"})
    for i in range(posted):
        kube.post(objects_path(group, "v1alpha1", s.plural, "apps"),
                  {"apiVersion": s.old(), "kind": s.kind, "metadata": {"name": f"posted-{i:02d}"}, "spec": {"size": i}})
    kube.apply_crd(crd_at(s, "v1beta1"))
    items = kube.get(objects_path(group, "v1beta1", s.plural))["items"]
    for obj in items:
        path = objects_path(group, "v1beta1", s.plural, "apps", obj["metadata"]["name"])
        if not fix_managed_fields:
            kube.merge_patch(path, {})
            continue
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": obj["metadata"]["resourceVersion"]}]
        ops += [{"op": "replace", "path": f"/metadata/managedFields/{i}/apiVersion", "value": s.new()}
                for i, e in enumerate(obj["metadata"]["managedFields"]) if e["apiVersion"] == s.old()]
        kube.request("PATCH", path, ops, "application/json-patch+json")
    crd = kube.get_crd(s.crd_name)
    crd["status"]["storedVersions"] = ["v1beta1"]
    kube.put(kube.crd_path(s.crd_name) + "/status", crd)
    if remove_old:
        kube.apply_crd(crd_at(s, "v1beta1", ("v1beta1",)))
    return s


def test_client_check_fails_on_entries_at_a_removed_version_naming_object_manager_and_message(cluster, kube, group):
    s = lifecycle(kube, group, applied=4, posted=2, fix_managed_fields=False)
    # the state really is broken: the owner's own apply at v1beta1 fails
    try:
        ssa(kube, s, "v1beta1", "apps", "applied-01", "argocd-controller", {"size": 1, "color": "blue"})
        raise AssertionError("apply succeeded on an object with a v1alpha1 entry")
    except KubeError as exc:
        assert exc.status == 500 and INVALID in exc.message, exc
    revision = etcd_reader.current_revision(cluster.etcd_url)

    out = run_module("crd_client_check", dict(auth_args(cluster), names=[s.crd_name], events=False))
    assert out["_rc"] == 1 and out["ok"] is False, out
    crd = out["crds"][0]
    # all 6 counted; 3 applied objects + 1 of the new kind (Update only) sent a dry-run, 2 alike skipped
    assert (crd["listed"], crd["checked_objects"], crd["applies"], crd["probes"]) == (6, 4, 3, 1)
    assert crd["stale_objects"] == 6 and crd["stale_not_applied"] == 2
    assert crd["failed"] == 4 and out["failed_checks"] == 4
    failures = {f["object"]: f for f in crd["failures"]}
    assert sorted(failures) == ["apps/applied-00", "apps/applied-01", "apps/applied-02", "apps/posted-00"]
    for name, f in failures.items():
        assert f["status"] == 500 and f"{INVALID}: {s.old()}" in f["message"], f
        # Update-only objects: the identity-only probe reproduces the same HTTP 500 (every entry is converted)
        assert (f["manager"], f["operation"]) == (("argocd-controller", "Apply") if "applied" in name
                                                  else ("crdops-client-check", "probe"))
    for text in (s.crd_name, "apps/applied-00", "argocd-controller", "HTTP 500", INVALID):
        assert text in out["msg"], (text, out["msg"])

    # check mode runs the same dry-runs and says the same, without failing when asked not to
    out = run_module("crd_client_check", dict(auth_args(cluster), names=[s.crd_name], fail_on_error=False, retry_deadline=1),
                     check_mode=True)
    assert out["_rc"] == 0 and out["ok"] is False and out["failed_checks"] == 4, out
    assert [k for k in etcd_reader.keys_written_since(cluster.etcd_url, revision) if group in k] == []


def test_client_check_passes_when_entries_moved_to_the_storage_version(cluster, kube, group):
    s = lifecycle(kube, group, applied=4, posted=2, fix_managed_fields=True)
    out = run_module("crd_client_check", dict(auth_args(cluster), names=[s.crd_name]))
    assert out["_rc"] == 0 and out["ok"] is True, json.dumps(out)[-3000:]
    crd = out["crds"][0]
    assert (crd["listed"], crd["checked_objects"], crd["applies"], crd["probes"], crd["failed"]) == (6, 6, 4, 2, 0)
    assert crd["managers"] == ["argocd-controller"] and crd["stale_objects"] == 0
    # and it is right: the owner's real apply works, unchanged manifest is a no-op
    before = kube.get(objects_path(group, "v1beta1", s.plural, "apps", "applied-01"))
    after = ssa(kube, s, "v1beta1", "apps", "applied-01", "argocd-controller", {"size": 1, "color": "blue"})
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    # outside check mode the outcome is an Event on the CRD
    events = kube.get("/api/v1/namespaces/default/events")["items"]
    mine = [e for e in events if e["involvedObject"].get("name") == s.crd_name]
    assert [(e["reason"], e["type"]) for e in mine] == [("ClientCheckPassed", "Normal")]


def test_client_check_changes_an_owned_value_and_a_new_manager_conflicts_naming_the_owner(cluster, kube, group):
    """What a GitOps client needs is to change its own values without force, and a third manager's change to be
    refused naming it. An object stripped of managedFields and re-applied unchanged shows why re-applying
    unchanged values proves nothing: that apply succeeds, but the owner's next change conflicts with
    `before-first-apply` (seen with kubectl 1.37 and Flux after a webhook conversion dropped every entry)."""
    s = lifecycle(kube, group, applied=3, posted=1, fix_managed_fields=True)
    stripped = objects_path(group, "v1beta1", s.plural, "apps", "applied-02")
    kube.request("PATCH", stripped, [{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}],
                 "application/json-patch+json")
    ssa(kube, s, "v1beta1", "apps", "applied-02", "argocd-controller", {"size": 2, "color": "blue"})
    managers = [(e["manager"], e["operation"]) for e in kube.get(stripped)["metadata"]["managedFields"]]
    assert ("before-first-apply", "Update") in managers and ("argocd-controller", "Apply") in managers
    revision = etcd_reader.current_revision(cluster.etcd_url)

    out = run_module("crd_client_check", dict(auth_args(cluster), names=[s.crd_name], events=False,
                                              fail_on_error=False))
    crd = out["crds"][0]
    assert (crd["listed"], crd["checked_objects"], crd["applies"], crd["rivals"], crd["patches"]) == (4, 4, 3, 2, 2), crd
    # applied-00/01: argocd-controller changed a value it owns (.spec.color, the first in its fieldsV1) and the
    # rival's same change got 409 naming it
    tallies = {(t["manager"], t["operation"]): t for t in crd["by_manager"]}
    assert tallies[("argocd-controller", "Apply")] == {
        "manager": "argocd-controller", "operation": "Apply", "objects": 3, "changed": 2, "unchanged_only": 0,
        "conflicts_named": 2, "failed": 1}
    # the POSTed object's Update manager and before-first-apply: a dry-run merge patch under their names
    assert tallies[("before-first-apply", "Update")]["changed"] == 1
    assert sum(t["changed"] for (m, op), t in tallies.items() if op == "Update") == 2
    # applied-02: the owner's change is refused, naming the manager the apiserver credited when managedFields went
    [failure] = crd["failures"]
    assert (failure["object"], failure["manager"], failure["operation"], failure["status"]) == (
        "apps/applied-02", "argocd-controller", "Apply", 409), failure
    assert failure["message"].startswith("changing .spec.color: "), failure
    assert 'conflict with "before-first-apply" using %s: .spec.color' % s.new() in failure["message"], failure
    assert out["ok"] is False and crd["ok"] is False
    # what the check predicted is what a real client meets: the same change, no dry-run
    try:
        ssa(kube, s, "v1beta1", "apps", "applied-02", "argocd-controller", {"size": 2, "color": "blue-crdops"})
        raise AssertionError("the owner's change of .spec.color went through on the stripped object")
    except KubeError as exc:
        assert exc.status == 409 and 'conflict with "before-first-apply"' in exc.message, exc
    try:
        ssa(kube, s, "v1beta1", "apps", "applied-00", "crdops-client-check-rival", {"color": "blue-crdops"})
        raise AssertionError("a new manager changed .spec.color owned by argocd-controller without force")
    except KubeError as exc:
        assert exc.status == 409 and 'conflict with "argocd-controller"' in exc.message, exc
    changed = ssa(kube, s, "v1beta1", "apps", "applied-00", "argocd-controller", {"size": 0, "color": "blue-crdops"})
    assert changed["spec"] == {"size": 0, "color": "blue-crdops"}
    # the check itself wrote nothing (every request a dry-run); only the two applies above wrote
    written = [k for k in etcd_reader.keys_written_since(cluster.etcd_url, revision) if group in k]
    assert written == [f"/registry/{group}/widgets/apps/applied-00"], written

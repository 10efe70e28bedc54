"""Repair of an unreadable resource (objects stored at a version the CRD no longer has), on a real
kube-apiserver + etcd.

The broken state is built exactly as users reach it: objects stored at v1, storage flipped to v2, only some
(or none) of them re-stored, status.storedVersions set to [v2] by hand through the status subresource, and
release N+1 (v2 only) applied. Every LIST then fails with HTTP 500 StorageReadError. The repair must leave
every object readable, every key in etcd at v2, spec.versions [v2] and storedVersions [v2]; its check mode
must write nothing.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import yaml

from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.controlplane.kube import KubeError, make_crd, objects_path
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook, auth_args, run_module
from tests.integration.seed import Seeded, create_objects

REPO = Path(__file__).resolve().parents[2]
SCHEMA_V1 = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "index": {"type": "integer"}, "filler": {"type": "string"}}}}}}


def crd(s: Seeded, versions: list[tuple[str, bool, bool]]) -> dict:
    return make_crd(s.group, s.plural, s.kind, versions, s.scope)


def list_all(kube, s: Seeded, version: str = "v2") -> list[dict]:
    """A paginated LIST as kubectl sends it (limit=500): read from etcd, not from the watch cache."""
    return kube.get(objects_path(s.group, version, s.plural), limit=500)["items"]


def build_unreadable_resource(kube, group: str, count: int, restored: int, namespaces=None) -> Seeded:
    """Objects at v1; storage flipped to v2; `restored` of them re-stored; storedVersions [v2] by hand;
    release N+1 (v2 only) applied. Returns once every LIST fails with 500 StorageReadError."""
    s = Seeded(group, "gizmos", "Gizmo", "Namespaced" if namespaces else "Cluster")
    kube.apply_crd(crd(s, [("v1", True, True)]))
    refs = create_objects(kube, s, "v1", count, namespaces)
    kube.apply_crd(crd(s, [("v1", True, False), ("v2", True, True)]))
    for ns, name in refs[:restored]:
        kube.merge_patch(objects_path(group, "v2", s.plural, ns, name), {})
    path = kube.crd_path(s.crd_name)
    kube.merge_patch(path + "/status", {"status": {"storedVersions": ["v2"]}})
    current = kube.get_crd(s.crd_name)
    release_next = crd(s, [("v2", True, True)])
    release_next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    kube.put(path, release_next)
    kube.wait_established(s.crd_name)
    deadline = time.monotonic() + 30
    while True:  # until the v2-only storage is in use: then every LIST fails
        try:
            list_all(kube, s)
        except KubeError as exc:
            if exc.status == 500:
                return s
        if time.monotonic() > deadline:
            raise AssertionError("the broken state did not appear: LIST still succeeds")
        time.sleep(0.2)


def assert_unreadable(kube, s: Seeded, count: int, restored: int) -> dict:
    try:
        list_all(kube, s)
    except KubeError as exc:
        body = exc.body
        assert exc.status == 500 and body["reason"] == "StorageReadError", body
        assert "corrupt object" in body["message"] and f"/registry/{s.group}/{s.plural}/" in body["message"]
        assert f"invalid group/version: {s.group}/v1" in body["message"], body["message"]
        assert len(body["details"]["causes"]) == count - restored  # one cause per key still at v1
        return body
    raise AssertionError("LIST succeeded on the broken state")


def assert_repaired(kube, cluster, s: Seeded, count: int) -> None:
    assert len(list_all(kube, s)) == count  # every object readable again
    scan = scan_storage(cluster.etcd_url, s.group, s.plural)
    assert scan.total == count and scan.counts == {f"{s.group}/v2": count}, scan.counts
    live = kube.get_crd(s.crd_name)
    assert [v["name"] for v in live["spec"]["versions"]] == ["v2"]
    assert live["status"]["storedVersions"] == ["v2"]
    assert "migration.crdops.io/storage-repair" not in (live["metadata"].get("annotations") or {})


def repair_events(kube, s: Seeded) -> list[str]:
    events = kube.get("/api/v1/namespaces/default/events",
                      fieldSelector=f"involvedObject.name={s.crd_name}")["items"]
    return [e["reason"] for e in events]


def test_module_repairs_an_unreadable_resource_and_check_mode_writes_nothing(cluster, kube, group):
    count, restored = 30, 10
    s = build_unreadable_resource(kube, group, count, restored)
    body = assert_unreadable(kube, s, count, restored)
    print("kube-apiserver 1.37.2 LIST answer:", json.dumps(body["message"]))
    args = dict(auth_args(cluster), names=[s.crd_name], etcd_url=cluster.etcd_url, page_size=7)

    before = current_revision(cluster.etcd_url)
    plan = run_module("crd_storage_repair", args, check_mode=True)
    assert keys_written_since(cluster.etcd_url, before) == []
    assert not plan.get("failed"), plan
    entry = plan["crds"][0]
    assert plan["changed"] is True and entry["missing_versions"] == ["v1"]
    assert entry["evidence"]["etcd"] == ["v1"] and entry["evidence"]["list_error"] == ["v1"]
    assert entry["object_count"] == count and entry["list_before"]["unreadable_reported"] == count - restored
    assert any("add v1 back" in step for step in entry["steps"]) and any("remove v1" in step for step in entry["steps"])
    assert entry["etcd_before"]["counts"] == {f"{s.group}/v1": count - restored, f"{s.group}/v2": restored}
    assert_unreadable(kube, s, count, restored)  # still broken: check mode changed nothing

    result = run_module("crd_storage_repair", args)
    assert not result.get("failed"), result.get("msg")
    entry = result["crds"][0]
    assert result["changed"] is True and result["repaired"] == [s.crd_name]
    assert entry["added_versions"] == ["v1"] and entry["removed_versions"] == ["v1"]
    # the objects re-stored by hand still carry managedFields entries at v1 (created at v1), so the pass
    # writes them too, to move those entries to v2 (kubernetes#111937): every object is rewritten once
    assert entry["restore"]["listed"] == count and entry["restore"]["rewritten"] == count
    assert entry["restore"]["objects_with_stale_managed_fields"] == count
    assert entry["restore"]["unchanged"] == 0 and entry["restore"]["failed"] == 0
    assert entry["etcd_after"]["verified"] is True and entry["etcd_after"]["keys"] == count
    assert entry["readable_after"] == count and entry["versions_after"] == ["v2"]
    print("repair:", entry["message"])
    assert_repaired(kube, cluster, s, count)
    reasons = repair_events(kube, s)  # timestamps have 1 s resolution: compare as a set
    assert {"StorageRepairStarted", "StorageRepairSucceeded"} <= set(reasons) and "StorageRepairFailed" not in reasons

    again = run_module("crd_storage_repair", args)
    assert again["changed"] is False and "nothing to repair" in again["crds"][0]["message"]
    reliability.record(
        "repair of an unreadable resource (10 of 30 re-stored, storedVersions trimmed by hand, v1 removed): "
        "crd_storage_repair with etcd_url",
        f"LIST failed with 500 StorageReadError ({count - restored} keys at v1); check mode wrote nothing; v1 added "
        f"back, {entry['restore']['rewritten']} rewritten, {entry['restore']['unchanged']} unchanged, "
        f"storedVersions [v2], v1 removed again; {entry['readable_after']} of {count} listed; rerun: nothing to repair",
        count, scan_storage(cluster.etcd_url, s.group, s.plural).total, True)


def test_role_entry_point_repairs_with_previous_release_schema(cluster, kube, group, tmp_path):
    count = 24
    s = build_unreadable_resource(kube, group, count, 0, namespaces=["rep-a", "rep-b"])
    assert_unreadable(kube, s, count, 0)
    previous = crd(s, [("v1", True, False), ("v2", True, True)])
    previous["spec"]["versions"][0]["schema"] = SCHEMA_V1
    (tmp_path / "release-n.yaml").write_text(yaml.safe_dump(previous))
    inventory = {"all": {"hosts": {"repair-cluster": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
        "crd_upgrade_crd_names": [s.crd_name],
        "crd_upgrade_repair_previous_manifests": ["release-n.yaml"]}}}}  # relative: to the working directory
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    playbook = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_role": {"name": "crdops.migration.crd_upgrade", "tasks_from": "repair"}},
        {"ansible.builtin.copy": {"content": "{{ crd_upgrade_repair_result | to_json }}",
                                  "dest": str(tmp_path / "result.json")}, "check_mode": False}]}]
    (tmp_path / "repair.yml").write_text(yaml.safe_dump(playbook))

    before = current_revision(cluster.etcd_url)
    checked = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(tmp_path / "repair.yml"), "--check",
                               cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
    assert keys_written_since(cluster.etcd_url, before) == []
    planned = json.loads((tmp_path / "result.json").read_text())["crds"][0]
    assert planned["missing_versions"] == ["v1"] and planned["check_mode"] is True
    assert str(tmp_path / "release-n.yaml") in planned["schema_sources"]["v1"]
    assert_unreadable(kube, s, count, 0)

    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(tmp_path / "repair.yml"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    done = json.loads((tmp_path / "result.json").read_text())
    assert done["repaired"] == [s.crd_name] and done["crds"][0]["restore"]["rewritten"] == count
    assert_repaired(kube, cluster, s, count)

    rerun = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(tmp_path / "repair.yml"), cwd=tmp_path)
    assert rerun.returncode == 0 and json.loads((tmp_path / "result.json").read_text())["changed"] is False
    reliability.record(
        "repair of an unreadable resource (none re-stored, namespaced, no etcd_url): role `tasks_from: repair` with "
        "the previous release's schema",
        f"LIST failed with 500 StorageReadError ({count} keys at v1); --check wrote nothing; v1 added back, "
        f"{done['crds'][0]['restore']['rewritten']} rewritten, storedVersions [v2], v1 removed again; "
        f"{done['crds'][0]['readable_after']} of {count} listed; rerun: nothing to repair",
        count, scan_storage(cluster.etcd_url, s.group, s.plural).total, True)


def test_repair_sigkilled_mid_pass_leaves_the_objects_readable_and_a_rerun_finishes(cluster, kube, group):
    import os
    import signal

    from tests.integration.modrun import ModuleRun
    count = 120
    s = build_unreadable_resource(kube, group, count, 0)
    args = dict(auth_args(cluster), names=[s.crd_name], etcd_url=cluster.etcd_url, page_size=20, workers=1,
                max_qps=15)  # about 8 s of re-store: time to kill it in the middle
    run = ModuleRun("crd_storage_repair", args)
    deadline = time.monotonic() + 60
    while True:  # kill once the pass is under way: v1 is back and some keys are already at v2
        counts = scan_storage(cluster.etcd_url, s.group, s.plural).counts
        if counts.get(f"{s.group}/v2", 0) >= 20:
            break
        assert run.proc.poll() is None and time.monotonic() < deadline, run.result(5)
        time.sleep(0.1)
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(10)
    killed_at = scan_storage(cluster.etcd_url, s.group, s.plural).counts
    assert 20 <= killed_at.get(f"{s.group}/v2", 0) < count, killed_at
    live = kube.get_crd(s.crd_name)
    assert [v["name"] for v in live["spec"]["versions"]] == ["v2", "v1"]  # the version stays while objects need it
    assert len(list_all(kube, s)) == count  # readable in between

    again = run_module("crd_storage_repair", dict(args, max_qps=None))
    assert not again.get("failed"), again.get("msg")
    entry = again["crds"][0]
    assert entry["evidence"]["interrupted_repair"] == ["v1"] and entry["added_versions"] == []
    assert entry["removed_versions"] == ["v1"] and entry["restore"]["failed"] == 0
    assert entry["restore"]["rewritten"] == count - killed_at.get(f"{s.group}/v2", 0)
    assert_repaired(kube, cluster, s, count)
    reliability.record(
        "repair SIGKILLed mid-pass (unreadable resource, 120 objects, etcd_url)",
        f"killed with {killed_at.get(f'{s.group}/v2', 0)} of {count} keys at v2; v1 stayed in spec.versions, every "
        f"object readable; rerun continued from the annotation, rewrote {entry['restore']['rewritten']}, removed v1",
        count, scan_storage(cluster.etcd_url, s.group, s.plural).total, True)

"""A cluster the role has finished costs one read-only check on the next run, and only then.

On a real kube-apiserver + etcd: objects stored at v1alpha1, the role run with release N (v1alpha1 + v1beta1, storage
v1beta1) and N+1 (v1beta1 only) re-stores, proves (etcd), trims and upgrades. The second run finds nothing to do: every
phase is skipped, the result says so with what was checked, and nothing of the CRD is written (etcd: no key of it, its objects or its pass Lease).
Each thing a run would still have to do keeps the check from passing (the verdict the role's task computes, asked of
the engine against the same live cluster: a role run per case would cost half a minute each): a release N+1 that
differs from the live CRD, a missing record, one object with a managedFields entry at the version N+1 removed.
"""
from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

import yaml

from tests.controlplane import etcd_reader
from tests.controlplane.kube import KubeError, objects_path
from tests.integration.engine import transport_for
from tests.integration.modrun import ansible_playbook, auth_args, run_module
from tests.integration.seed import crd_at, seed_old_objects

from ansible_collections.crdops.migration.plugins.module_utils._crdops.run import nothing_to_do
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.pass_lease import lease_name, micro_time
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd

REPO = Path(__file__).resolve().parents[2]
COUNT = 6
APPLY = "application/apply-patch+yaml"  # JSON is YAML


def run_role(cluster, tmp_path: Path, name: str, files: dict) -> dict:
    """One run of the role (as fleet_upgrade.yml includes it); the cluster's crd_upgrade_result."""
    play = [{"name": "one cluster", "hosts": "clusters", "gather_facts": False, "tasks": [
        {"name": "Upgrade this cluster", "ansible.builtin.include_role": {
            "name": "crdops.migration.crd_upgrade", "rolespec_validate": False}},
        {"name": "Keep the result", "ansible.builtin.copy": {
            "content": "{{ crd_upgrade_result | to_json }}", "dest": str(tmp_path / f"{name}.json")}}]}]
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(files["release"])], "crd_upgrade_target_manifests": [str(files["target"])],
            "crd_upgrade_etcd_url": cluster.etcd_url, "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1,
            "crd_upgrade_writers_window": 0,
            # what this test is not about, off: the access reviews, the client check's sample of dry-run applies
            "crd_upgrade_preflight": False, "crd_upgrade_client_check": False}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {"done-cluster": host}}}}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml"))
    assert proc.returncode == 0, proc.stdout[-6000:]
    result = json.loads((tmp_path / f"{name}.json").read_text())
    result["_stdout"] = proc.stdout
    return result


def apply_release(kube, crd: dict) -> None:
    """Server-side apply of a CRD release as the role applies it (its field manager, forced)."""
    kube.request("PATCH", kube.crd_path(crd["metadata"]["name"]), crd, APPLY,
                 query={"fieldManager": "crdops-migration", "force": "true"})
    kube.wait_established(crd["metadata"]["name"])


def stale_entry(kube, s, release_n: dict, release_next: dict, name: str) -> None:
    """One object gets a managedFields entry at v1alpha1, the version release N+1 removed: a client applies at
    v1alpha1 while release N is back for a moment (a rollback and a roll forward), then release N+1 again."""
    apply_release(kube, release_n)
    body = {"apiVersion": s.old(), "kind": s.kind, "metadata": {"name": name, "namespace": "ns-a"}, "spec": {"size": 3}}
    deadline = time.monotonic() + 30
    while True:  # 404 until the apiserver serves v1alpha1 again
        try:
            kube.request("PATCH", objects_path(s.group, "v1alpha1", s.plural, "ns-a", name), body, APPLY,
                         query={"fieldManager": "team-a"})
            break
        except KubeError as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    apply_release(kube, release_next)


def entries_at(kube, s, version: str) -> int:
    items = kube.get(objects_path(s.group, "v1beta1", s.plural, "ns-a"))["items"]
    return sum(1 for o in items for e in o["metadata"].get("managedFields") or []
               if e.get("apiVersion") == f"{s.group}/{version}")


def record_generation(kube, name: str) -> tuple[int, int]:
    """(the generation the CRD's migration record names, the CRD's generation)."""
    crd = kube.get_crd(name)
    return json.loads(crd["metadata"]["annotations"][RECORD_ANNOTATION])["generation"], crd["metadata"]["generation"]


def verdict(cluster, files: dict, name: str, **extra) -> dict:
    """The module's verdict as the role's init task asks for it (crd_storage_info nothing_to_do)."""
    out = run_module("crd_storage_info", dict(auth_args(cluster), names=[name], count_objects=False,
                                              nothing_to_do=[name], target_manifests=[str(files["target"])],
                                              release_manifests=[str(files["release"])], **extra))
    assert not out.get("failed"), out.get("msg")
    return out["nothing_to_do"]


def another_run_and_every_apiserver(cluster, kube, files: dict, name: str) -> None:
    """A pass Lease another run still renews, and an apiserver given that cannot be asked, each leave something;
    the one apiserver given by its own URL does not (it serves and stores at the storage version)."""
    assert verdict(cluster, files, name, apiserver_endpoints=[cluster.server])["nothing_to_do"] is True
    down = "https://127.0.0.1:9"  # the discard port: nothing listens there
    left = verdict(cluster, files, name, apiserver_endpoints=[cluster.server, down])
    assert left["blockers"] and all(b.startswith(f"{name}: apiserver {down} could not be asked") for b in left["blockers"]), left
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": lease_name(name), "namespace": "default"},
             "spec": {"holderIdentity": "crdops@other-controller/pid-42/feedbeef", "leaseDurationSeconds": 30,
                      "renewTime": micro_time(time.time())}}
    kube.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", lease)
    try:
        held = verdict(cluster, files, name)
    finally:
        kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease_name(name)}")
    assert held["nothing_to_do"] is False, held
    assert [b for b in held["blockers"] if b.startswith(f"{name}: pass Lease held by holder crdops@other-controller")
            and b.endswith("(another run is writing)")], held


def test_a_done_cluster_takes_the_fast_path_and_one_thing_left_does_not(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, COUNT, namespaces=["ns-a"])
    release_n, release_next = crd_at(s, "v1beta1"), crd_at(s, "v1beta1", ("v1beta1",))
    files = {"release": tmp_path / "release.yaml", "target": tmp_path / "target.yaml"}
    files["release"].write_text(yaml.safe_dump(release_n))
    files["target"].write_text(yaml.safe_dump(release_next))

    first = run_role(cluster, tmp_path, "first", files)
    assert first["status"] == "ok" and "restore" in first["phases_done"] and first.get("nothing_to_do") is None, first
    assert etcd_reader.scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    # the apply of release N+1 bumped the generation; the role stamped its record with it (nothing else changed)
    recorded, generation = record_generation(kube, s.crd_name)
    assert recorded == generation, f"the record names generation {recorded}, the CRD has {generation}"

    # the rerun: one check, every phase skipped, nothing written
    revision = etcd_reader.current_revision(cluster.etcd_url)
    second = run_role(cluster, tmp_path, "second", files)
    # the apiservers renew their own Leases meanwhile: the CRD, its objects and its pass Lease are not written
    assert [k for k in etcd_reader.keys_written_since(cluster.etcd_url, revision) if group in k] == []
    assert second["status"] == "ok" and second["phases_done"] == ["init", "nothing_to_do"], second
    assert f"{COUNT} objects read" in second["nothing_to_do"], second["nothing_to_do"]
    assert "TASK [crdops.migration.crd_upgrade : Preflight |" not in second["_stdout"]
    assert [c["name"] for c in second["crds"]] == [s.crd_name] and second["crds"][0]["objects"] == COUNT, second
    another_run_and_every_apiserver(cluster, kube, files, s.crd_name)

    # each thing left keeps the check from passing (the engine's verdict, the same cluster)
    transport = transport_for(cluster, pool_size=2)
    releases = nothing_to_do.Releases(release=[release_n], target=[release_next])

    def blockers(rel: nothing_to_do.Releases = releases) -> list[str]:
        return nothing_to_do.decide(transport, [get_crd(transport, s.crd_name)], rel).blockers

    assert blockers() == []
    changed = copy.deepcopy(release_next)
    changed["spec"]["names"]["shortNames"] = ["wdg"]
    assert [b for b in blockers(nothing_to_do.Releases(release=[release_n], target=[changed]))
            if "applying release N+1 would change" in b and ".spec.names.shortNames" in b], "a release N+1 not in effect"
    record = kube.get_crd(s.crd_name)["metadata"]["annotations"][RECORD_ANNOTATION]
    kube.merge_patch(kube.crd_path(s.crd_name), {"metadata": {"annotations": {RECORD_ANNOTATION: None}}})
    try:
        assert [b for b in blockers() if "no migration record" in b], "a CRD with no record"
    finally:
        kube.merge_patch(kube.crd_path(s.crd_name), {"metadata": {"annotations": {RECORD_ANNOTATION: record}}})
    stale_entry(kube, s, release_n, release_next, "obj-000000")
    assert entries_at(kube, s, "v1alpha1") == 1
    # the rollback and roll forward were not the role's: its record does not name the generation they made
    recorded, generation = record_generation(kube, s.crd_name)
    assert blockers() == [f"{s.crd_name}: migration record not valid (stale: record is for CRD generation {recorded}, "
                          f"the CRD's generation is {generation})"]
    # stamped by hand, the objects are listed: the one entry at the version N+1 removed is found
    stamped = dict(json.loads(record), generation=generation)
    kube.merge_patch(kube.crd_path(s.crd_name), {"metadata": {"annotations": {RECORD_ANNOTATION: json.dumps(stamped)}}})
    left = blockers()
    assert [b for b in left if "1 managedFields entries at versions it does not serve" in b], left

"""A migration record proves the pass on the CRD it was written on, and on no other.

A release bundle is often built by exporting a live CRD (`kubectl get crd -o yaml`, status and uid removed); a
backup restore brings the same annotations back. Exported from a migrated CRD, the bundle carries that CRD's
record. Applied as release N to a cluster whose CRD has the same history (same storage version, same generation
after the flip), the record used to read as valid: the re-store was skipped as "recorded", and without an etcd URL
the trim and release N+1 followed, leaving every object stored at a version no longer served.

On a real kube-apiserver + etcd: a CRD migrated for real (record written), exported, the CRD deleted and created
again with the same history (a second install with its own objects at v1alpha1), then the role at defaults with the
export as release N and no etcd URL. Every key must be at v1beta1 in etcd afterwards and every object readable.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import objects_path
from tests.integration.modrun import ansible_playbook, auth_args, run_module
from tests.integration.seed import crd_at, seed_old_objects

REPO = Path(__file__).resolve().parents[2]
COUNT = 24
RECORD_ANNOTATION = "migration.crdops.io/storage-migration"


def exported(crd: dict) -> dict:
    """What `kubectl get crd -o yaml` gives with the server's own fields removed: annotations kept."""
    meta = {k: v for k, v in crd["metadata"].items()
            if k not in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")}
    return {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": meta, "spec": crd["spec"]}


def test_a_record_exported_with_the_crd_proves_nothing_on_another_install(cluster, kube, group, tmp_path):
    # the canary: migrated for real, its record names its own uid
    s = seed_old_objects(kube, group, COUNT, namespaces=["ns-a"], flip=True)
    migrated = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name]))
    assert migrated.get("failed") is not True, migrated
    canary = kube.get_crd(s.crd_name)
    record = json.loads(canary["metadata"]["annotations"][RECORD_ANNOTATION])
    assert record["crdUid"] == canary["metadata"]["uid"]
    bundle = tmp_path / "release-n.yaml"
    bundle.write_text(yaml.safe_dump(exported(canary)))

    # the same history on another install: v1alpha1 only, objects stored there, then release N flips it; its objects
    # carry no managedFields (restored from a backup, or created before 1.18), so no managedFields pass writes them
    kube.delete_crd(s.crd_name)
    seed_old_objects(kube, group, COUNT, namespaces=["ns-a"], flip=False)
    for item in kube.get(objects_path(group, "v1alpha1", s.plural, "ns-a"))["items"]:
        kube.request("PATCH", objects_path(group, "v1alpha1", s.plural, "ns-a", item["metadata"]["name"]),
                     [{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}],
                     "application/json-patch+json")
    assert kube.get_crd(s.crd_name)["metadata"]["uid"] != canary["metadata"]["uid"]
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): COUNT}
    target = tmp_path / "release-n1.yaml"
    target.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1beta1",))))

    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(bundle)], "crd_upgrade_target_manifests": [str(target)],
            "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0,
            "crd_upgrade_preflight": False, "crd_upgrade_client_check": False}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(
        {"all": {"children": {"clusters": {"hosts": {"restored-cluster": host}}}}}))
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")}))
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert "a valid migration record exists" not in proc.stdout
    assert "crdops annotations dropped from 1 CRD document" in proc.stdout, proc.stdout[-6000:]

    # proof by bytes: every key re-stored at the version that stays, every object readable there
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    live = kube.get_crd(s.crd_name)
    assert [v["name"] for v in live["spec"]["versions"]] == ["v1beta1"]
    assert len(kube.get(objects_path(group, "v1beta1", s.plural, "ns-a"))["items"]) == COUNT
    own = json.loads((live["metadata"].get("annotations") or {}).get(RECORD_ANNOTATION) or "{}")
    assert own["crdUid"] == live["metadata"]["uid"] and own["rewritten"] == COUNT, own
    kube.delete_crd(s.crd_name)

"""Clients keep working after the role: objects server-side applied at v1alpha1 by two managers,
the role run with release N (v1alpha1 + v1beta1, storage v1beta1) and N+1 (v1beta1 only). Afterwards:
(1) each original manager's apply at v1beta1 succeeds, (2) ownership survived: a third manager's non-forced
apply that changes a field of the first gets 409 naming that manager, (3) re-applying an unchanged manifest is
a no-op (resourceVersion unchanged); etcd holds every key at v1beta1.

And the gate "never apply release N+1 on doubt": a CRD trimmed by hand (no migration record) is refused.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.controlplane import etcd_reader
from tests.controlplane.kube import KubeError, objects_path
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import Seeded, crd_at
from tests.integration.test_client_check import lifecycle, ssa

REPO = Path(__file__).resolve().parents[2]
COUNT = 30


def run_role(cluster, tmp_path, s: Seeded, release_n: dict | None, release_next: dict, **host_vars):
    files = {}
    for key, doc in (("release", release_n), ("target", release_next)):
        if doc is not None:
            files[key] = tmp_path / f"{key}.yaml"
            files[key].write_text(yaml.safe_dump(doc))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(files["release"])] if "release" in files else [],
            "crd_upgrade_target_manifests": [str(files["target"])],
            "crd_upgrade_crd_names": [s.crd_name], "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}
    host.update(host_vars)
    inventory = {"all": {"children": {"clusters": {"hosts": {"mf-cluster": host}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "report")})
    return ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra_vars)


def manifests(i: int) -> dict:
    """What each manager applies to object i: argocd-controller owns .spec.size, flux .spec.color and a label."""
    return {"argocd-controller": {"spec": {"size": i}},
            "flux": {"spec": {"color": "blue"}, "labels": {"team": "flux"}}}


def apply_as(kube, s, version, i, manager, **kw):
    m = manifests(i)[manager]
    return ssa(kube, s, version, "apps", f"w-{i:02d}", manager, m["spec"], labels=m.get("labels"), **kw)


def test_managers_keep_applying_after_the_role(cluster, kube, group, tmp_path):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    kube.ensure_namespace("apps")
    for i in range(COUNT):
        for manager in ("argocd-controller", "flux"):
            apply_as(kube, s, "v1alpha1", i, manager)

    # both managers are accepted as clients that move after the upgrade: what is tested here is that their entries,
    # translated before release N+1, let them apply at v1beta1 then (test_role_real_clients moves them first)
    proc = run_role(cluster, tmp_path, s, crd_at(s, "v1beta1"), crd_at(s, "v1beta1", ("v1beta1",)),
                    crd_upgrade_accept_broken_clients=["argocd-controller", "flux"])
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert "clients can still server-side apply" in proc.stdout
    crd = kube.get_crd(s.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    assert crd["status"]["storedVersions"] == ["v1beta1"]
    scan = etcd_reader.scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.total == COUNT and dict(scan.counts) == {s.new(): COUNT}

    # (3) + (1): every original manager re-applies its unchanged manifest at v1beta1: accepted, nothing written
    for i in range(COUNT):
        rv = kube.get(objects_path(group, "v1beta1", s.plural, "apps", f"w-{i:02d}"))["metadata"]["resourceVersion"]
        for manager in ("argocd-controller", "flux"):
            out = apply_as(kube, s, "v1beta1", i, manager)
            assert out["metadata"]["resourceVersion"] == rv, (i, manager)
    # (1) with a change: each manager still owns and can change its own field
    changed = ssa(kube, s, "v1beta1", "apps", "w-00", "argocd-controller", {"size": 100})
    assert changed["spec"] == {"size": 100, "color": "blue"}
    changed = ssa(kube, s, "v1beta1", "apps", "w-01", "flux", {"color": "red"}, labels={"team": "flux"})
    assert changed["spec"] == {"size": 1, "color": "red"}
    # (2) ownership kept: a third manager changing the others' fields without force gets 409 naming them
    for field, value, owner in (("size", 7, "argocd-controller"), ("color", "green", "flux")):
        try:
            ssa(kube, s, "v1beta1", "apps", "w-02", "helm", {field: value})
            raise AssertionError(f"non-forced apply of .spec.{field} by helm succeeded")
        except KubeError as exc:
            assert exc.status == 409 and f'conflict with "{owner}"' in exc.message and f".spec.{field}" in exc.message, exc
    scan = etcd_reader.scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.total == COUNT and dict(scan.counts) == {s.new(): COUNT}
    reliability.record("objects server-side applied at the old version by two managers, role upgrade removes it",
                       f"apply by both managers at the new version works on {COUNT} of {COUNT}; ownership kept (409)",
                       COUNT, scan.total, True)


def test_release_next_is_not_applied_on_doubt(cluster, kube, group, tmp_path):
    """A CRD trimmed by hand (plain `{}` re-store, no record) keeps v1alpha1 in spec until the role removes it:
    with the re-store phase off, only the gate stands between it and release N+1."""
    s = lifecycle(kube, group, applied=3, posted=0, fix_managed_fields=False, remove_old=False)
    proc = run_role(cluster, tmp_path, s, None, crd_at(s, "v1beta1", ("v1beta1",)), crd_upgrade_migrate=False)
    assert proc.returncode != 0
    assert "release N+1 not applied" in proc.stdout and s.crd_name in proc.stdout, proc.stdout[-4000:]
    assert "no valid migration record (missing" in proc.stdout and "for its 3 objects" in proc.stdout
    crd = kube.get_crd(s.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"]  # N+1 not applied
    # which is what kept the clients working: the entries are still at v1alpha1, a version the CRD has
    out = ssa(kube, s, "v1beta1", "apps", "applied-00", "argocd-controller", {"size": 0, "color": "blue"})
    assert out["metadata"]["name"] == "applied-00"

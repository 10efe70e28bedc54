"""A Helm release whose stored manifest still says v1alpha1, with the opt-in rewrite: release N+1 is applied.

Helm rebuilds the objects of a release's current revision from its stored manifest on every `helm upgrade`; once
the CRD no longer serves a version that manifest declares, every upgrade fails ("unable to build kubernetes objects
from current release manifest", helm/helm#7361). Under conversion None the names are the same at every version,
so with `crd_upgrade_helm_rewrite: true` the role moves the stored documents' apiVersion to the storage version
just before release N+1 (as the helm-mapkubeapis plugin does), and Helm's own server-side apply entries with them.

Real Helm v4.3.2 (helm.sh/helm/v4, built from Go modules by tests/clients/build_helm.sh) on a real kube-apiserver +
etcd: a chart with four Widgets at v1alpha1 installed as a release; the role at defaults but for the opt-in; then
`helm upgrade` of the chart moved to v1beta1 works, on the same revision history.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.clients import Helm, write_chart
from tests.controlplane.etcd_reader import scan_storage
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import Seeded, crd_at

REPO = Path(__file__).resolve().parents[2]
NS = "shop"
RELEASE = "widgets"
COUNT = 4


def chart(tmp_path: Path, s: Seeded, version: str, size: int) -> Path:
    docs = [{"apiVersion": f"{s.group}/{version}", "kind": s.kind, "metadata": {"name": f"w-{i}"},
             "spec": {"size": size}} for i in range(COUNT)]
    return write_chart(tmp_path / "charts" / version, RELEASE, f"1.{size}.0", docs)


def run_role(cluster, tmp_path: Path, s: Seeded, **host_vars) -> tuple[str, dict]:
    release, target = tmp_path / "release.yaml", tmp_path / "target.yaml"
    release.write_text(yaml.safe_dump(crd_at(s, "v1beta1")))
    target.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1beta1",))))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(release)], "crd_upgrade_target_manifests": [str(target)],
            "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0,
            "crd_upgrade_preflight": False, **host_vars}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {
        "helm-cluster": host}}}}}))
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")}))
    assert proc.returncode == 0, proc.stdout[-6000:]
    report = json.loads(next((tmp_path / "r" / "latest").glob("*.json")).read_text())
    return proc.stdout, report["clusters"][0]


def test_a_helm_release_still_at_the_removed_version_is_moved_with_the_opt_in(cluster, kube, group, tmp_path):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    helm = Helm(cluster.kubeconfig, cluster.contexts()[0])
    helm.install(RELEASE, NS, chart(tmp_path, s, "v1alpha1", 1), check=True)

    out, result = run_role(cluster, tmp_path, s, crd_upgrade_helm_rewrite=True)
    assert result["status"] == "ok", (result.get("held_back"), out[-4000:])
    assert [r["release"] for r in result["helm_rewritten"]] == [f"{NS}/{RELEASE}"], result["helm_rewritten"]
    assert [v["name"] for v in kube.get_crd(s.crd_name)["spec"]["versions"]] == ["v1beta1"]
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    assert [h["status"] for h in helm.history(RELEASE, NS)] == ["deployed"]  # the same revision, moved in place

    # the release's next upgrade, with its chart moved to the version that stays, builds and applies
    upgraded = helm.upgrade(RELEASE, NS, chart(tmp_path, s, "v1beta1", 2))
    assert upgraded.ok, upgraded.stderr
    assert [h["status"] for h in helm.history(RELEASE, NS)] == ["superseded", "deployed"]
    sizes = [o["spec"]["size"] for o in kube.get(f"/apis/{group}/v1beta1/namespaces/{NS}/widgets")["items"]]
    assert sizes == [2] * COUNT
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    kube.delete_crd(s.crd_name)

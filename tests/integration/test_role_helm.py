"""Helm releases whose stored manifest still says v1alpha1: the opt-in rewrite as a new revision, a release the
run cannot read, and a rewrite the run may not write.

Helm rebuilds the objects of a release's current revision from its stored manifest on every `helm upgrade`; once
the CRD no longer serves a version that manifest declares, every upgrade fails ("unable to build kubernetes objects
from current release manifest", helm/helm#7361). Under conversion None the names are the same at every version,
so with `crd_upgrade_helm_rewrite: true` the role moves the stored documents' apiVersion to the storage version
just before release N+1 (as the helm-mapkubeapis plugin does), and Helm's own server-side apply entries with them.

Real Helm v4.3.2 (helm.sh/helm/v4, built from Go modules by tests/clients/build_helm.sh) on a real kube-apiserver +
etcd: a chart with four Widgets at v1alpha1 installed as a release; the role at defaults but for the opt-in; the
rewrite is revision 2 in `helm history` (Secret and ConfigMap drivers); then `helm upgrade` of the chart moved to
v1beta1 works and `helm rollback` to revision 2 works, while one to revision 1 fails as after helm-mapkubeapis.
(c) and (d) run as a ServiceAccount bound to docs/rbac/clusterrole.yaml: a release it cannot read, and a rewrite it
may not create, each hold release N+1 back for the CRD, saying why.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.clients import Helm, write_chart
from tests.controlplane.etcd_reader import scan_storage
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import Seeded, crd_at
from tests.integration.test_security import service_account_token, shipped_rules, token_args

REPO = Path(__file__).resolve().parents[2]
NS = "shop"
RELEASE = "widgets"
COUNT = 4


def chart(tmp_path: Path, s: Seeded, version: str, size: int) -> Path:
    docs = [{"apiVersion": f"{s.group}/{version}", "kind": s.kind, "metadata": {"name": f"w-{i}"},
             "spec": {"size": size}} for i in range(COUNT)]
    return write_chart(tmp_path / "charts" / version, RELEASE, f"1.{size}.0", docs)


def run_role(cluster, tmp_path: Path, s: Seeded, token: str | None = None, check: bool = False,
             **host_vars) -> tuple[str, dict]:
    """The fleet playbook on one cluster, as the admin kubeconfig or (``token``) a ServiceAccount; ``check``:
    with --check (the plan)."""
    release, target = tmp_path / "release.yaml", tmp_path / "target.yaml"
    release.write_text(yaml.safe_dump(crd_at(s, "v1beta1")))
    target.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1beta1",))))
    auth = ({"crd_upgrade_auth": token_args(cluster, token), "crd_upgrade_crd_names": [s.crd_name]} if token else
            {"crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0]})
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, **auth,
            "crd_upgrade_release_manifests": [str(release)], "crd_upgrade_target_manifests": [str(target)],
            "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0,
            "crd_upgrade_preflight": False, **host_vars}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {
        "helm-cluster": host}}}}}))
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")}),
                            *(["--check"] if check else []))
    assert proc.returncode == 0, proc.stdout[-6000:]
    report = json.loads(next((tmp_path / "r" / "latest").glob("*.json")).read_text())
    return proc.stdout, report["clusters"][0]


def report_text(tmp_path: Path, ext: str) -> str:
    return "\n".join(p.read_text() for p in (tmp_path / "r" / "latest").glob(f"*.{ext}"))


def served(kube, s: Seeded) -> list[str]:
    return [v["name"] for v in kube.get_crd(s.crd_name)["spec"]["versions"] if v.get("served")]


@pytest.mark.parametrize("driver", ["secret", "configmap"])
def test_a_helm_release_still_at_the_removed_version_is_moved_with_the_opt_in(cluster, kube, group, tmp_path, driver):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    ns = f"{NS}-{group.split('.')[0]}"
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    helm = Helm(cluster.kubeconfig, cluster.contexts()[0], driver=driver)
    helm.install(RELEASE, ns, chart(tmp_path, s, "v1alpha1", 1), check=True)

    out, result = run_role(cluster, tmp_path, s, crd_upgrade_helm_rewrite=True)
    assert result["status"] == "ok", (result.get("held_back"), out[-4000:])
    # the plan's words: the rewrite is for charts already moved
    assert "to rewrite as a new revision before release N+1" in out and "for charts already moved" in out
    assert [r["release"] for r in result["helm_rewritten"]] == [f"{ns}/{RELEASE}"], result["helm_rewritten"]
    assert [v["name"] for v in kube.get_crd(s.crd_name)["spec"]["versions"]] == ["v1beta1"]
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    # the rewrite is revision 2, as helm-mapkubeapis writes it; revision 1 is superseded
    history = helm.history(RELEASE, ns)
    assert [(h["revision"], h["status"]) for h in history] == [(1, "superseded"), (2, "deployed")], history
    assert f"crdops.migration: moved {s.kind} w-0, w-1, w-2 (+1) from {s.old()} to v1beta1" in history[1]["description"]
    stored = kube.get(f"/api/v1/namespaces/{ns}/{driver}s", labelSelector=f"owner=helm,name={RELEASE}")["items"]
    assert sorted(i["metadata"]["labels"]["version"] for i in stored) == ["1", "2"]  # in the release's own driver
    assert "A rollback to revision 1 or earlier still declares" in out, out[out.find("Upgrade | apply release N+1"):][:3000]

    # the release's next upgrade, with its chart moved to the version that stays, builds and applies
    upgraded = helm.upgrade(RELEASE, ns, chart(tmp_path, s, "v1beta1", 2))
    assert upgraded.ok, upgraded.stderr
    assert [h["status"] for h in helm.history(RELEASE, ns)] == ["superseded", "superseded", "deployed"]
    sizes = [o["spec"]["size"] for o in kube.get(f"/apis/{group}/v1beta1/namespaces/{ns}/widgets")["items"]]
    assert sizes == [2] * COUNT
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): COUNT}
    # a rollback to the rewritten revision builds (its manifest says v1beta1) and applies; one to revision 1,
    # from before the rewrite, still names v1alpha1 and fails, as after helm-mapkubeapis
    back = helm.rollback(RELEASE, ns, 2)
    assert back.ok, back.stderr
    assert [o["spec"]["size"] for o in kube.get(f"/apis/{group}/v1beta1/namespaces/{ns}/widgets")["items"]] == [1] * COUNT
    before = helm.rollback(RELEASE, ns, 1)
    assert not before.ok and "v1alpha1" in before.stderr, before.stderr
    kube.delete_crd(s.crd_name)


def test_c_a_configmap_release_the_shipped_clusterrole_cannot_read_holds_release_n_plus_1_back(
        cluster, kube, group, tmp_path):
    """Helm 4 with --server-side=false and HELM_DRIVER=configmap: Update entries (which the re-store relabels) and
    no last-applied annotation, so the release storage is the only evidence, and the shipped ClusterRole cannot
    list Secrets or ConfigMaps. The objects' Helm annotations name the release: it holds release N+1 back."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    ns = f"shop-{group.split('.')[0]}"
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    helm = Helm(cluster.kubeconfig, cluster.contexts()[0], driver="configmap")
    v1alpha1 = chart(tmp_path, s, "v1alpha1", 1)
    helm.install(RELEASE, ns, v1alpha1, extra=["--server-side=false"], check=True)
    assert kube.get(f"/api/v1/namespaces/{ns}/configmaps", labelSelector=f"owner=helm,name={RELEASE}")["items"]
    token = service_account_token(kube, f"helm-c-{group.split('.')[0]}", shipped_rules(group))
    words = f"Helm release {ns}/{RELEASE} (not checked: listing Secrets and ConfigMaps in namespace {ns} is " \
            f"forbidden; grant list on secrets in namespace {ns}"

    # the plan says it already
    out, plan = run_role(cluster, tmp_path, s, token=token, check=True)
    assert plan["status"] == "planned", (plan.get("status"), out[-4000:])
    assert any(words in c for h in plan["held_back"] for c in h["clients"]), plan["held_back"]
    assert f"Helm release {ns}/{RELEASE} not checked" in out, out[-4000:]

    out, result = run_role(cluster, tmp_path, s, token=token)
    assert result["status"] == "held back", (result.get("status"), out[-4000:])
    [held] = result["held_back"]
    assert held["crd"] == s.crd_name and any(words in c for c in held["clients"]), held
    assert f"Helm release {ns}/{RELEASE} not checked" in out, out[-4000:]  # the console
    for ext in ("md", "html"):  # and the report
        assert f"Helm release {ns}/{RELEASE} (not checked: listing Secrets and ConfigMaps" in report_text(tmp_path, ext)
    assert "v1alpha1" in served(kube, s)  # release N+1 not applied
    assert "cronSpec" not in out and token not in out

    # the release still upgrades with its unchanged chart
    upgraded = helm.upgrade(RELEASE, ns, v1alpha1, extra=["--server-side=false"])
    assert upgraded.ok, upgraded.stderr
    kube.delete_crd(s.crd_name)


def test_d_a_rewrite_the_identity_may_not_write_holds_release_n_plus_1_back_saying_why(
        cluster, kube, group, tmp_path):
    """The opt-in rewrite, run by an identity that may read and update the release Secrets but not create one:
    the new revision cannot be stored, nothing is written, and release N+1 is held back for the CRD."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    ns = f"shop-{group.split('.')[0]}"
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    helm = Helm(cluster.kubeconfig, cluster.contexts()[0])
    v1alpha1 = chart(tmp_path, s, "v1alpha1", 1)
    helm.install(RELEASE, ns, v1alpha1, check=True)
    rules = shipped_rules(group) + [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "update"]}]
    token = service_account_token(kube, f"helm-d-{group.split('.')[0]}", rules)

    out, result = run_role(cluster, tmp_path, s, token=token, crd_upgrade_helm_rewrite=True)
    assert result["status"] == "held back", (result.get("status"), out[-4000:])
    [held] = result["held_back"]
    assert held["crd"] == s.crd_name, held
    text = "; ".join(held["clients"])
    assert f"Helm release {ns}/{RELEASE} not rewritten as a new revision" in text, text
    assert f"forbidden (HTTP 403): grant create on secrets in namespace {ns}" in text, text
    assert "not rewritten as a new revision" in out, out[-4000:]
    assert "v1alpha1" in served(kube, s)  # release N+1 not applied
    assert [(h["revision"], h["status"]) for h in helm.history(RELEASE, ns)] == [(1, "deployed")]  # nothing written
    upgraded = helm.upgrade(RELEASE, ns, v1alpha1)
    assert upgraded.ok, upgraded.stderr
    kube.delete_crd(s.crd_name)


def test_d_a_release_the_run_may_read_and_write_in_its_namespace_only_is_rewritten(cluster, kube, group, tmp_path):
    """No list on Secrets in all namespaces, a Role in the release's namespace: the client check reads the release
    there (its objects name it), and the rewrite reads it there too and stores the new revision."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    ns = f"shop-{group.split('.')[0]}"
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    helm = Helm(cluster.kubeconfig, cluster.contexts()[0])
    helm.install(RELEASE, ns, chart(tmp_path, s, "v1alpha1", 1), check=True)
    sa = f"helm-ns-{group.split('.')[0]}"
    token = service_account_token(kube, sa, shipped_rules(group))
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/%s" % (ns, "%s")
    kube.post(rbac % "roles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": sa},
                               "rules": [{"apiGroups": [""], "resources": ["secrets"],
                                          "verbs": ["get", "list", "update", "create"]}]})
    kube.post(rbac % "rolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": sa},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "crdops-system"}]})

    out, result = run_role(cluster, tmp_path, s, token=token, crd_upgrade_helm_rewrite=True)
    assert result["status"] == "ok", (result.get("held_back"), out[-4000:])
    assert "1 named by the objects looked up in their namespace" in out, out[-4000:]
    assert served(kube, s) == ["v1beta1"]
    assert [(h["revision"], h["status"]) for h in helm.history(RELEASE, ns)] == [(1, "superseded"), (2, "deployed")]
    upgraded = helm.upgrade(RELEASE, ns, chart(tmp_path, s, "v1beta1", 2))
    assert upgraded.ok, upgraded.stderr
    kube.delete_crd(s.crd_name)

"""A release as projects ship it: one file holding the CRDs next to a Namespace and a Deployment.

The role reads such a bundle for release N and N+1, applies only its CRDs, and reports the documents it
skipped. The run goes through every phase on a real kube-apiserver + etcd with gateway-api's own CRDs:
v0.6.2 live (ReferenceGrant stored at v1alpha2); release N is v0.8.1 (ReferenceGrant's storage flips to
v1beta1); release N+1 is v1.2.0's ReferenceGrant (v1alpha2 removed: the skip-a-version trap unless every
object is re-stored and storedVersions trimmed) with v1.1.0's GatewayClass and Gateway (v1alpha2 removed;
the fixtures hold no v1.2.0 copy of those). etcd shows every ReferenceGrant re-stored.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError, objects_path
from tests.integration.modrun import ansible_playbook

REPO = Path(__file__).resolve().parents[2]
GW = REPO / "tests" / "data" / "fixtures" / "gateway-api"
GROUP = "gateway.networking.k8s.io"
# no HTTPRoute: a CRD of release N without a manifest in N+1 stops the upgrade, and v1.2.0 has none here
PLURALS = ("gatewayclasses", "gateways", "referencegrants")
RELEASE_N = [("v0.8.1", p) for p in PLURALS]
RELEASE_NEXT = [("v1.1.0", "gatewayclasses"), ("v1.1.0", "gateways"), ("v1.2.0", "referencegrants")]
GRANTS = 12  # ReferenceGrants stored at v1alpha2 before the run

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gateway-system"}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "gateway-controller", "namespace": "gateway-system"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gateway-controller"}},
                       "template": {"metadata": {"labels": {"app": "gateway-controller"}},
                                    "spec": {"containers": [{"name": "controller", "image": "example.test/gw:1"}]}}}}


def _crd_file(release: str, plural: str) -> Path:
    return GW / release / f"{GROUP}_{plural}.yaml"


def _bundle(path: Path, crds: list[tuple[str, str]]) -> Path:
    """Namespace first, the CRDs as shipped (upstream text, one document each), a Deployment last."""
    parts = ([yaml.safe_dump(NAMESPACE)] + [_crd_file(*c).read_text() for c in crds]
             + [yaml.safe_dump(DEPLOYMENT)])
    path.write_text("---\n" + "---\n".join(p.rstrip("\n") + "\n" for p in parts))
    return path


@pytest.fixture()
def gateway_api(kube):
    yield
    for plural in PLURALS:
        kube.delete_crd(f"{plural}.{GROUP}")


def _seed_v062(kube) -> None:
    for plural in PLURALS:
        crd = yaml.safe_load(_crd_file("v0.6.2", plural).read_text())
        crd.pop("status", None)
        kube.apply_crd(crd)
    kube.ensure_namespace("default")
    grant = yaml.safe_load((GW / "examples" / "reference-grant.yaml").read_text())
    for i in range(GRANTS):
        kube.post(objects_path(GROUP, "v1beta1", "referencegrants", "default"),
                  dict(grant, metadata={"name": f"grant-{i:02d}"}))
    kube.post(objects_path(GROUP, "v1beta1", "gatewayclasses"),
              {"apiVersion": f"{GROUP}/v1beta1", "kind": "GatewayClass", "metadata": {"name": "example"},
               "spec": {"controllerName": "example.test/gateway-controller"}})


def test_a_release_bundle_with_a_namespace_and_a_deployment_upgrades(cluster, kube, gateway_api, tmp_path):
    _seed_v062(kube)
    assert scan_storage(cluster.etcd_url, GROUP, "referencegrants").counts == {f"{GROUP}/v1alpha2": GRANTS}
    release_n = _bundle(tmp_path / "gateway-api-v0.8.1.manifest", RELEASE_N)
    release_next = _bundle(tmp_path / "gateway-api-v1.2.0.manifest", RELEASE_NEXT)
    inventory = {"all": {"children": {"clusters": {"hosts": {"bundle-cluster": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
        "crd_upgrade_release_manifests": [str(release_n)],
        "crd_upgrade_target_manifests": [str(tmp_path / "gateway-api-v1.2.*.manifest")],
        "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")})
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra_vars)
    assert proc.returncode == 0, proc.stdout[-6000:]

    # both bundles: their 2 documents that are not CRDs were skipped, named, and counted
    for bundle in (release_n, release_next):
        assert (f"2 documents skipped (not CRDs): {bundle} document 0 (Namespace), {bundle} document 4 "
                "(Deployment)") in proc.stdout, proc.stdout[-6000:]
    report = json.loads(next((tmp_path / "r" / "latest").glob("*.json")).read_text())
    (result,) = report["clusters"]
    assert result["status"] == "ok", result
    assert result["phases_done"] == ["init", "preflight", "discover", "storage_flip", "barrier", "restore", "verify",
                                     "trim", "upgrade"], result
    by_name = {c["name"]: c for c in result["crds"]}
    assert sorted(by_name) == sorted(f"{p}.{GROUP}" for p in PLURALS)  # CRDs only, every one of both bundles
    assert result["flipped"] == [f"referencegrants.{GROUP}"]
    grants = by_name[f"referencegrants.{GROUP}"]
    assert (grants["listed"], grants["rewritten"], grants["failed"]) == (GRANTS, GRANTS, 0), grants
    assert (grants["trimmed"], grants["upgraded"], grants["read_back"]) == (True, True, GRANTS), grants

    # the proof: every ReferenceGrant key in etcd is at the new storage version
    assert scan_storage(cluster.etcd_url, GROUP, "referencegrants").counts == {f"{GROUP}/v1beta1": GRANTS}
    # release N+1 is in effect: v1alpha2 is gone
    for plural, versions in (("gatewayclasses", ["v1", "v1beta1"]), ("gateways", ["v1", "v1beta1"]),
                             ("referencegrants", ["v1beta1"])):
        crd = kube.get_crd(f"{plural}.{GROUP}")
        assert [v["name"] for v in crd["spec"]["versions"]] == versions, plural
    assert kube.get_crd(f"referencegrants.{GROUP}")["status"]["storedVersions"] == ["v1beta1"]
    # the role applies CRDs only: the bundle's Namespace was not created
    with pytest.raises(KubeError):
        kube.get("/api/v1/namespaces/gateway-system")

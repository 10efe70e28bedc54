"""The live CRD follows the release (crd_release_follow on a real kube-apiserver + etcd, cert-manager's own CRDs).

cert-manager v1.7.1 drops `spec.conversion`. CRDs first created by `kubectl create` keep that manager as a co-owner
of every field, so a forced server-side apply of v1.7.1 under the role's manager leaves `conversion: Webhook` in
place, pointing at a webhook that is no longer deployed. cainjector writes the webhook's `caBundle` into the CRD
(no release declares it): it stays while a release still declares `spec.conversion`, and goes with it after.
"""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from tests.integration.modrun import auth_args, run_module

REPO = Path(__file__).resolve().parents[2]
CM = REPO / "tests" / "data" / "fixtures" / "cert-manager"
RELEASES = {"v1.5.4": "v1.5.4-rendered-openshift-3eca0fc", "v1.6.1": "v1.6.1-rendered-openshift-3e502b3",
            "v1.7.1": "v1.7.1-rendered-openshift-4ee45f0"}
PLURALS = ("certificaterequests", "certificates", "issuers")


def files(release: str) -> list[str]:
    return [str(CM / RELEASES[release] / f"{p}.cert-manager.io-crd.yaml") for p in PLURALS]


def crd_doc(release: str, plural: str) -> dict:
    return yaml.safe_load((CM / RELEASES[release] / f"{plural}.cert-manager.io-crd.yaml").read_text())


@pytest.fixture()
def ca_bundle(cluster) -> str:
    """What cainjector writes: a CA in PEM, base64 (the apiserver parses it); the test cluster's CA will do."""
    return base64.b64encode(cluster.pki.ca_cert.read_bytes()).decode()


@pytest.fixture()
def cert_manager_crds(kube, ca_bundle):
    """cert-manager v1.5.4's CRDs as `kubectl create` makes them, with cainjector's caBundle."""
    for plural in PLURALS:
        kube.delete_crd(f"{plural}.cert-manager.io")
    for plural in PLURALS:
        name = f"{plural}.cert-manager.io"
        kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd_doc("v1.5.4", plural),
                     query={"fieldManager": "kubectl-create"})
        kube.wait_established(name)
        kube.request("PATCH", kube.crd_path(name),
                     {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": ca_bundle}}}}},
                     "application/merge-patch+json", query={"fieldManager": "cainjector"})
    yield
    for plural in PLURALS:
        kube.delete_crd(f"{plural}.cert-manager.io")


def _owners_of_conversion(crd: dict, field: str = "f:conversion") -> list[str]:
    """Managers owning ``spec.conversion`` (or, with ``field="f:webhook"``, its webhook)."""
    out = []
    for e in crd["metadata"].get("managedFields") or []:
        conversion = (e.get("fieldsV1") or {}).get("f:spec", {}).get("f:conversion")
        if conversion is not None and (field == "f:conversion" or field in conversion):
            out.append(e["manager"])
    return out


def test_ca_bundle_stays_while_the_release_declares_conversion(cluster, kube, cert_manager_crds, ca_bundle):
    name = "certificates.cert-manager.io"
    v161 = crd_doc("v1.6.1", "certificates")
    kube.request("PATCH", kube.crd_path(name), json.dumps(v161).encode(), "application/apply-patch+yaml",
                 query={"fieldManager": "crdops-migration", "force": "true"})
    res = run_module("crd_release_follow", dict(auth_args(cluster), names=[name], manifests=[v161],
                                                previous_manifests=[crd_doc("v1.5.4", "certificates")]))
    assert not res.get("failed"), res
    assert res["changed"] is False and res["crds"][0]["removed"] == [], res
    conversion = kube.get_crd(name)["spec"]["conversion"]
    assert conversion["strategy"] == "Webhook"
    assert conversion["webhook"]["clientConfig"]["caBundle"] == ca_bundle


def test_after_v171_no_conversion_is_left_whoever_owned_it(cluster, kube, cert_manager_crds):
    """The module as the role runs it after release N+1 (the role's run: tests/integration/test_cert_manager.py)."""
    assert sorted(_owners_of_conversion(kube.get_crd("certificates.cert-manager.io"), "f:webhook")) == [
        "cainjector", "kubectl-create"]
    for plural in PLURALS:  # the role's apply of release N+1: forced server-side apply under its manager
        kube.request("PATCH", kube.crd_path(f"{plural}.cert-manager.io"),
                     json.dumps(crd_doc("v1.7.1", plural)).encode(), "application/apply-patch+yaml",
                     query={"fieldManager": "crdops-migration", "force": "true"})
    assert kube.get_crd("certificates.cert-manager.io")["spec"]["conversion"]["strategy"] == "Webhook"  # the bug
    res = run_module("crd_release_follow", dict(auth_args(cluster), manifests=files("v1.7.1"),
                                                previous_manifests=files("v1.5.4")))
    assert not res.get("failed"), res
    for plural in PLURALS:
        name = f"{plural}.cert-manager.io"
        crd = kube.get_crd(name)
        assert crd["spec"]["conversion"] == {"strategy": "None"}, crd["spec"]["conversion"]
        # nobody owns a webhook any more (the defaulted strategy None is the remover's, the struct its creator's)
        assert _owners_of_conversion(crd, "f:webhook") == [], crd["metadata"]["managedFields"]
        assert (f"{name}: removed spec.conversion with spec.conversion.webhook.clientConfig.caBundle, "
                "spec.conversion.webhook.clientConfig.service.port (owned by cainjector (Update), kubectl-create "
                "(Update))") in res["messages"], res["messages"]
    again = run_module("crd_release_follow", dict(auth_args(cluster), manifests=files("v1.7.1"),
                                                  previous_manifests=files("v1.5.4")))
    assert again["changed"] is False and all(c["removed"] == [] for c in again["crds"])  # idempotent

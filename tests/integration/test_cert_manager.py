"""cert-manager end to end: its own CRDs and its own conversion webhook (built from github.com/jetstack/cert-manager
v1.5.4, tests/certmanager), on a real kube-apiserver + etcd.

Installed state as after a pre-1.0 install: cert-manager v1.5.4's CRDs with the storage version on v1alpha2 (created
by `kubectl create`, cainjector's caBundle written into them), Certificates, Issuers and CertificateRequests written
at v1alpha2 by server-side apply, by client-side `kubectl apply` (the real kubectl, tests/clients) and by POST. The
role applies release N (v1.5.4, or v1.6.1 which stops serving v1alpha2, v1alpha3 and v1beta1) and N+1 (v1.7.1: v1
only, no spec.conversion). The webhook is reached at a `url:`, or as cert-manager ships it, at a `service:`: the
apiserver converts through the Service's endpoint, and the collection learns the field mapping through the
apiserver's service proxy.
"""
from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.certmanager import CertManagerWebhook, crds_for, write_crds
from tests.clients import Kubectl
from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError, objects_path
from tests.controlplane.webhook import non_loopback_address, publish_as_service
from tests.integration.modrun import ansible_playbook

GROUP = "cert-manager.io"
PLURALS = ("certificaterequests", "certificates", "issuers")
REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "cm-e2e"
CSR = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlJQ3ZEQ0NBYVFDQVFBd0R6RU5NQXNHQTFVRUF3d0VkR1Z6ZERDQ0FTSXcK"
COUNTS = {"certificates": 7, "issuers": 4, "certificaterequests": 3}  # one Certificate applied client-side
CLIENT_SIDE = "cert-csa"  # that Certificate: cert-manager renames its `organization` inside the annotation's names
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SELF_SIGNED = "bootstrap-selfsigned"  # the third Issuer
NOT_CA = 2  # CertificateRequests written with `isCA: false`
ACME = "letsencrypt-dns"  # the fourth: its solvers, an atomic list, are renamed inside by the conversion


@pytest.fixture()
def cm_webhook(cluster, kube, tmp_path, route):
    if route == "url":
        webhook = CertManagerWebhook(cluster.pki, tmp_path / "cm-webhook").start()
    else:
        address = non_loopback_address()
        if address is None:
            pytest.skip("no non-loopback IPv4 address on this machine: the apiserver does not proxy to loopback")
        service = (f"cert-manager-{uuid.uuid4().hex[:6]}", "cert-manager-webhook")  # a namespace of its own
        webhook = CertManagerWebhook(cluster.pki, tmp_path / "cm-webhook", host=address, service=service).start()
        publish_as_service(kube, webhook, *service)
    yield webhook
    webhook.stop()


@pytest.fixture()
def installed(cluster, kube, cm_webhook):
    """v1.5.4's CRDs stored at v1alpha2 (kubectl create), the caBundle injected, objects written at v1alpha2."""
    for plural in PLURALS:
        kube.delete_crd(f"{plural}.{GROUP}")
    docs = crds_for("v1.5.4", cm_webhook, storage="v1alpha2")
    for doc in docs:
        bundle = doc["spec"]["conversion"]["webhook"]["clientConfig"].pop("caBundle")
        kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc,
                     query={"fieldManager": "kubectl-create"})
        kube.wait_established(doc["metadata"]["name"])
        kube.request("PATCH", kube.crd_path(doc["metadata"]["name"]),
                     {"spec": {"conversion": {"webhook": {"clientConfig": {"caBundle": bundle}}}}},
                     "application/merge-patch+json", query={"fieldManager": "cainjector"})
    kube.ensure_namespace(NAMESPACE)
    _write_objects(kube)
    Kubectl(cluster.kubeconfig, cluster.contexts()[0]).apply([_client_side_certificate("v1alpha2")]).check()
    yield docs
    for plural in PLURALS:
        kube.delete_crd(f"{plural}.{GROUP}")


def _certificate(i: int) -> dict:
    return {"apiVersion": f"{GROUP}/v1alpha2", "kind": "Certificate", "metadata": {"name": f"cert-{i}",
                                                                                   "namespace": NAMESPACE},
            "spec": {"secretName": f"cert-{i}-tls", "commonName": f"svc-{i}.example.com",
                     "dnsNames": [f"svc-{i}.example.com"], "organization": ["Example"], "keyAlgorithm": "ecdsa",
                     "keySize": 256, "renewBefore": "240h", "issuerRef": {"name": "issuer-0", "kind": "Issuer"}}}


def _client_side_certificate(version: str, organization: bool = True) -> dict:
    """The Certificate `kubectl apply` writes; at v1 `organization` is `subject.organizations`, and the v1 manifest
    can leave it out (`organization=False`) for kubectl to prune."""
    spec = {"secretName": "csa-tls", "commonName": "csa.example.com", "dnsNames": ["csa.example.com"],
            "issuerRef": {"name": "issuer-0", "kind": "Issuer"}}
    if organization:
        spec.update({"organization": ["Example"]} if version == "v1alpha2" else {"subject": {"organizations": ["Example"]}})
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Certificate",
            "metadata": {"name": CLIENT_SIDE, "namespace": NAMESPACE}, "spec": spec}


def _self_signed_issuer(version: str, spec: dict) -> dict:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Issuer",
            "metadata": {"name": SELF_SIGNED, "namespace": NAMESPACE}, "spec": spec}


def _acme_issuer(version: str, provider: str, project: str) -> dict:
    """An ACME Issuer with one DNS-01 solver; `provider` is `clouddns` at v1alpha2 and `cloudDNS` at v1."""
    solver = {"selector": {"dnsZones": ["example.com"]},
              "dns01": {provider: {"project": project,
                                   "serviceAccountSecretRef": {"name": "clouddns-sa", "key": "key.json"}}}}
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Issuer", "metadata": {"name": ACME, "namespace": NAMESPACE},
            "spec": {"acme": {"server": "https://acme.example.com/directory",
                              "privateKeySecretRef": {"name": "acme-account"}, "solvers": [solver]}}}


def _write_objects(kube) -> None:
    """Half the Certificates by server-side apply (manager `kubectl`, as `kubectl apply --server-side`), half by
    POST; the bootstrap Issuer `spec: {selfSigned: {}}` by server-side apply (its entry owns a struct and none of
    its fields: `f:spec: {f:selfSigned: {}}`), an ACME Issuer by server-side apply (its entry owns the atomic list
    `f:solvers`), the other Issuers by POST."""
    for i in range(COUNTS["certificates"] - 1):
        path = objects_path(GROUP, "v1alpha2", "certificates", NAMESPACE)
        if i % 2:
            kube.request("POST", path, _certificate(i), query={"fieldManager": "kubectl-create"})
        else:
            kube.request("PATCH", f"{path}/cert-{i}", json.dumps(_certificate(i)).encode(),
                         "application/apply-patch+yaml", query={"fieldManager": "kubectl"})
    for i in range(COUNTS["issuers"] - 2):
        kube.request("POST", objects_path(GROUP, "v1alpha2", "issuers", NAMESPACE),
                     {"apiVersion": f"{GROUP}/v1alpha2", "kind": "Issuer",
                      "metadata": {"name": f"issuer-{i}", "namespace": NAMESPACE},
                      "spec": {"ca": {"secretName": f"ca-key-pair-{i}"}}})
    kube.request("PATCH", objects_path(GROUP, "v1alpha2", "issuers", NAMESPACE, SELF_SIGNED),
                 json.dumps(_self_signed_issuer("v1alpha2", {"selfSigned": {}})).encode(),
                 "application/apply-patch+yaml", query={"fieldManager": "kubectl"})
    kube.request("PATCH", objects_path(GROUP, "v1alpha2", "issuers", NAMESPACE, ACME),
                 json.dumps(_acme_issuer("v1alpha2", "clouddns", "dns-project")).encode(),
                 "application/apply-patch+yaml", query={"fieldManager": "kubectl"})
    for i in range(COUNTS["certificaterequests"]):
        kube.request("POST", objects_path(GROUP, "v1alpha2", "certificaterequests", NAMESPACE),
                     {"apiVersion": f"{GROUP}/v1alpha2", "kind": "CertificateRequest",
                      "metadata": {"name": f"req-{i}", "namespace": NAMESPACE},
                      "spec": {"csr": CSR, "issuerRef": {"name": "issuer-0"}, **_is_ca(i)}})


def _is_ca(i: int) -> dict:
    """`isCA: false` written explicitly on the first NOT_CA requests: cert-manager's Go types drop it (`omitempty`),
    so the conversion stores the request without it, the same value when read."""
    return {"isCA": False} if i < NOT_CA else {}


def run_role(cluster, tmp_path, webhook, installed, release_n: str):
    """The fleet playbook (the role, then the fleet report) over this one cluster."""
    host = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
        "crd_upgrade_installed_manifests": write_crds(tmp_path / "installed", "installed", installed),
        "crd_upgrade_release_manifests": write_crds(tmp_path / "n", release_n, crds_for(release_n, webhook)),
        "crd_upgrade_target_manifests": write_crds(tmp_path / "n1", "v1.7.1", crds_for("v1.7.1", webhook)),
        "crd_upgrade_etcd_url": cluster.etcd_url,
        "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_preflight": False,
        "crd_upgrade_writers_window": 0,  # nothing else writes here: no request counters to compare
        # the objects' appliers are taken as moving with the upgrade (v1.5.4 still serves v1alpha2, so their entries
        # would hold release N+1 back): what is tested is that their entries are translated for them
        "crd_upgrade_accept_broken_clients": True}
    inventory = {"all": {"children": {"clusters": {"hosts": {"cm-e2e": host}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "report")})
    return ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra_vars)


@pytest.mark.parametrize(("release_n", "route"), [("v1.5.4", "url"), ("v1.6.1", "url"), ("v1.6.1", "service")])
def test_cert_manager_upgrade_to_v171_leaves_no_conversion_and_every_key_at_v1(
        cluster, kube, cm_webhook, installed, tmp_path, release_n, route):
    total = sum(COUNTS.values())
    before = {p: scan_storage(cluster.etcd_url, GROUP, p).counts for p in PLURALS}
    assert before == {p: {f"{GROUP}/v1alpha2": COUNTS[p]} for p in PLURALS}, before
    (applied,) = kube.get(objects_path(GROUP, "v1alpha2", "issuers", NAMESPACE, SELF_SIGNED))["metadata"]["managedFields"]
    assert applied["fieldsV1"] == {"f:spec": {"f:selfSigned": {}}}, applied  # a struct with none of its fields
    (acme,) = kube.get(objects_path(GROUP, "v1alpha2", "issuers", NAMESPACE, ACME))["metadata"]["managedFields"]
    assert acme["fieldsV1"]["f:spec"]["f:acme"]["f:solvers"] == {}, acme  # the list owned as one value
    proc = run_role(cluster, tmp_path, cm_webhook, installed, release_n)
    assert proc.returncode == 0, proc.stdout[-8000:]
    # the storage diff after the flip compared every sampled object; with v1.6.1 through cert-manager's webhook
    for plural in PLURALS:
        n = COUNTS[plural]
        line = f"{plural}.{GROUP}: {n} of {n} stored objects compared at v1"
        assert line in proc.stdout, proc.stdout[-8000:]
        if release_n == "v1.6.1":
            assert f"{n} stored at a version not served compared through the conversion webhook" in proc.stdout
    # before release N is applied: the same values forecast through its webhook and schema, nothing lost
    n = COUNTS["certificaterequests"]
    assert (f"certificaterequests.{GROUP} after release N (storage version v1): {n} of {n} sampled stored values taken "
            f"through release N's conversion and schema; normalised by the conversion .spec.isCA ({NOT_CA} of {n})"
            in proc.stdout), proc.stdout[-8000:]
    if release_n == "v1.6.1":  # the webhook drops `isCA: false`: named, not a loss that stops the run
        assert (f"certificaterequests.{GROUP}: {n} of {n} stored objects compared at v1, {NOT_CA} would change beyond "
                f"apiVersion; normalised by the conversion (a zero value left out, the same value when read) "
                f".spec.isCA ({NOT_CA} of {n})") in proc.stdout, proc.stdout[-8000:]
    assert "NOT COMPARED" not in proc.stdout
    # the proof: every key in etcd at v1
    after = {p: scan_storage(cluster.etcd_url, GROUP, p).counts for p in PLURALS}
    assert after == {p: {f"{GROUP}/v1": COUNTS[p]} for p in PLURALS}, after
    assert sum(sum(c.values()) for c in after.values()) == total
    for plural in PLURALS:
        crd = kube.get_crd(f"{plural}.{GROUP}")
        assert crd["spec"]["conversion"] == {"strategy": "None"}, crd["spec"]["conversion"]
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"] and crd["status"]["storedVersions"] == ["v1"]
        # (the releases given to the role carry the caBundle with their url:, so it is declared, not injected)
        assert (f"{plural}.{GROUP}: removed spec.conversion (owned by cainjector (Update), kubectl-create (Update))"
                in proc.stdout), proc.stdout[-8000:]
    # content as cert-manager converts it: organization -> subject.organizations, keyAlgorithm/keySize -> privateKey
    cert = kube.get(objects_path(GROUP, "v1", "certificates", NAMESPACE, "cert-2"))
    assert cert["spec"]["subject"] == {"organizations": ["Example"]}
    assert cert["spec"]["privateKey"] == {"algorithm": "ECDSA", "size": 256}
    assert cert["spec"]["commonName"] == "svc-2.example.com" and cert["spec"]["renewBefore"].startswith("240h")
    _ownership_kept(kube)
    _self_signed_ownership_kept(kube, applied)
    _acme_solvers_ownership_kept(kube, acme)
    assert "ownership reduced" not in proc.stdout, proc.stdout[-8000:]
    _client_side_prunes_across_the_rename(cluster, kube)
    _mapping_was_exact(tmp_path / "report", route)


def _mapping_was_exact(report_dir, route: str) -> None:
    """The report says, per CRD, that ownership was translated with the exact mapping: made-up objects sent to
    cert-manager's webhook at its `url:`, or through the apiserver's service proxy for `service:`."""
    report = json.loads((report_dir / "latest" / "fleet-report.json").read_text())
    (cluster_row,) = report["clusters"]
    for crd in cluster_row["crds"]:
        mappings = [m for m in crd["managed_fields"]["mappings"] if m["from_version"] == "v1alpha2"]
        assert mappings, (crd["name"], crd["managed_fields"])
        for m in mappings:
            assert m["method"] == "exact" and m["note"].endswith(f"({route})"), (crd["name"], m)


KEPT_PATHS = ("f:commonName", "f:dnsNames", "f:issuerRef", "f:renewBefore")  # the same paths at v1alpha2 and v1


def _apply_v1(kube, name: str, manager: str, common_name: str) -> dict:
    body = {"apiVersion": f"{GROUP}/v1", "kind": "Certificate", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"secretName": f"{name}-tls", "commonName": common_name, "dnsNames": [common_name],
                     "renewBefore": "240h", "issuerRef": {"name": "issuer-0", "kind": "Issuer"}}}
    return kube.request("PATCH", objects_path(GROUP, "v1", "certificates", NAMESPACE, name),
                        json.dumps(body).encode(), "application/apply-patch+yaml", query={"fieldManager": manager})


def _ownership_kept(kube) -> None:
    """The server-side applier (`kubectl`) still owns, at v1, the paths cert-manager keeps, and applies without
    force; a new manager conflicts naming it; no object was stripped to `before-first-apply`."""
    items = kube.get(objects_path(GROUP, "v1", "certificates", NAMESPACE))["items"]
    assert len(items) == COUNTS["certificates"]
    for obj in items:
        managers = [e["manager"] for e in obj["metadata"].get("managedFields") or []]
        assert managers and "before-first-apply" not in managers, (obj["metadata"]["name"], managers)
    applied = [o for o in items if o["metadata"]["name"] != CLIENT_SIDE and int(o["metadata"]["name"][5:]) % 2 == 0]
    for obj in applied:
        (entry,) = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "kubectl"]
        assert (entry["operation"], entry["apiVersion"]) == ("Apply", f"{GROUP}/v1"), entry
        spec = entry["fieldsV1"]["f:spec"]
        assert all(p in spec for p in KEPT_PATHS), (obj["metadata"]["name"], sorted(spec))
        name = obj["metadata"]["name"]
        changed = _apply_v1(kube, name, "kubectl", f"renamed-{name}.example.com")  # no force: no conflict
        assert changed["spec"]["commonName"] == f"renamed-{name}.example.com"
        with pytest.raises(KubeError) as conflict:
            _apply_v1(kube, name, "argocd", f"other-{name}.example.com")
        message = conflict.value.body["message"]  # 'Apply failed with 2 conflicts: conflicts with "kubectl": ...'
        assert conflict.value.status == 409 and 'with "kubectl"' in message and ".spec.commonName" in message


def _self_signed_ownership_kept(kube, applied: dict) -> None:
    """The bootstrap Issuer's `kubectl` entry owns the struct `spec.selfSigned` at v1 (its manager, operation and
    time kept), and a re-apply at v1 that declares `ca` instead prunes `selfSigned`: only an owner's apply does."""
    path = objects_path(GROUP, "v1", "issuers", NAMESPACE, SELF_SIGNED)
    issuer = kube.get(path)
    mf = issuer["metadata"]["managedFields"]
    assert [e["manager"] for e in mf] == ["kubectl"], mf
    (entry,) = mf
    assert entry == dict(applied, apiVersion=f"{GROUP}/v1"), (applied, entry)  # manager, operation, time, paths
    switched = kube.request("PATCH", path, json.dumps(_self_signed_issuer("v1", {"ca": {"secretName": "root-ca"}})
                                                      ).encode(),
                            "application/apply-patch+yaml", query={"fieldManager": "kubectl"})
    assert switched["spec"] == {"ca": {"secretName": "root-ca"}}, switched["spec"]


def _acme_solvers_ownership_kept(kube, applied: dict) -> None:
    """The ACME Issuer's `kubectl` entry still owns the solvers list at v1, though cert-manager renamed
    `dns01.clouddns` to `dns01.cloudDNS` inside it: its owner changes it without force, another manager conflicts
    naming `kubectl`."""
    path = objects_path(GROUP, "v1", "issuers", NAMESPACE, ACME)
    issuer = kube.get(path)
    assert issuer["spec"]["acme"]["solvers"][0]["dns01"]["cloudDNS"]["project"] == "dns-project"
    (entry,) = issuer["metadata"]["managedFields"]
    assert entry == dict(applied, apiVersion=f"{GROUP}/v1"), (applied, entry)  # manager, operation, time, paths
    changed = kube.request("PATCH", path, json.dumps(_acme_issuer("v1", "cloudDNS", "new-project")).encode(),
                           "application/apply-patch+yaml", query={"fieldManager": "kubectl"})
    assert changed["spec"]["acme"]["solvers"][0]["dns01"]["cloudDNS"]["project"] == "new-project"
    with pytest.raises(KubeError) as conflict:
        kube.request("PATCH", path, json.dumps(_acme_issuer("v1", "cloudDNS", "other-project")).encode(),
                     "application/apply-patch+yaml", query={"fieldManager": "argocd"})
    message = conflict.value.body["message"]
    assert conflict.value.status == 409 and 'with "kubectl"' in message and ".spec.acme.solvers" in message, message


def _client_side_prunes_across_the_rename(cluster, kube) -> None:
    """The client-side applied Certificate's last-applied annotation names `subject.organizations` at v1 and is
    still kubectl's, so a re-apply at v1 whose manifest drops it prunes it (with the v1alpha2 names kept, kubectl
    would not know `subject` was its own)."""
    path = objects_path(GROUP, "v1", "certificates", NAMESPACE, CLIENT_SIDE)
    meta = kube.get(path)["metadata"]
    applied = json.loads(meta["annotations"][LAST_APPLIED])
    assert applied["apiVersion"] == f"{GROUP}/v1", applied
    assert applied["spec"] == _client_side_certificate("v1")["spec"], applied["spec"]
    owners = [e["manager"] for e in meta["managedFields"]
              if "f:" + LAST_APPLIED in e["fieldsV1"].get("f:metadata", {}).get("f:annotations", {})]
    assert owners == ["kubectl-client-side-apply"], meta["managedFields"]
    kubectl = Kubectl(cluster.kubeconfig, cluster.contexts()[0])
    kubectl.apply([_client_side_certificate("v1", organization=False)]).check()
    assert "subject" not in kube.get(path)["spec"], kube.get(path)["spec"]

"""Client-side `kubectl apply` prunes inside an atomic struct the conversion webhook renames, on a real apiserver + etcd.

`spec.tls` is marked `x-kubernetes-map-type: atomic` at both versions, and the test webhook renames `tls.secret` to
`tls.secretName` from v1alpha1 to v1beta1. Server-side apply owns such a struct whole, but kubectl diffs a custom
resource with a JSON merge patch, which goes into it key by key: the last-applied annotation the re-store writes must
name `secretName`, or an apply at v1beta1 that leaves it out finds nothing of its own to delete and it stays.

1. A Widget is applied with the real kubectl, client-side, at v1alpha1; storage moves to v1beta1.
2. The re-store with removed_versions [v1alpha1] rewrites the annotation: `tls` holds the new inner names, and
   the annotation is still owned by `kubectl-client-side-apply`.
3. kubectl applies at v1beta1 a manifest whose `tls` leaves out `secretName`: it is pruned.
"""
from __future__ import annotations

import json

import pytest

from tests.clients import Kubectl
from tests.controlplane.kube import Kube, objects_path
from tests.controlplane.webhook import WebhookServer, widget_crd
from tests.integration.modrun import auth_args, run_module

PLURAL, KIND, NS, NAME = "widgets", "Widget", "la-atomic", "tls-1"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def crd(group: str, webhook: WebhookServer, storage: str) -> dict:
    return widget_crd(group, webhook, storage, atomic_tls=True)


def widget(group: str, version: str, spec: dict) -> dict:
    return {"apiVersion": f"{group}/{version}", "kind": KIND, "metadata": {"name": NAME, "namespace": NS},
            "spec": spec}


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def test_client_side_apply_prunes_a_field_renamed_inside_an_atomic_struct(cluster, kube: Kube, group, webhook):
    kube.apply_crd(crd(group, webhook, "v1alpha1"))
    kube.ensure_namespace(NS)
    kubectl = Kubectl(cluster.kubeconfig, cluster.contexts()[0])
    kubectl.apply([widget(group, "v1alpha1", {"size": 1, "tls": {"secret": "web-tls", "issuer": "ca"}})]).check()
    kube.apply_crd(crd(group, webhook, "v1beta1"))

    result = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[f"{PLURAL}.{group}"],
                                                    removed_versions=[f"{PLURAL}.{group}/v1alpha1"]))
    assert not result.get("failed"), result.get("msg")
    (done,) = result["crds"]
    assert done["last_applied_translated"] == 1 and done["failed"] == 0, done
    (row,) = done["last_applied"]
    assert (row["manager"], row["kept"], row["paths_dropped"]) == ("kubectl-client-side-apply", 0, []), row

    path = objects_path(group, "v1beta1", PLURAL, NS, NAME)
    meta = kube.get(path)["metadata"]
    owners = [e["manager"] for e in meta["managedFields"]
              if "f:" + LAST_APPLIED in e["fieldsV1"].get("f:metadata", {}).get("f:annotations", {})]
    assert owners == ["kubectl-client-side-apply"], meta["managedFields"]
    applied = json.loads(meta["annotations"][LAST_APPLIED])  # checked after the apply: the pruning comes first

    kubectl.apply([widget(group, "v1beta1", {"replicas": 1, "tls": {"issuer": "ca"}})]).check()
    assert kube.get(path)["spec"]["tls"] == {"issuer": "ca"}, kube.get(path)["spec"]  # secretName pruned
    assert applied["apiVersion"] == f"{group}/v1beta1", applied
    assert applied["spec"] == {"replicas": 1, "tls": {"secretName": "web-tls", "issuer": "ca"}}, applied["spec"]

"""The repair's guards on a real kube-apiserver + etcd: the storage diff before its re-store, the pass Lease, and
the owners of spec.versions.

Broken state as users reach it, with the CRD applied by a release tool (server-side apply, manager `helm`):
objects written at v1 with a field v2's schema does not have (`spec.legacy`), storage flipped to v2,
storedVersions trimmed to [v2] by hand, v2-only release applied; every LIST fails (StorageReadError).
"""
from __future__ import annotations

import json
import time

import pytest

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError, objects_path
from tests.integration.modrun import auth_args, run_module

COUNT = 6
APPLY = "application/apply-patch+yaml"


def schema(*fields: str) -> dict:
    return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        f: {"type": "string"} for f in fields}}}}}


def crd(group: str, versions: list[tuple[str, bool, bool]]) -> dict:
    schemas = {"v1": schema("name", "legacy"), "v2": schema("name")}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"gadgets.{group}"},
            "spec": {"group": group, "scope": "Cluster",
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                     "versions": [{"name": v, "served": served, "storage": storage, "schema": schemas[v]}
                                  for v, served, storage in versions]}}


def helm_apply(kube, doc: dict, force: bool = False, dry_run: bool = False) -> dict:
    query = {"fieldManager": "helm"}
    if force:
        query["force"] = "true"
    if dry_run:
        query["dryRun"] = "All"
    return kube.request("PATCH", kube.crd_path(doc["metadata"]["name"]), json.dumps(doc).encode(), APPLY, query=query)


def versions_owners(kube, name: str) -> list[str]:
    return sorted(e["manager"] for e in kube.get_crd(name)["metadata"]["managedFields"]
                  if "f:versions" in (e.get("fieldsV1") or {}).get("f:spec", {}))


def build_broken(kube, group: str) -> str:
    name = f"gadgets.{group}"
    helm_apply(kube, crd(group, [("v1", True, True)]))
    kube.wait_established(name)
    for i in range(COUNT):
        _post_when_served(kube, group, {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": f"g{i}"},
                                        "spec": {"name": f"g{i}", "legacy": f"kept-only-at-v1-{i}"}})
    helm_apply(kube, crd(group, [("v1", True, False), ("v2", True, True)]))
    kube.merge_patch(kube.crd_path(name) + "/status", {"status": {"storedVersions": ["v2"]}})
    helm_apply(kube, crd(group, [("v2", True, True)]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            kube.get(objects_path(group, "v2", "gadgets"), limit=500)
        except KubeError as exc:
            if exc.status == 500:
                return name
        time.sleep(0.2)
    raise AssertionError("the broken state did not appear")


def _post_when_served(kube, group: str, body: dict) -> None:
    """POST, retrying the 404 of a resource whose handler is not up yet right after the CRD was created."""
    deadline = time.monotonic() + 30
    while True:
        try:
            kube.request("POST", objects_path(group, "v1", "gadgets"), body, ok=(201,))
            return
        except KubeError as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture()
def broken(kube, group):
    name = build_broken(kube, group)
    yield name
    kube.delete_crd(name)


def test_repair_stops_before_pruning_then_gives_spec_versions_back(cluster, kube, group, broken, tmp_path):
    assert versions_owners(kube, broken) == ["helm"]
    previous = tmp_path / "release-n.json"
    previous.write_text(json.dumps(crd(group, [("v1", True, False), ("v2", True, True)])))
    args = dict(auth_args(cluster), names=[broken], etcd_url=cluster.etcd_url, previous_manifests=[str(previous)],
                lease_wait=5)

    refused = run_module("crd_storage_repair", args)
    assert refused.get("failed"), refused
    assert "would lose stored data: deletes .spec.legacy (6 of 6 compared)" in refused["msg"], refused["msg"]
    assert "accept_pruning" in refused["msg"] and broken in refused["msg"]
    # nothing re-stored: every key still at v1, and v1 back in spec.versions so the objects are readable
    assert scan_storage(cluster.etcd_url, group, "gadgets").counts == {f"{group}/v1": COUNT}
    assert len(kube.get(objects_path(group, "v2", "gadgets"))["items"]) == COUNT
    with pytest.raises(KubeError):  # the Lease was released on the refusal
        kube.get(f"/apis/coordination.k8s.io/v1/namespaces/default/leases/crdops-pass-{broken}")

    done = run_module("crd_storage_repair", dict(args, accept_pruning=True))
    assert not done.get("failed"), done.get("msg")
    (res,) = done["crds"]
    assert res["restore"]["rewritten"] == COUNT and res["lease"]["release_error"] is None
    assert res["versions_owners"]["owners_after_edit"] == ["crdops.migration"], res["versions_owners"]
    assert scan_storage(cluster.etcd_url, group, "gadgets").counts == {f"{group}/v2": COUNT}
    # spec.versions is helm's again: its next apply needs no force and a release dropping a version removes it
    assert versions_owners(kube, broken) == ["helm"]
    assert [v["name"] for v in kube.get_crd(broken)["spec"]["versions"]] == ["v2"]
    helm_apply(kube, crd(group, [("v2", True, True)]), dry_run=True)
    changed = crd(group, [("v2", True, True)])
    changed["spec"]["versions"][0]["deprecated"] = True
    with pytest.raises(KubeError) as conflict:  # a new manager changing spec.versions conflicts with helm, named
        kube.request("PATCH", kube.crd_path(broken), json.dumps(changed).encode(), APPLY,
                     query={"fieldManager": "argocd", "dryRun": "All"})
    assert conflict.value.status == 409 and 'conflict with "helm"' in conflict.value.body["message"]

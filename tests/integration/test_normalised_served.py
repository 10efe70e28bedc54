"""'Normalised' only where the apiserver serves the object the same without the dropped value (issue 38, item 4),
on a real kube-apiserver + etcd.

Gadgets are stored at v1 with `opts: {}`, `plain: {}` and `ref: {}` under a v1 schema with no defaults and nothing
required. Release N moves storage to v2 through a webhook that leaves out empty objects, and its v1 schema gives
`opts.mode` a default and makes `ref.name` required. crd_storage_info's forecast takes the stored values through
release N and back: all three `{}` come back missing. Only `plain` is served the same without it; the apiserver
itself shows the other two differ: it serves `opts: {}` as `opts: {mode: fast}` (nested defaults are filled only
where the parent exists) and refuses an object with `ref: {}`.
"""
from __future__ import annotations

import copy

import pytest
import yaml

from tests.controlplane.kube import KubeError, objects_path
# importing it puts the collection on sys.path, as for the other engine tests
from tests.integration import engine  # noqa: F401  # pylint: disable=unused-import
from tests.controlplane.webhook import WebhookServer
from tests.integration.modrun import auth_args, run_module

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.structural_defaults import (  # noqa: E402
    with_defaults)

NS, PLURAL = "normalised-served", "gadgets"
OBJ = {"type": "object"}


def _schema(release_n: bool) -> dict:
    mode = {"type": "string", **({"default": "fast"} if release_n else {})}
    ref = {"type": "object", "properties": {"name": {"type": "string"}}, **({"required": ["name"]} if release_n else {})}
    spec = {"type": "object", "properties": {"size": {"type": "integer"}, "ref": ref,
                                             "opts": {"type": "object", "properties": {"mode": mode}},
                                             "plain": {"type": "object", "properties": {"name": {"type": "string"}}}}}
    return {"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                                             "metadata": OBJ, "spec": spec}}


def _crd(group: str, release_n: bool, webhook: WebhookServer) -> dict:
    versions = [{"name": "v1", "served": True, "storage": not release_n,
                 "schema": {"openAPIV3Schema": _schema(release_n)}}]
    spec = {"group": group, "scope": "Namespaced", "versions": versions,
            "names": {"plural": PLURAL, "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"}}
    if release_n:
        versions.append({"name": "v2", "served": True, "storage": True, "schema": {"openAPIV3Schema": _schema(True)}})
        spec["conversion"] = {"strategy": "Webhook", "webhook": {
            "clientConfig": webhook.client_config("/convert-drop-empty"), "conversionReviewVersions": ["v1"]}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{PLURAL}.{group}"}, "spec": spec}


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def _gadget(group: str, name: str, spec: dict) -> dict:
    return {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def test_an_empty_object_served_differently_without_it_is_forecast_as_lost(cluster, kube, group, webhook, tmp_path):
    kube.apply_crd(_crd(group, False, webhook))
    kube.ensure_namespace(NS)
    empty = {"size": 1, "opts": {}, "plain": {}, "ref": {}}
    kube.post(objects_path(group, "v1", PLURAL, NS), _gadget(group, "g-empty", empty))
    kube.post(objects_path(group, "v1", PLURAL, NS), _gadget(group, "g-bare", {"size": 2}))
    release_n = _crd(group, True, webhook)
    manifest = tmp_path / "release-n.yaml"
    manifest.write_text(yaml.safe_dump(release_n))
    name = release_n["metadata"]["name"]

    res = run_module("crd_storage_info", dict(auth_args(cluster), names=[name], etcd_url=cluster.etcd_url,
                                              diff_release_manifests=[str(manifest)]))
    assert not res.get("failed"), res
    forecast = res["crds"][0]["storage_forecast"]
    assert (forecast["checked"], forecast["compared"], forecast["unverified"]) == (True, 2, None), forecast
    assert forecast["removed"] == {".spec.opts": 1, ".spec.ref": 1}, forecast
    assert forecast["normalised"] == {".spec.plain": 1}, forecast

    # What the apiserver serves under release N's v1 schema, and that the engine's defaulting agrees with it.
    kube.apply_crd(release_n)
    empty = kube.get(objects_path(group, "v1", PLURAL, NS, "g-empty"))
    bare = kube.get(objects_path(group, "v1", PLURAL, NS, "g-bare"))
    assert empty["spec"]["opts"] == {"mode": "fast"} and "opts" not in bare["spec"]
    assert empty["spec"]["plain"] == {} and "plain" not in bare["spec"]
    stored = {"spec": {"size": 1, "opts": {}, "plain": {}, "ref": {}}}
    assert with_defaults(stored, _schema(True))["spec"] == empty["spec"]
    fresh = _gadget(group, "g-new", copy.deepcopy(stored["spec"]))
    with pytest.raises(KubeError) as refused:
        kube.request("POST", objects_path(group, "v1", PLURAL, NS), fresh, query={"dryRun": "All"})
    assert refused.value.status == 422 and "spec.ref.name" in str(refused.value), refused.value
    del fresh["spec"]["ref"]
    kube.request("POST", objects_path(group, "v1", PLURAL, NS), fresh, query={"dryRun": "All"})

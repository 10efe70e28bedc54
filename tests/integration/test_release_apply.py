"""crd_release_apply on a real kube-apiserver + etcd: a release's CRDs created, then left unchanged, then changed, as
the role's manager; its dry-run (check mode) stores nothing; a refusal names the CRD with the apiserver's message."""
from __future__ import annotations

from tests.controlplane.etcd_reader import current_revision, keys_written_since
from tests.controlplane.kube import make_crd
from tests.integration.modrun import auth_args, run_module


KINDS = (("widgets", "Widget"), ("gadgets", "Gadget"))


def release(group: str, versions: list[tuple[str, bool, bool]]) -> list[dict]:
    return [make_crd(group, plural, kind, versions, "Namespaced") for plural, kind in KINDS]


def test_apply_created_unchanged_changed_and_a_dry_run_stores_nothing(cluster, kube, group):
    names = [f"widgets.{group}", f"gadgets.{group}"]
    one = release(group, [("v1alpha1", True, True)])
    two = release(group, [("v1alpha1", True, False), ("v1beta1", True, True)])
    args = dict(auth_args(cluster), field_manager="crdops-test")

    created = run_module("crd_release_apply", dict(args, manifests=one))
    assert created.get("failed") is None, created.get("msg")
    assert [(c["name"], c["action"], c["established"]) for c in created["crds"]] == [
        (n, "created", True) for n in names] and created["changed"]
    again = run_module("crd_release_apply", dict(args, manifests=one))
    assert [c["action"] for c in again["crds"]] == ["unchanged", "unchanged"] and not again["changed"]

    before = current_revision(cluster.etcd_url)
    dry = run_module("crd_release_apply", dict(args, manifests=two), check_mode=True)
    assert [(c["action"], c["established"]) for c in dry["crds"]] == [("configured", None)] * 2, dry
    assert all(".spec.versions" in c["changes"] for c in dry["crds"]), dry["crds"]
    assert [k for k in keys_written_since(cluster.etcd_url, before) if group in k] == []

    bad = release(group, [("v1alpha1", True, True), ("v1beta1", True, True)])   # two storage versions
    refused = run_module("crd_release_apply", dict(args, manifests=bad, continue_on_error=True), check_mode=True)
    assert [c["action"] for c in refused["crds"]] == ["refused", "refused"], refused
    assert refused["refused"][0].startswith(names[0] + ": ") and "storage" in refused["refused"][0], refused["refused"]
    failed = run_module("crd_release_apply", dict(args, manifests=bad))
    assert failed["failed"] and f"CRD {names[0]}" in failed["msg"] and "server-side apply refused" in failed["msg"]
    assert [c["name"] for c in failed["crds"]] == names[:1]   # stopped at the first refusal

    applied = run_module("crd_release_apply", dict(args, manifests=two))
    assert [c["action"] for c in applied["crds"]] == ["configured"] * 2, applied
    assert all(".spec.versions" in c["changes"] and c["established"] for c in applied["crds"]), applied["crds"]
    for name in names:
        crd = kube.get_crd(name)
        assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == ["v1beta1"]
        assert any(e["manager"] == "crdops-test" and e["operation"] == "Apply" for e in crd["metadata"]["managedFields"])
        kube.delete_crd(name)

"""Ownership is translated through a conversion webhook, never stripped (DESIGN invariant 13), on a real apiserver + etcd.

Objects are server-side applied at v1alpha1 under the test conversion webhook (a real HTTPS server, `url:` client
config): a rename (size -> replicas), two fields that often hold equal values (primaryZone/backupZone -> zones.*), a
path kept by name with a new meaning (mode -> legacyMode, mode refilled), a renamed list-map key (ports keyed by
name -> portName) and a field split in two (endpoint -> host + port). Storage moves to v1beta1.

1. While release N+1 keeps v1alpha1 served (removed_versions names none of this CRD's versions), the pass and a
   rerun leave every v1alpha1 entry untouched.
2. With removed_versions [v1alpha1], each manager's entry owns the right v1beta1 paths (manager, operation, time
   kept); the split field is dropped and named; an entry owning only the split field is kept and the version is
   reported not removable, naming the objects.
3. After the removal of v1alpha1, the manager applies without force: values change, a field it stopped declaring is
   pruned, a third manager conflicts naming it, and no `before-first-apply` entry exists. The objects whose
   unmappable entry was kept are the ones server-side apply then fails for (HTTP 500), which is why the role refuses.
"""
from __future__ import annotations

import copy

import pytest

from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.controlplane.kube import Kube, KubeError, objects_path
from tests.controlplane.webhook import WebhookServer, non_loopback_address, publish_as_service, widget_crd
from tests.integration import reliability
from tests.integration.modrun import auth_args, run_module
from tests.integration.test_security import service_account_token, shipped_rules, token_args

PLURAL, KIND = "widgets", "Widget"
NS = "tr-a"
NAMES = [f"w-{i}" for i in range(4)]
LEGACY = NAMES[:2]  # also written by a tool owning only the split field
APPLY = "application/apply-patch+yaml"
FLUX = "kustomize-controller"
ARGO = "argocd-controller"

FLUX_SPEC = {"size": 3, "primaryZone": "eu-1", "backupZone": "eu-1", "mode": "fast", "color": "blue",
             "ports": [{"name": "http", "number": 80}]}
FLUX_V1BETA1_PATHS = {"f:spec": {"f:replicas": {}, "f:zones": {"f:primary": {}, "f:backup": {}}, "f:legacyMode": {},
                                 "f:color": {}, "f:ports": {'k:{"portName":"http"}': {".": {}, "f:portName": {},
                                                                                      "f:number": {}}}}}


def crd(group: str, webhook: WebhookServer, storage: str, served=("v1alpha1", "v1beta1"),
        service: tuple[str, str] | None = None) -> dict:
    return widget_crd(group, webhook, storage, served, service)


def apply(kube: Kube, group: str, version: str, name: str, manager: str, spec: dict, force: bool = False) -> dict:
    body = {"apiVersion": f"{group}/{version}", "kind": KIND, "metadata": {"name": name, "namespace": NS},
            "spec": spec}
    query = {"fieldManager": manager, **({"force": "true"} if force else {})}
    return kube.request("PATCH", objects_path(group, version, PLURAL, NS, name), body, APPLY, query=query)


def entries(kube: Kube, group: str) -> dict[str, list[dict]]:
    items = kube.get(objects_path(group, "v1beta1", PLURAL, NS))["items"]
    return {o["metadata"]["name"]: o["metadata"].get("managedFields") or [] for o in items}


def by_manager(mf: list[dict]) -> dict[str, dict]:
    return {e["manager"]: e for e in mf}


def migrate(cluster, group: str, removed: list[str], check_mode: bool = False, warnings: list | None = None) -> dict:
    result = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[f"{PLURAL}.{group}"],
                                                    removed_versions=removed), check_mode)
    assert not result.get("failed"), result.get("msg")
    if warnings is not None:
        warnings.extend(str(w) for w in result.get("warnings") or [])  # 2.19+: structured warnings
    return result["crds"][0]


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def seed(kube: Kube, group: str, webhook: WebhookServer, service: tuple[str, str] | None = None) -> None:
    kube.apply_crd(crd(group, webhook, "v1alpha1", service=service))
    kube.ensure_namespace(NS)
    for name in NAMES:
        apply(kube, group, "v1alpha1", name, FLUX, FLUX_SPEC)
        apply(kube, group, "v1alpha1", name, ARGO, {"labels": {"tier": "web"}, "endpoint": "db:5432"})
        kube.merge_patch(objects_path(group, "v1alpha1", PLURAL, NS, name) + "?fieldManager=kubectl-label",
                         {"metadata": {"labels": {"team": "a"}}})
    for name in LEGACY:  # same value as argocd: shared ownership of the split field only
        apply(kube, group, "v1alpha1", name, "legacy-tool", {"endpoint": "db:5432"})
    kube.apply_crd(crd(group, webhook, "v1beta1", service=service))


def test_entries_are_translated_through_the_webhook_and_a_kept_served_version_is_untouched(
        cluster, kube, group, webhook):
    seed(kube, group, webhook)
    before = entries(kube, group)
    crd_name = f"{PLURAL}.{group}"

    # 1. N+1 keeps v1alpha1 served: a full pass, then a rerun (managedFields-only pass); entries untouched
    first = migrate(cluster, group, [f"other.{group}/v1alpha1"])
    assert (first["listed"], first["failed"], first["managed_fields_translated"]) == (4, 0, 0)
    assert first["managed_fields_untouched"] == 4 * 3 + 2 and first["objects_with_stale_managed_fields"] == 0
    revision = current_revision(cluster.etcd_url)
    again = migrate(cluster, group, [f"other.{group}/v1alpha1"])
    assert again["managed_fields_only"] is True and again["rewritten"] == 0 and again["managed_fields_untouched"] == 14
    assert [k for k in keys_written_since(cluster.etcd_url, revision) if f"/{group}/" in k] == []
    assert entries(kube, group) == before

    # 2. N+1 removes v1alpha1: translated through the webhook's own conversion (check mode first: nothing written)
    revision = current_revision(cluster.etcd_url)
    plan = migrate(cluster, group, [f"{crd_name}/v1alpha1"], check_mode=True)
    assert keys_written_since(cluster.etcd_url, revision) == []
    assert (plan["managed_fields_translated"], plan["managed_fields_unmappable"]) == (12, 2)
    warned: list[str] = []
    done = migrate(cluster, group, [f"{crd_name}/v1alpha1"], warnings=warned)
    assert (done["managed_fields_translated"], done["managed_fields_unmappable"], done["rewritten"]) == (12, 2, 4)
    assert done["field_mappings"][0]["method"] == "exact" and done["field_mappings"][0]["paths_unmapped"] == [
        ".spec.endpoint"]
    managers = {m["manager"]: m for m in done["managed_fields_managers"]}
    assert (managers[FLUX]["translated"], managers[FLUX]["paths_dropped"]) == (4, [])
    assert (managers[ARGO]["translated"], managers[ARGO]["paths_dropped"]) == (4, [".spec.endpoint"])
    assert managers["legacy-tool"]["kept_unmappable"] == 2
    assert done["versions_not_removable"] == ["v1alpha1"]
    unmappable = done["unmappable_entries"][0]
    assert (unmappable["manager"], unmappable["objects"]) == ("legacy-tool", 2)
    assert sorted(unmappable["examples"]) == [f"{NS}/{n}" for n in LEGACY]
    assert any(f"ownership reduced for {ARGO}" in w and ".spec.endpoint" in w for w in warned), warned
    assert any("legacy-tool" in w and "removing v1alpha1 would break server-side apply" in w for w in warned), warned

    scan = scan_storage(cluster.etcd_url, group, PLURAL)  # every key re-stored at the storage version
    assert scan.counts == {f"{group}/v1beta1": 4}
    after = entries(kube, group)
    for name in NAMES:
        old, new = by_manager(before[name]), by_manager(after[name])
        flux, argo, label = new[FLUX], new[ARGO], new["kubectl-label"]
        assert flux["apiVersion"] == f"{group}/v1beta1" and flux["fieldsV1"] == FLUX_V1BETA1_PATHS
        assert (flux["operation"], flux["time"]) == ("Apply", old[FLUX]["time"])
        assert argo["fieldsV1"] == {"f:spec": {"f:labels": {"f:tier": {}}}}
        assert (label["operation"], label["apiVersion"]) == ("Update", f"{group}/v1beta1")
        assert label["fieldsV1"] == old["kubectl-label"]["fieldsV1"]
        if name in LEGACY:
            assert new["legacy-tool"] == old["legacy-tool"]  # kept, not stripped
        assert "before-first-apply" not in new

    # 3. release N+1 applied anyway (the role would refuse it, see versions_not_removable)
    kube.merge_patch(kube.crd_path(crd_name) + "/status", {"status": {"storedVersions": ["v1beta1"]}})
    kube.apply_crd(crd(group, webhook, "v1beta1", served=("v1beta1",)))
    spec = {"replicas": 5, "zones": {"primary": "eu-1", "backup": "eu-2"}, "legacyMode": "fast",
            "ports": [{"portName": "http", "number": 80}]}  # color no longer declared: must be pruned
    for name in NAMES[len(LEGACY):]:
        out = apply(kube, group, "v1beta1", name, FLUX, spec)["spec"]
        assert out["replicas"] == 5 and out["zones"]["backup"] == "eu-2" and "color" not in out
    with pytest.raises(KubeError) as conflict:
        apply(kube, group, "v1beta1", NAMES[-1], "team-c", {"replicas": 7})
    assert conflict.value.status == 409 and f'"{FLUX}"' in conflict.value.message
    assert "before-first-apply" not in conflict.value.message
    with pytest.raises(KubeError) as broken:  # the kept entry at the removed version: kubernetes#111937
        apply(kube, group, "v1beta1", LEGACY[0], FLUX, copy.deepcopy(spec))
    assert broken.value.status == 500
    reliability.record("ownership through a conversion webhook (renamed, moved, re-meant, list-map key renamed, split)",
                       "4 objects, 4 managers at v1alpha1: entries untouched while v1alpha1 stays served (2 runs), "
                       "then 12 translated, the split field dropped and named, 2 unmappable entries kept and the "
                       "removal reported unsafe; after it, applies without force prune, conflicts name the owner",
                       4, scan.total, scan.counts == {f"{group}/v1beta1": 4})


def test_a_service_webhook_is_asked_through_the_service_proxy_and_without_that_permission_best_effort(
        cluster, kube, group, tmp_path):
    """cert-manager, Cluster API and Crossplane convert through a `service:` webhook. With `create` on
    `services/proxy` the mapping is exact; a ServiceAccount bound to the shipped ClusterRole (which does not grant
    it) gets the best effort from objects read at both versions: the zones, equal in every object, are dropped and
    named instead of guessed."""
    address = non_loopback_address()
    if address is None:
        pytest.skip("no non-loopback IPv4 address on this machine: the apiserver does not proxy to loopback")
    service = (f"wh-{group.split('.')[0]}", "widget-webhook")
    server = WebhookServer(cluster.pki, tmp_path / "webhook", host=address, service=service).start()
    try:
        publish_as_service(kube, server, *service)
        seed(kube, group, server, service)
        crd_name = f"{PLURAL}.{group}"
        token = service_account_token(kube, f"tr-{group.split('.')[0]}", shipped_rules(group))
        plan = run_module("crd_storage_migrate", dict(token_args(cluster, token), names=[crd_name],
                                                      removed_versions=["v1alpha1"]), check_mode=True)
        assert not plan.get("failed"), plan.get("msg")
        mapping = plan["crds"][0]["field_mappings"][0]
        assert mapping["method"] == "best_effort" and "permission denied" in mapping["note"], mapping
        flux = [m for m in plan["crds"][0]["managed_fields_managers"] if m["manager"] == FLUX][0]
        assert flux["translated"] == 4 and flux["paths_dropped"] == [".spec.backupZone", ".spec.primaryZone"]

        calls = dict(server.calls)
        done = migrate(cluster, group, ["v1alpha1"])
        assert done["field_mappings"][0]["method"] == "exact" and "(service)" in done["field_mappings"][0]["note"], done[
            "field_mappings"]
        assert server.calls["/convert"] > calls.get("/convert", 0)
        assert (done["managed_fields_translated"], done["managed_fields_unmappable"]) == (12, 2)
        for name, mf in entries(kube, group).items():
            assert by_manager(mf)[FLUX]["fieldsV1"] == FLUX_V1BETA1_PATHS, name
        assert scan_storage(cluster.etcd_url, group, PLURAL).counts == {f"{group}/v1beta1": 4}
    finally:
        server.stop()

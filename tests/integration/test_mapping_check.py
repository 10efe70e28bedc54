"""An exact field mapping is checked on real objects before entries are translated with it, on a real apiserver + etcd.

The test webhook moves v1alpha1 `spec.weight` to `spec.mass.value` when `spec.unit` is set and to
`spec.legacyWeight` when it is not. The made-up objects the exact mapping is learnt from set every field, so they
show only the first branch: `weight -> mass.value`. Two of three Widgets were applied without `unit`; translated
with that rule, their applier's entry would own `f:spec.f:mass.f:value`, a field the objects do not have, and
`legacyWeight` would have no owner. Checked on the objects read at both versions, the rule is contradicted: the
path is left unmapped and named (dropped from the entry), never a guess, and every other rule still holds.

The check reads at most 50 objects. When every object it reads agrees and the ones that do not come later, the rule
survives it; each translated entry is then held against its own object as read at v1beta1 (issue 38 item 2): an
entry that would own a path its object lacks is left as the apiserver left it, counted and named, and its version is
reported not removable. Left at v1alpha1, the apiserver still converts it for that very object, so its applier's
next apply at v1beta1 prunes the field the object really has.
"""
from __future__ import annotations

import json

import pytest

from tests.controlplane.kube import Kube, objects_path
from tests.controlplane.webhook import WebhookServer, widget_crd
from tests.integration.modrun import auth_args, run_module

PLURAL, KIND, NS, MANAGER = "widgets", "Widget", "mapping-check", "deployer"
SPECS = {"w-0": {"size": 1, "weight": 5}, "w-1": {"size": 2, "weight": 7, "unit": "kg"}, "w-2": {"size": 3, "weight": 9}}


def crd(group: str, webhook: WebhookServer, storage: str) -> dict:
    return widget_crd(group, webhook, storage, presence_dependent=True)


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def owned_leaves(fields: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, sub in fields.items():
        if key == ".":
            continue
        path = f"{prefix}.{key[2:]}" if key.startswith("f:") else f"{prefix}[{key}]"
        out |= owned_leaves(sub, path) if sub else {path}
    return out


def has_path(obj: dict, path: str) -> bool:
    value = obj
    for step in path.strip(".").split("."):
        if not isinstance(value, dict) or step not in value:
            return False
        value = value[step]
    return True


def test_a_rule_the_real_objects_contradict_is_left_unmapped_and_named(cluster, kube: Kube, group, webhook):
    kube.apply_crd(crd(group, webhook, "v1alpha1"))
    kube.ensure_namespace(NS)
    for name, spec in SPECS.items():
        body = {"apiVersion": f"{group}/v1alpha1", "kind": KIND, "metadata": {"name": name, "namespace": NS},
                "spec": spec}
        kube.request("PATCH", objects_path(group, "v1alpha1", PLURAL, NS, name), json.dumps(body).encode(),
                     "application/apply-patch+yaml", query={"fieldManager": MANAGER})
    kube.apply_crd(crd(group, webhook, "v1beta1"))

    result = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[f"{PLURAL}.{group}"],
                                                    removed_versions=[f"{PLURAL}.{group}/v1alpha1"]))
    assert not result.get("failed"), result.get("msg")
    (done,) = result["crds"]
    for item in kube.get(objects_path(group, "v1beta1", PLURAL, NS))["items"]:
        (entry,) = [e for e in item["metadata"]["managedFields"] if e["manager"] == MANAGER]
        assert entry["apiVersion"] == f"{group}/v1beta1", entry
        owned = owned_leaves(entry["fieldsV1"])
        # every path the entry owns is a field the object has: nothing relabelled to a place it did not go
        assert all(has_path(item, p) for p in owned), (item["metadata"]["name"], owned, item["spec"])
        assert ".spec.replicas" in owned, owned  # the rules the objects agree with still hold

    (mapping,) = [m for m in done["field_mappings"] if m["from_version"] == "v1alpha1"]
    assert mapping["method"] == "exact", mapping
    assert ".spec.weight" in mapping["paths_unmapped"], mapping
    assert mapping["checked_on_objects"].startswith("checked on 3 objects read at v1alpha1 and v1beta1: 1 paths "
                                                    "the objects contradict left unmapped: .spec.weight (in "), mapping
    (row,) = [m for m in done["managed_fields_managers"] if m["manager"] == MANAGER]
    assert ".spec.weight" in row["paths_dropped"], row


AGREEING, CONTRADICTING = ["a-%02d" % i for i in range(52)], ["z-0", "z-1"]  # more agreeing objects than the sample
NS_LATE = "mapping-per-object"


def apply_widget(kube: Kube, group: str, version: str, name: str, spec: dict) -> dict:
    body = {"apiVersion": f"{group}/{version}", "kind": KIND, "metadata": {"name": name, "namespace": NS_LATE},
            "spec": spec}
    return kube.request("PATCH", objects_path(group, version, PLURAL, NS_LATE, name), json.dumps(body).encode(),
                        "application/apply-patch+yaml", query={"fieldManager": MANAGER})


def entry_of(item: dict) -> dict:
    (entry,) = [e for e in item["metadata"]["managedFields"] if e["manager"] == MANAGER]
    return entry


def test_an_object_outside_the_checked_sample_keeps_its_entry_when_the_rule_does_not_hold_for_it(
        cluster, kube: Kube, group, webhook):
    kube.apply_crd(crd(group, webhook, "v1alpha1"))
    kube.ensure_namespace(NS_LATE)
    for name in AGREEING:  # listed first (by name): the only objects the rules are checked on
        apply_widget(kube, group, "v1alpha1", name, {"size": 1, "weight": 5, "unit": "kg"})
    for name in CONTRADICTING:  # without unit the webhook moves weight to legacyWeight, not mass.value
        apply_widget(kube, group, "v1alpha1", name, {"size": 2, "weight": 9})
    kube.apply_crd(crd(group, webhook, "v1beta1"))
    before = {i["metadata"]["name"]: entry_of(i) for i in kube.get(objects_path(group, "v1beta1", PLURAL, NS_LATE))["items"]}

    result = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[f"{PLURAL}.{group}"],
                                                    removed_versions=[f"{PLURAL}.{group}/v1alpha1"]))
    assert not result.get("failed"), result.get("msg")
    (done,) = result["crds"]
    (mapping,) = [m for m in done["field_mappings"] if m["from_version"] == "v1alpha1"]
    # the sample saw no contradiction: the rule weight -> mass.value survived the check
    assert mapping["checked_on_objects"] == "checked on 50 objects read at v1alpha1 and v1beta1: every rule held", mapping
    items = {i["metadata"]["name"]: i for i in kube.get(objects_path(group, "v1beta1", PLURAL, NS_LATE))["items"]}
    for name in AGREEING:
        entry = entry_of(items[name])
        assert entry["apiVersion"] == f"{group}/v1beta1", entry
        assert {".spec.replicas", ".spec.mass.value", ".spec.mass.unit"} <= owned_leaves(entry["fieldsV1"]), entry
    for name in CONTRADICTING:
        assert "legacyWeight" in items[name]["spec"] and "mass" not in items[name]["spec"], items[name]["spec"]
        assert entry_of(items[name]) == before[name]  # as the apiserver left it: at v1alpha1, owning f:spec.f:weight

    assert done["managed_fields_translated"] == len(AGREEING), done["managed_fields_managers"]
    assert done["managed_fields_not_in_object"] == len(CONTRADICTING), done["managed_fields_managers"]
    (kept,) = done["entries_not_in_object"]
    assert (kept["manager"], kept["version"], kept["objects"]) == (MANAGER, "v1alpha1", 2), kept
    assert kept["examples"] == [f"{NS_LATE}/{n}" for n in CONTRADICTING], kept
    assert ".spec.mass.value" in kept["paths_missing"], kept
    assert done["versions_not_removable"] == ["v1alpha1"], done
    warned = [str(w) for w in result.get("warnings") or []]  # 2.19+: structured warnings
    assert any("z-0" in w and ".spec.mass.value" in w for w in warned), warned

    # the kept entry still means what it owned: the applier's next apply, at v1beta1 and without the field, prunes it
    apply_widget(kube, group, "v1beta1", "z-0", {"replicas": 2})
    spec = kube.get(objects_path(group, "v1beta1", PLURAL, NS_LATE, "z-0"))["spec"]
    assert "legacyWeight" not in spec, spec

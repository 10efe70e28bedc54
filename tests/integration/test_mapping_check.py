"""An exact field mapping is checked on real objects before entries are translated with it, on a real apiserver + etcd.

The test webhook moves v1alpha1 `spec.weight` to `spec.mass.value` when `spec.unit` is set and to
`spec.legacyWeight` when it is not. The made-up objects the exact mapping is learnt from set every field, so they
show only the first branch: `weight -> mass.value`. Two of three Widgets were applied without `unit`; translated
with that rule, their applier's entry would own `f:spec.f:mass.f:value`, a field the objects do not have, and
`legacyWeight` would have no owner. Checked on the objects read at both versions, the rule is contradicted: the
path is left unmapped and named (dropped from the entry), never a guess, and every other rule still holds.
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

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubectl's last-applied annotation rewritten into the storage version's names, through the test webhook's
conversion (tests/controlplane/webhook.py): a rename, fields that move, a renamed list-map key, a split field."""
from __future__ import annotations

import json

from ansible_collections.crdops.migration.plugins.module_utils._crdops.crd_schema import parse_schema
from ansible_collections.crdops.migration.plugins.module_utils._crdops.last_applied import (
    LAST_APPLIED, POINTER, annotation_owner, manifest_leaves, place, translate_manifest)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.managed_fields import (
    ManagedFieldsPolicy, plan_patch)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.mapping_learn import learn_exact
from tests.controlplane.webhook import convert_object, widget_schemas

G = "widgets.example.com"
SCHEMAS = widget_schemas()
OLD, NEW = parse_schema(SCHEMAS["v1alpha1"]), parse_schema(SCHEMAS["v1beta1"])
OWNS_ANNOTATION = {"f:metadata": {"f:annotations": {".": {}, "f:" + LAST_APPLIED: {}}},
                   "f:spec": {"f:size": {}, "f:backupZone": {}}}


def webhook(objs):
    return [convert_object(dict(o, apiVersion=G + "/v1alpha1", kind="Widget", metadata={"name": "m%d" % i}),
                           G + "/v1beta1") for i, o in enumerate(objs)]


MAPPING = learn_exact(webhook, OLD, NEW, "v1alpha1", "v1beta1")
APPLIED = {"apiVersion": G + "/v1alpha1", "kind": "Widget",
           "metadata": {"name": "csa-01", "namespace": "default", "labels": {"team": "a"}},
           "spec": {"size": 1, "color": "blue", "primaryZone": "eu-1", "backupZone": "eu-1",
                    "ports": [{"name": "http", "number": 8080}], "endpoint": "svc-1:8080"}}


def entry(manager: str, operation: str = "Update", fields=None, version: str = "v1alpha1") -> dict:
    return {"manager": manager, "operation": operation, "apiVersion": "%s/%s" % (G, version),
            "fieldsType": "FieldsV1", "fieldsV1": fields if fields is not None else OWNS_ANNOTATION}


def policy() -> ManagedFieldsPolicy:
    return ManagedFieldsPolicy(G, "v1beta1", "Webhook", frozenset({"v1alpha1"}), lambda v: MAPPING,
                               frozenset({"v1alpha1", "v1beta1"}))


def test_the_manifest_moves_to_the_new_names_and_the_split_field_is_named():
    new, dropped = translate_manifest(APPLIED, MAPPING)
    assert new == {"apiVersion": G + "/v1alpha1", "kind": "Widget",
                   "metadata": {"name": "csa-01", "namespace": "default", "labels": {"team": "a"}},
                   "spec": {"replicas": 1, "color": "blue", "zones": {"primary": "eu-1", "backup": "eu-1"},
                            "ports": [{"portName": "http", "number": 8080}]}}
    assert dropped == (".spec.endpoint",)


def test_leaves_follow_what_server_side_apply_owns():
    leaves = dict(manifest_leaves({"spec": {"ports": [{"name": "a", "number": 1}], "labels": {}}}, OLD))
    assert leaves == {("f:spec", "f:ports", 'k:{"name":"a"}', "f:name"): "a",
                      ("f:spec", "f:ports", 'k:{"name":"a"}', "f:number"): 1,
                      ("f:spec", "f:labels"): {}}


def test_the_write_rewrites_the_annotation_under_its_owner_and_keeps_the_rest_of_the_patch():
    text = json.dumps(APPLIED) + "\n"
    entries = [entry("kubectl-client-side-apply")]
    found = policy().classify(entries, {LAST_APPLIED: text, "other": "x"})
    assert found is not None and found.writes and found.field_manager == "kubectl-client-side-apply"
    plan = plan_patch("7", found)
    assert plan.ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert plan.ops[1]["path"] == "/metadata/managedFields/0" and plan.last_applied == 1
    assert plan.ops[-1]["path"] == POINTER == "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration"
    written = plan.ops[-1]["value"]
    assert written.endswith("\n") and json.loads(written)["apiVersion"] == G + "/v1beta1"
    assert json.loads(written)["spec"]["zones"] == {"primary": "eu-1", "backup": "eu-1"}
    assert found.last_applied.dropped_paths == (".spec.endpoint",)


def test_an_annotation_alone_at_a_removed_version_still_gets_its_write():
    entries = [entry("kubectl-client-side-apply", version="v1beta1")]
    found = policy().classify(entries, {LAST_APPLIED: json.dumps(APPLIED)})
    assert found is not None and found.indices == () and found.writes
    assert [op["path"] for op in plan_patch("7", found).ops] == ["/metadata/resourceVersion", POINTER]


def test_left_as_it_is_when_the_version_stays_or_conversion_keeps_the_names():
    text = json.dumps(APPLIED)
    stays = ManagedFieldsPolicy(G, "v1beta1", "Webhook", frozenset(), lambda v: MAPPING,
                                frozenset({"v1alpha1", "v1beta1"}))
    assert stays.classify([entry("kubectl-client-side-apply")], {LAST_APPLIED: text}).last_applied is None
    same_names = ManagedFieldsPolicy(G, "v1beta1", "None", frozenset({"v1alpha1"}))
    found = same_names.classify([entry("kubectl-client-side-apply")], {LAST_APPLIED: text})
    assert found.last_applied is None and found.field_manager is None
    other_group = dict(APPLIED, apiVersion="other.example.com/v1alpha1")
    assert policy().classify([], {LAST_APPLIED: json.dumps(other_group)}) is None


def test_an_annotation_not_owned_by_one_update_entry_is_left_and_reported_not_rewritten():
    assert annotation_owner([entry("kubectl", operation="Apply")])[0] == ""
    assert annotation_owner([entry("a"), entry("b")])[1].startswith("2 managedFields entries")
    found = policy().classify([entry("kubectl", operation="Apply")], {LAST_APPLIED: json.dumps(APPLIED)})
    assert found is not None and found.last_applied.text is None and not found.translates_annotation
    assert "Apply" in found.last_applied.note
    assert all(op["path"] != POINTER for op in plan_patch("7", found).ops)


def test_a_value_of_another_shape_on_the_way_is_not_put_and_counts_as_left_out():
    root = {"spec": {"zones": "flat"}}
    assert not place(root, ("f:spec", "f:zones", "f:primary"), "eu-1")
    assert not place(root, ("f:spec", 'k:{"name":"a"}', "f:number"), 1)
    assert place(root, ("f:spec", "f:ports", 'k:{"portName":"a"}', "f:number"), 1)
    assert place(root, ("f:spec", "f:ports", 'k:{"portName":"a"}', "f:portName"), "a")
    assert place(root, ("f:spec", "f:tags", 'v:"x"'), "x") and place(root, ("f:spec", "f:tags", 'v:"x"'), "x")
    assert root == {"spec": {"zones": "flat", "ports": [{"portName": "a", "number": 1}], "tags": ["x"]}}

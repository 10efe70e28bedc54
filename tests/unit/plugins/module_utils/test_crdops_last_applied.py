# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubectl's last-applied annotation rewritten into the storage version's names, through the test webhook's
conversion (tests/controlplane/webhook.py): a rename, fields that move, a renamed list-map key, a split field, a
field renamed inside an atomic struct."""
from __future__ import annotations

import json

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import parse_schema
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ConversionWebhookError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.last_applied import (
    LAST_APPLIED, POINTER, annotation_owner, manifest_leaves, place, translate_manifest)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import (
    ManagedFieldsPolicy, plan_patch)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact
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


# spec.tls is an atomic struct (x-kubernetes-map-type: atomic) whose field `secret` the webhook renames `secretName`
TLS_OLD, TLS_NEW = (parse_schema(widget_schemas(atomic_tls=True)[v]) for v in ("v1alpha1", "v1beta1"))
TLS_APPLIED = dict(APPLIED, spec=dict(APPLIED["spec"], tls={"secret": "web-tls", "issuer": "ca"}))


def test_the_inside_of_an_atomic_struct_the_conversion_renames_takes_the_new_names():
    """kubectl's JSON merge patch looks inside an atomic struct: the annotation must name `secretName`, or a later
    apply that leaves it out would not prune it."""
    mapping = learn_exact(webhook, TLS_OLD, TLS_NEW, "v1alpha1", "v1beta1")
    new, dropped = translate_manifest(TLS_APPLIED, mapping)
    assert new["spec"]["tls"] == {"secretName": "web-tls", "issuer": "ca"}
    assert new["spec"]["zones"] == {"primary": "eu-1", "backup": "eu-1"} and dropped == (".spec.endpoint",)
    # server-side apply still owns the atomic struct whole: the managedFields rule is unchanged
    assert mapping.translate({"f:spec": {"f:tls": {}}}).fields == {"f:spec": {"f:tls": {}}}


def _tls_joined(objs):
    """A conversion that joins the inside of spec.tls into one string: no inner field maps."""
    out = webhook(objs)
    for obj in out:
        tls = obj.get("spec", {}).get("tls")
        if isinstance(tls, dict):
            obj["spec"]["tls"] = {"secretName": "%s/%s" % (tls.get("secretName"), tls.get("issuer"))}
    return out


def test_an_atomic_struct_whose_inside_does_not_map_is_left_out_and_named_not_kept_with_its_old_names():
    new, dropped = translate_manifest(TLS_APPLIED, learn_exact(_tls_joined, TLS_OLD, TLS_NEW, "v1alpha1", "v1beta1"))
    assert "tls" not in new["spec"]
    assert set(dropped) == {".spec.endpoint", ".spec.tls.issuer", ".spec.tls.secret"}


def test_when_the_inside_of_atomic_structs_cannot_be_learnt_their_inner_fields_are_named_not_kept():
    calls = []

    def first_review_only(objs):
        calls.append(1)
        if len(calls) > 1:
            raise ConversionWebhookError("webhook gone")
        return webhook(objs)

    mapping = learn_exact(first_review_only, TLS_OLD, TLS_NEW, "v1alpha1", "v1beta1")
    new, dropped = translate_manifest(TLS_APPLIED, mapping)
    assert "tls" not in new["spec"] and {".spec.tls.issuer", ".spec.tls.secret"} <= set(dropped)
    assert new["spec"]["replicas"] == 1  # the rest is still translated
    empty = dict(APPLIED, spec={"size": 2, "tls": {}})  # an empty atomic struct has no inner names: it lands whole
    assert translate_manifest(empty, mapping) == (dict(empty, spec={"replicas": 2, "tls": {}}), ())


def test_an_atomic_list_is_still_kept_whole():
    """kubectl's merge patch replaces a list whole, so old inner names in it do no harm (and nothing else maps it)."""
    schemas = widget_schemas(atomic_tls=True)
    for v, inner in (("v1alpha1", "name"), ("v1beta1", "portName")):
        schemas[v]["properties"]["spec"]["properties"]["ports"] = {
            "type": "array", "items": {"type": "object", "properties": {inner: {"type": "string"}}}}
    old, new_schema = parse_schema(schemas["v1alpha1"]), parse_schema(schemas["v1beta1"])
    mapping = learn_exact(webhook, old, new_schema, "v1alpha1", "v1beta1")
    new, _dropped = translate_manifest(dict(APPLIED, spec={"ports": [{"name": "http"}]}), mapping)
    assert new["spec"] == {"ports": [{"name": "http"}]}


def test_a_translation_naming_a_path_the_object_lacks_is_not_written_and_names_it():
    """The mapping learnt from the sample puts backupZone at zones.backup; an object whose converter left it
    elsewhere (the rule does not hold for it) keeps its annotation as it is: kubectl would prune zones.backup,
    which the user never declared there, and keep the field they did."""
    text = json.dumps(APPLIED)
    entries = [entry("kubectl-client-side-apply")]
    held = {"apiVersion": G + "/v1beta1", "kind": "Widget", "metadata": {"name": "csa-01"},
            "spec": {"replicas": 1, "color": "blue", "zones": {"primary": "eu-1"},
                     "ports": [{"portName": "http", "number": 8080}], "backupRegion": "eu-1"}}
    found = policy().classify(entries, {LAST_APPLIED: text}, held)
    fix = found.last_applied
    assert fix is not None and fix.text is None and fix.missing_paths == (".spec.zones.backup",)
    assert ".spec.zones.backup" in fix.note and "does not have at v1beta1" in fix.note
    assert POINTER not in [op["path"] for op in plan_patch("7", found).ops]
    whole = dict(held, spec=dict(held["spec"], zones={"primary": "eu-1", "backup": "eu-1"}))
    assert policy().classify(entries, {LAST_APPLIED: text}, whole).last_applied.text is not None

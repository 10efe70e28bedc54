# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The field mapping through a conversion (exact and best effort) and the translation of fieldsV1 with it.

The conversion is the test webhook's own (tests/controlplane/webhook.py), the one the integration tests run
over HTTPS: a rename, two fields that often hold equal values, a path kept by name with a new meaning, a
renamed list-map key and a field split in two.
"""
from __future__ import annotations

import copy

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import (
    LIST, parse_schema, version_schema)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.field_mapping import (
    EXACT, FieldMapping, build_trie, readable_abstract)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.marker_objects import made_up, objects_needed
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_sample import match_objects
from tests.controlplane.webhook import convert_object, widget_schemas

G = "widgets.example.com"
SCHEMAS = widget_schemas()
OLD, NEW = parse_schema(SCHEMAS["v1alpha1"]), parse_schema(SCHEMAS["v1beta1"])
HTTP = 'k:{"name":"http"}'


def webhook(objs):
    """What the webhook answers for made-up contents (wrapped as v1alpha1 objects)."""
    return [convert_object(dict(o, apiVersion=G + "/v1alpha1", kind="Widget", metadata={"name": "m%d" % i}),
                           G + "/v1beta1") for i, o in enumerate(objs)]


def exact() -> FieldMapping:
    return learn_exact(webhook, OLD, NEW, "v1alpha1", "v1beta1")


APPLIED = {"f:metadata": {"f:labels": {"f:team": {}}},
           "f:spec": {"f:size": {}, "f:primaryZone": {}, "f:backupZone": {}, "f:mode": {}, "f:endpoint": {},
                      "f:color": {}, "f:labels": {"f:tier": {}},
                      "f:ports": {HTTP: {".": {}, "f:name": {}, "f:number": {}}}}}


def test_made_up_objects_give_every_leaf_a_unique_vector_and_split_separators():
    made = made_up(OLD)
    assert len(made.objects) == objects_needed(OLD) >= 2
    vectors = list(made.leaves.values())
    assert len(set(vectors)) == len(vectors)  # no two leaves can be confused
    endpoint = made.leaves[(("f", "spec"), ("f", "endpoint"))]
    assert ":" in endpoint[1] and "/" in endpoint[1]  # a split at ':' or '/' cannot keep the value whole
    port_key = made.keys[(("f", "spec"), ("f", "ports"), ("k",))]
    assert made.objects[0]["spec"]["ports"][0]["name"] == port_key["name"]


def test_booleans_and_enums_get_as_many_objects_as_their_patterns_need():
    props = dict(("b%d" % i, {"type": "boolean"}) for i in range(9))
    props["e"] = {"type": "string", "enum": ["A", "B"]}
    schema = parse_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}})
    made = made_up(schema)
    assert len(made.objects) == objects_needed(schema) == 5
    assert len(set(made.leaves.values())) == 10


def test_exact_mapping_follows_the_conversion_and_names_the_split_field():
    m = exact()
    assert m.method == EXACT
    rules = dict((readable_abstract(p), t) for p, t in m.rules.items())
    assert rules[".spec.size"] == (("lit", "f:spec"), ("lit", "f:replicas"))
    assert rules[".spec.primaryZone"] == (("lit", "f:spec"), ("lit", "f:zones"), ("lit", "f:primary"))
    assert rules[".spec.backupZone"] == (("lit", "f:spec"), ("lit", "f:zones"), ("lit", "f:backup"))
    # kept by name, new meaning: the old value went to legacyMode; spec.mode is NOT mapped to itself
    assert rules[".spec.mode"] == (("lit", "f:spec"), ("lit", "f:legacyMode"))
    assert rules[".spec.endpoint"] is None
    assert rules[".spec.color"] == (("lit", "f:spec"), ("lit", "f:color"))
    assert rules[".spec.labels[*]"] == (("lit", "f:spec"), ("lit", "f:labels"), ("mkey", 2))
    assert m.summary()["paths_unmapped"] == [".spec.endpoint"]


def test_translation_keeps_what_maps_renames_the_list_map_key_and_drops_the_split_field():
    t = exact().translate(APPLIED)
    assert t.fields == {
        "f:metadata": {"f:labels": {"f:team": {}}},
        "f:spec": {"f:replicas": {}, "f:zones": {"f:primary": {}, "f:backup": {}}, "f:legacyMode": {},
                   "f:color": {}, "f:labels": {"f:tier": {}},
                   "f:ports": {'k:{"portName":"http"}': {".": {}, "f:portName": {}, "f:number": {}}}}}
    assert t.dropped == (".spec.endpoint",) and t.mapped == 10


def test_a_path_the_schema_does_not_know_is_asked_about_and_dropped_when_the_webhook_loses_it():
    def typed(objs):  # a webhook decoding into Go structs loses the fields its types do not have
        out = webhook(objs)
        for o in out:
            o.pop("status", None)
            (o.get("spec") or {}).pop("surprise", None)
        return out

    m = learn_exact(typed, OLD, NEW, "v1alpha1", "v1beta1")
    t = m.translate({"f:spec": {"f:size": {}, "f:surprise": {}}, "f:status": {"f:x": {}}})
    assert t.fields == {"f:spec": {"f:replicas": {}}}
    assert t.dropped == (".spec.surprise", ".status.x")


def test_schemaless_paths_are_learnt_from_the_entry_itself():
    anything = parse_schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    calls = []

    def counting(objs):
        calls.append(len(objs))
        return webhook(objs)

    m = learn_exact(counting, anything, anything, "v1alpha1", "v1beta1")
    t = m.translate({"f:spec": {"f:size": {}, "f:index": {}}})
    assert t.fields == {"f:spec": {"f:replicas": {}, "f:index": {}}} and t.dropped == ()
    assert len(calls) == 2  # the schema (nothing to learn), then once for the entry's paths
    m.translate({"f:spec": {"f:size": {}}})
    assert len(calls) == 2  # known now


def pair(spec: dict, rv: str = "1") -> tuple:
    old = {"apiVersion": G + "/v1alpha1", "kind": "Widget", "metadata": {"name": "w", "resourceVersion": rv},
           "spec": copy.deepcopy(spec)}
    return old, convert_object(old, G + "/v1beta1")


def test_best_effort_accepts_only_unique_values_that_hold_in_every_object():
    same = {"size": 3, "primaryZone": "eu-1", "backupZone": "eu-1", "mode": "fast", "endpoint": "db:5432",
            "ports": [{"name": "http", "number": 80}]}
    rules = match_objects([pair(same), pair(dict(same, size=5, mode="slow"))], OLD, NEW)
    spec = (("f", "spec"),)
    assert rules[spec + (("f", "size"),)] == (("lit", "f:spec"), ("lit", "f:replicas"))
    assert rules[spec + (("f", "mode"),)] == (("lit", "f:spec"), ("lit", "f:legacyMode"))
    # equal in every object sampled: cannot be told apart, so not mapped (dropped and named), never guessed
    assert rules[spec + (("f", "primaryZone"),)] is None and rules[spec + (("f", "backupZone"),)] is None
    assert rules[spec + (("f", "endpoint"),)] is None
    item = spec + (("f", "ports"), ("k",))
    assert rules[item + (("f", "number"),)] == (("lit", "f:spec"), ("lit", "f:ports"),
                                                ("kkey", (("portName", 2, "name"),)), ("lit", "f:number"))
    assert rules[item][-1] == ("kkey", (("portName", 2, "name"),))
    # one object where the zones differ tells them apart; the others do not refute it
    told = match_objects([pair(same), pair(dict(same, backupZone="eu-2"))], OLD, NEW)
    assert told[spec + (("f", "backupZone"),)] == (("lit", "f:spec"), ("lit", "f:zones"), ("lit", "f:backup"))


def test_best_effort_refutes_a_pair_one_object_contradicts():
    # a conversion that keeps `color` in one object and rewrites it in another does not map color to itself
    old1, new1 = pair({"color": "blue"})
    old2, new2 = pair({"color": "green"})
    new2["spec"]["color"] = "GREEN"
    rules = match_objects([(old1, new1), (old2, new2)], OLD, NEW)
    assert rules[(("f", "spec"), ("f", "color"))] is None


def test_schema_of_a_version_and_list_map_keys():
    crd = {"spec": {"versions": [{"name": v, "schema": {"openAPIV3Schema": s}} for v, s in SCHEMAS.items()]}}
    ports = version_schema(crd, "v1beta1").props["spec"].props["ports"]
    assert (ports.kind, ports.list_type, ports.keys) == (LIST, "map", ("portName",))
    assert version_schema(crd, "v9") is None


def test_build_trie_marks_members_that_have_owned_children():
    assert build_trie([("f:a",), ("f:a", "f:b"), ("f:c", "f:d")]) == {"f:a": {".": {}, "f:b": {}},
                                                                      "f:c": {"f:d": {}}}


def test_strings_a_webhook_refuses_get_another_shape_or_are_left_out_and_named():
    import re

    from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ConversionWebhookError

    typed = parse_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "renewBefore": {"type": "string"}, "checksum": {"type": "string"}, "name": {"type": "string"}}}}})
    reviews = []

    def strict(objs):  # decodes renewBefore as a Go duration and checksum as 8 hex digits, like a typed webhook
        reviews.append(objs)
        for o in objs:
            spec = o.get("spec") or {}
            if "renewBefore" in spec and not re.fullmatch(r"(\d+h)?(\d+m)?(\d+s)?", spec["renewBefore"]):
                raise ConversionWebhookError("time: invalid duration %r" % spec["renewBefore"])
            if "checksum" in spec and not re.fullmatch(r"[0-9a-f]{8}", spec["checksum"]):
                raise ConversionWebhookError("bad checksum")
        return [dict(o, apiVersion=G + "/v1beta1") for o in objs]

    m = learn_exact(strict, typed, typed, "v1alpha1", "v1beta1")
    rules = dict((readable_abstract(p), t) for p, t in m.rules.items())
    assert rules[".spec.renewBefore"] == (("lit", "f:spec"), ("lit", "f:renewBefore"))  # as a duration
    assert rules[".spec.name"] == (("lit", "f:spec"), ("lit", "f:name"))
    assert rules[".spec.checksum"] is None  # refused in every shape: dropped and named
    assert "renewBefore" in str(reviews[-1]) and "checksum" not in str(reviews[-1])
    assert len(reviews) < 20

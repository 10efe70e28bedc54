# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A translated managedFields entry is held against its own object: each path it would own must be there.

The mapping is learnt the exact way from the test webhook's own conversion (tests/controlplane/webhook.py), which
moves v1alpha1 ``spec.weight`` to ``spec.mass.value`` when ``spec.unit`` is set and to ``spec.legacyWeight`` when it
is not. Made-up objects set every field, so the mapping says ``weight -> mass.value``: true for an object with a
unit, false for one without.
"""
from __future__ import annotations

import copy

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import parse_schema
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import (
    KEPT_NOT_IN_OBJECT, TRANSLATED, ManagedFieldsPolicy)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields_tally import (
    ManagedFieldsTally, ownership_warnings)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.target_presence import (
    has_path, paths_not_in_object)
from tests.controlplane.webhook import convert_object, widget_schemas

G = "widgets.example.com"
SCHEMAS = widget_schemas(presence_dependent=True)
WEIGHED = {"f:spec": {"f:size": {}, "f:weight": {}}}  # an applier's entry at v1alpha1 for `spec: {size, weight}`


def widget_conversion(objs):
    """Made-up contents (no apiVersion) converted by the test webhook from v1alpha1 to v1beta1."""
    return [convert_object(dict(copy.deepcopy(o), apiVersion=G + "/v1alpha1"), G + "/v1beta1") for o in objs]


def mapping():
    return learn_exact(widget_conversion, parse_schema(SCHEMAS["v1alpha1"]), parse_schema(SCHEMAS["v1beta1"]),
                       "v1alpha1", "v1beta1")


def policy():
    learnt = mapping()
    return ManagedFieldsPolicy(G, "v1beta1", "Webhook", frozenset(["v1alpha1"]), lambda v: learnt,
                               frozenset(["v1alpha1", "v1beta1"]))


def entry(fields=None):
    return {"manager": "deployer", "operation": "Apply", "apiVersion": G + "/v1alpha1", "time": "2026-12-01T10:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": copy.deepcopy(WEIGHED if fields is None else fields)}


def at_v1beta1(spec):
    return {"apiVersion": G + "/v1beta1", "kind": "Widget", "metadata": {"name": "w", "namespace": "ns"}, "spec": spec}


def test_has_path_follows_fields_list_map_items_set_values_and_indices():
    obj = {"spec": {"ports": [{"portName": "http", "number": 80}], "tags": ["a", 1], "list": [{}, {"x": None}],
                    "nothing": None}}
    assert has_path(obj, ("f:spec", "f:ports", 'k:{"portName":"http"}', "f:number"))
    assert not has_path(obj, ("f:spec", "f:ports", 'k:{"portName":"grpc"}'))
    assert not has_path(obj, ("f:spec", 'v:"a"'))  # the set is spec.tags, not spec
    assert has_path(obj, ("f:spec", "f:tags", 'v:"a"')) and has_path(obj, ("f:spec", "f:tags", "v:1"))
    assert not has_path(obj, ("f:spec", "f:tags", "v:true"))  # true is not 1
    assert has_path(obj, ("f:spec", "f:list", "i:1", "f:x"))  # a field set to null exists
    assert has_path(obj, ("f:spec", "f:nothing")) and not has_path(obj, ("f:spec", "f:nothing", "f:deeper"))
    assert not has_path(obj, ("f:spec", "f:list", "i:2")) and not has_path(obj, ("f:spec", "x:unknown"))


def test_paths_not_in_object_names_what_is_missing_and_leaves_metadata_alone():
    fields = {"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:mass": {"f:value": {}}, "f:replicas": {}}}
    assert paths_not_in_object(fields, at_v1beta1({"replicas": 1, "legacyWeight": 9})) == (".spec.mass.value",)
    assert paths_not_in_object(fields, at_v1beta1({"replicas": 1, "mass": {"value": 9}})) == ()


def test_an_entry_is_translated_where_its_object_has_every_path_and_kept_where_it_does_not():
    found = policy().classify([entry()], None, at_v1beta1({"replicas": 1, "mass": {"value": 9, "unit": "kg"}}))
    (fix,) = found.fixes
    assert fix.action == TRANSLATED and fix.entry["fieldsV1"] == {"f:spec": {"f:replicas": {}, "f:mass": {"f:value": {}}}}

    found = policy().classify([entry()], None, at_v1beta1({"replicas": 1, "legacyWeight": 9}))
    (fix,) = found.fixes
    assert (fix.action, fix.entry, fix.missing_paths) == (KEPT_NOT_IN_OBJECT, None, (".spec.mass.value",))
    assert "does not have at v1beta1" in fix.note and not found.writes  # its object is re-stored, the entry left


def test_without_the_object_the_translation_is_not_held_against_it():
    # what callers that read metadata only get (the re-store always passes the object: reads_objects)
    (fix,) = policy().classify([entry()]).fixes
    assert fix.action == TRANSLATED and policy().reads_objects
    assert not ManagedFieldsPolicy(G, "v1beta1", "None").reads_objects


def test_the_tally_counts_and_names_the_kept_entries_and_refuses_their_version():
    tally = ManagedFieldsTally()
    for name in ("ns/z-0", "ns/z-1"):
        found = policy().classify([entry()], None, at_v1beta1({"replicas": 1, "legacyWeight": 9}))
        tally.add(found.kept, name)
    out = tally.to_result()
    assert out["managed_fields_not_in_object"] == 2 and out["managed_fields_translated"] == 0
    kept = dict(version="v1alpha1", manager="deployer", operation="Apply", subresource=None, objects=2,
                examples=["ns/z-0", "ns/z-1"], paths_missing=[".spec.mass.value"])
    assert out["entries_not_in_object"] == [kept]
    assert out["versions_not_removable"] == ["v1alpha1"]
    (warning,) = ownership_warnings("widgets." + G, out)
    assert "2 objects keep deployer's Apply entry at v1alpha1" in warning and ".spec.mass.value" in warning

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A struct owned with none of its fields (``f:spec: {f:selfSigned: {}}``, cert-manager's bootstrap Issuer applied
server-side) is translated to where its fields go, when they all go to one place; a split struct is dropped.

The schemas are cert-manager v1.5.4's own Issuer CRD (tests/data/fixtures/cert-manager), v1alpha2 and v1. The
conversions are written here: cert-manager's for an Issuer keeps every path (its webhook is run for real in
tests/integration/test_cert_manager.py), and the others move fields on purpose.
"""
from __future__ import annotations

import copy

import yaml

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import parse_schema, version_schema
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.field_mapping import FieldMapping
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import (
    KEPT_UNMAPPABLE, TRANSLATED, ManagedFieldsPolicy)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_sample import match_objects
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.struct_rules import struct_rule
from tests.certmanager import crd_file

G = "cert-manager.io"
ISSUER_CRD = yaml.safe_load(crd_file("v1.5.4", "issuers").read_text())
OLD, NEW = version_schema(ISSUER_CRD, "v1alpha2"), version_schema(ISSUER_CRD, "v1")
SELF_SIGNED = {"f:spec": {"f:selfSigned": {}}}  # kubectl apply --server-side of `spec: {selfSigned: {}}`
SPEC = (("f", "spec"),)


def as_v1(objs):
    """cert-manager's conversion of an Issuer from v1alpha2 to v1: every spec path stays where it is."""
    return [dict(copy.deepcopy(o), apiVersion=G + "/v1") for o in objs]


def moving_ocsp_out_of_ca(objs):
    """A conversion that splits `spec.ca`: `ocspServers` leaves it for `spec.ocsp.servers`."""
    out = as_v1(objs)
    for o in out:
        ca = o.get("spec", {}).get("ca") or {}
        if "ocspServers" in ca:
            o["spec"]["ocsp"] = {"servers": ca.pop("ocspServers")}
    return out


def renaming_self_signed(objs):
    """A conversion that renames the struct `spec.selfSigned` to `spec.selfSignedIssuer`, its fields kept."""
    out = as_v1(objs)
    for o in out:
        if "selfSigned" in o.get("spec", {}):
            o["spec"]["selfSignedIssuer"] = o["spec"].pop("selfSigned")
    return out


def test_self_signed_issuer_entry_is_translated_to_the_v1_struct_keeping_its_manager():
    mapping = learn_exact(as_v1, OLD, NEW, "v1alpha2", "v1")
    t = mapping.translate(dict(SELF_SIGNED, **{"f:metadata": {"f:labels": {"f:team": {}}}}))
    assert t.fields == {"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:selfSigned": {}}}
    assert (t.mapped, t.dropped) == (2, ())
    entry = {"manager": "kubectl", "operation": "Apply", "apiVersion": G + "/v1alpha2", "time": "2026-12-01T10:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": SELF_SIGNED}
    fix = ManagedFieldsPolicy(G, "v1", "Webhook", frozenset(["v1alpha2"]), lambda v: mapping).classify([entry]).fixes[0]
    assert fix.action == TRANSLATED and fix.dropped_paths == ()
    assert fix.entry == dict(entry, apiVersion=G + "/v1", fieldsV1={"f:spec": {"f:selfSigned": {}}})


def test_a_struct_the_conversion_splits_stays_dropped_and_named():
    mapping = learn_exact(moving_ocsp_out_of_ca, OLD, NEW, "v1alpha2", "v1")
    t = mapping.translate({"f:spec": {"f:ca": {}, "f:selfSigned": {}}})
    assert t.fields == {"f:spec": {"f:selfSigned": {}}} and t.dropped == (".spec.ca",)
    # the fields of `ca` that kept their place still map one by one
    t = mapping.translate({"f:spec": {"f:ca": {".": {}, "f:secretName": {}}}})
    assert t.fields == {"f:spec": {"f:ca": {"f:secretName": {}}}} and t.dropped == (".spec.ca",)
    # an entry owning nothing but the split struct is kept as it is, and its version's removal refused
    entry = {"manager": "kubectl", "operation": "Apply", "apiVersion": G + "/v1alpha2", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:ca": {}}}}
    fix = ManagedFieldsPolicy(G, "v1", "Webhook", frozenset(["v1alpha2"]), lambda v: mapping).classify([entry]).fixes[0]
    assert fix.action == KEPT_UNMAPPABLE and fix.dropped_paths == (".spec.ca",)


def test_a_renamed_struct_follows_its_fields():
    mapping = learn_exact(renaming_self_signed, OLD, NEW, "v1alpha2", "v1")
    assert mapping.translate(SELF_SIGNED).fields == {"f:spec": {"f:selfSignedIssuer": {}}}


def test_struct_rule_needs_every_mapped_descendant_to_keep_the_structure_below_it():
    p = SPEC + (("f", "zone"),)
    lit = ("lit", "f:spec")
    # one rule lost (None) does not stop the others from showing where the struct went
    assert struct_rule(p, {p + (("f", "a"),): (lit, ("lit", "f:zones"), ("lit", "f:a")),
                           p + (("f", "b"),): None}) == (lit, ("lit", "f:zones"))
    # a descendant that landed outside: split
    assert struct_rule(p, {p + (("f", "a"),): (lit, ("lit", "f:zone"), ("lit", "f:a")),
                           p + (("f", "b"),): (lit, ("lit", "f:b"))}) is None
    # a map key below the struct must stay the key bound at its own step
    keyed = p + (("f", "labels"), ("m",))
    assert struct_rule(p, {keyed: (lit, ("lit", "f:zone"), ("lit", "f:labels"), ("mkey", 3))}) == (
        lit, ("lit", "f:zone"))
    assert struct_rule(p, {keyed: (lit, ("lit", "f:zone"), ("mkey", 3), ("lit", "f:labels"))}) is None
    # nothing maps, or no descendant at all: unmapped
    assert struct_rule(p, {p + (("f", "a"),): None}) is None and struct_rule(p, {}) is None


def test_a_struct_in_a_list_map_item_keeps_the_item_key():
    schema = parse_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": {"solvers": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}, "http01": {
            "type": "object", "properties": {"ingress": {"type": "object", "properties": {
                "class": {"type": "string"}}}}}}}}}}}})

    def identity(objs):
        return [dict(copy.deepcopy(o), apiVersion=G + "/v1") for o in objs]

    mapping = learn_exact(identity, schema, schema, "v1alpha2", "v1")
    item = 'k:{"name":"web"}'
    owned = {"f:spec": {"f:solvers": {item: {".": {}, "f:name": {}, "f:http01": {"f:ingress": {}}}}}}
    t = mapping.translate(owned)
    assert t.fields == owned and t.dropped == ()


def test_struct_fields_with_no_fields_of_their_own_are_told_apart_by_presence():
    # `type: object` and nothing else: no marker fits inside, so each is present in its own set of objects
    schema = parse_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "a": {"type": "object"}, "b": {"type": "object"}, "n": {"type": "integer"}}}}})
    seen = []

    def renaming_b(objs):
        seen.extend(objs)
        out = [dict(copy.deepcopy(o), apiVersion=G + "/v1") for o in objs]
        for o in out:
            if "b" in o["spec"]:
                o["spec"]["c"] = o["spec"].pop("b")
        return out

    mapping = learn_exact(renaming_b, schema, schema, "v1alpha2", "v1")
    t = mapping.translate({"f:spec": {"f:a": {}, "f:b": {}}})
    assert t.fields == {"f:spec": {"f:a": {}, "f:c": {}}} and t.dropped == ()
    present = [tuple(k in o["spec"] for k in "ab") for o in seen]
    assert any(a != b for a, b in present) and any(a for a, _b in present) and any(b for _a, b in present)

    def dropping_empty(objs):  # a webhook whose types drop an empty struct: not shown to keep it
        out = renaming_b(objs)
        for o in out:
            o["spec"].pop("a", None)
        return out

    t = learn_exact(dropping_empty, schema, schema, "v1alpha2", "v1").translate({"f:spec": {"f:a": {}}})
    assert t.mapped == 0 and t.dropped == (".spec.a",)


def test_best_effort_maps_a_struct_set_empty_in_real_objects():
    def issuer(name, spec):
        old = {"apiVersion": G + "/v1alpha2", "kind": "Issuer", "metadata": {"name": name, "resourceVersion": "1"},
               "spec": spec}
        return old, as_v1([old])[0]

    rules = match_objects([issuer("bootstrap", {"selfSigned": {}}),
                           issuer("ca", {"ca": {"secretName": "ca-key-pair"}})], OLD, NEW)
    mapping = FieldMapping("v1alpha2", "v1", OLD, "best_effort", rules)
    t = mapping.translate({"f:spec": {"f:selfSigned": {}}})
    assert t.fields == {"f:spec": {"f:selfSigned": {}}} and t.dropped == ()
    # `ca` from its one field's pair, though no object set `ca: {}`
    assert mapping.translate({"f:spec": {"f:ca": {}}}).fields == {"f:spec": {"f:ca": {}}}

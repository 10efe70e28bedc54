# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mapping_check: an exact mapping learnt from made-up objects, checked on (old, storage-version) reads of real ones.

The real proof is tests/integration/test_mapping_check.py (a presence-dependent conversion in the test webhook);
here a conversion that lower-cases list-map keys, which the made-up key markers (already lower case) cannot show,
and the value changes and zero values that are not a contradiction.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import parse_schema
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.field_mapping import readable_abstract
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_check import contradicted
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact

PORTS = {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
         "items": {"type": "object", "required": ["name"],
                   "properties": {"name": {"type": "string"}, "number": {"type": "integer"}}}}
SCHEMA = parse_schema({"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "ports": PORTS, "algorithm": {"type": "string"}, "isCA": {"type": "boolean"}}}}})


def lower_keys(objects):
    """A conversion that lower-cases list-map key values (and upper-cases `algorithm`, a value normalised)."""
    out = []
    for obj in objects:
        spec = dict(obj.get("spec") or {})
        if "ports" in spec:
            spec["ports"] = [dict(p, name=str(p["name"]).lower()) for p in spec["ports"]]
        if "algorithm" in spec:
            spec["algorithm"] = str(spec["algorithm"]).upper()
        spec.pop("isCA", None) if spec.get("isCA") is False else None
        out.append(dict(obj, spec=spec))
    return out


def obj(name, spec):
    return {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": name, "namespace": "ns"}, "spec": spec}


def test_list_map_keys_the_conversion_rewrites_contradict_the_rule_learnt_from_made_up_markers():
    mapping = learn_exact(lower_keys, SCHEMA, SCHEMA, "v1", "v2")
    old = obj("a", {"ports": [{"name": "HTTP", "number": 80}], "algorithm": "ecdsa", "isCA": False})
    (new,) = lower_keys([old])
    wrong = contradicted(mapping, [(old, new)], SCHEMA, SCHEMA)
    assert sorted(readable_abstract(p) for p in wrong) == [".spec.ports[*].name", ".spec.ports[*].number"], wrong
    assert set(wrong.values()) == {"ns/a"}


def test_objects_that_agree_leave_every_rule():
    mapping = learn_exact(lower_keys, SCHEMA, SCHEMA, "v1", "v2")
    old = obj("b", {"ports": [{"name": "http", "number": 80}], "algorithm": "rsa", "isCA": True})
    (new,) = lower_keys([old])
    assert contradicted(mapping, [(old, new)], SCHEMA, SCHEMA) == {}

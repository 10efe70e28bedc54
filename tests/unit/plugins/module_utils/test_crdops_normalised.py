# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""normalised: a dropped zero value is normalised only where the apiserver serves the object the same without it.

The real proof that the apiserver fills nested defaults only where the parent exists (and so serves `opts: {}` and
no `opts` differently) is tests/integration/test_normalised_served.py; here the schemas that decide it.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.structural_defaults import with_defaults
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.normalised import split_removed

DEFAULTED_MEMBER = {"type": "object", "properties": {"mode": {"type": "string", "default": "fast"}}}
REQUIRED_MEMBER = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
PLAIN = {"type": "object", "properties": {"name": {"type": "string"}}}


def _spec(**props) -> dict:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}


def test_an_empty_object_whose_members_have_defaults_is_lost_not_normalised():
    """Kept, `opts: {}` is served as `opts: {mode: fast}`; dropped, there is no `opts` at all."""
    schema = _spec(opts=DEFAULTED_MEMBER)
    assert split_removed({"spec": {"opts": {}}}, {"spec": {}}, schema) == ({".spec.opts"}, set())


def test_an_empty_object_with_a_default_deeper_down_is_lost():
    deep = {"type": "object", "properties": {"inner": {"type": "object", "default": {}, "properties": {
        "mode": {"type": "string", "default": "fast"}}}}}
    assert split_removed({"spec": {"opts": {}}}, {"spec": {}}, _spec(opts=deep)) == ({".spec.opts"}, set())


def test_an_empty_object_with_required_members_is_not_normalised():
    schema = _spec(ref=REQUIRED_MEMBER)
    assert split_removed({"spec": {"ref": {}}}, {"spec": {}}, schema) == ({".spec.ref"}, set())


def test_an_empty_list_item_object_with_member_defaults_is_lost_per_item():
    items = {"type": "array", "items": {"type": "object", "properties": {"opts": DEFAULTED_MEMBER}}}
    stored = {"spec": {"rules": [{"opts": {}}, {"opts": {"mode": "slow"}}]}}
    dropped = {"spec": {"rules": [{}, {"opts": {"mode": "slow"}}]}}
    assert split_removed(stored, dropped, _spec(rules=items)) == ({".spec.rules[].opts"}, set())


def test_zero_values_the_schema_serves_the_same_without_stay_normalised():
    """No default anywhere below, a map's values' defaults (an empty map has none), an empty list: absent is the
    same; and a default equal to the zero value is served the same either way."""
    schema = _spec(plain=PLAIN, labels={"type": "object", "additionalProperties": DEFAULTED_MEMBER},
                   items={"type": "array", "items": DEFAULTED_MEMBER}, flag={"type": "boolean", "default": False},
                   wrapped={"type": "object", "default": {},
                            "properties": {"mode": {"type": "string", "default": "fast"}}})
    stored = {"spec": {"plain": {}, "labels": {}, "items": [], "flag": False, "wrapped": {}}}
    lost, normalised = split_removed(stored, {"spec": {}}, schema)
    assert lost == set()
    assert normalised == {".spec.plain", ".spec.labels", ".spec.items", ".spec.flag", ".spec.wrapped"}


def test_a_zero_value_whose_default_is_something_else_is_still_lost():
    schema = _spec(paused={"type": "boolean", "default": True}, n={"type": "integer"})
    found = split_removed({"spec": {"paused": False, "n": 0}}, {"spec": {}}, schema)
    assert found == ({".spec.paused"}, {".spec.n"})


def test_with_defaults_fills_nested_defaults_only_where_the_parent_exists_as_the_apiserver_does():
    schema = _spec(opts=DEFAULTED_MEMBER, nul={"type": "string", "default": "d"},
                   ok={"type": "string", "nullable": True, "default": "d"},
                   list={"type": "array", "items": DEFAULTED_MEMBER})
    value = {"spec": {"nul": None, "ok": None, "list": [{}, {"mode": "slow"}]}}
    assert with_defaults(value, schema) == {"spec": {"nul": "d", "ok": None, "list": [{"mode": "fast"}, {"mode": "slow"}]}}
    assert with_defaults({"spec": {"opts": {}}}, schema)["spec"]["opts"] == {"mode": "fast"}
    assert value["spec"]["nul"] is None  # the caller's value is not changed

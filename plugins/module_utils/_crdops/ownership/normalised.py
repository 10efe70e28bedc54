# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Which removed fields are a loss, and which only a zero value the conversion leaves out.

A conversion webhook built on Go types drops a field whose value is the type's zero value when the field is
tagged ``omitempty`` (cert-manager's ``isCA bool `json:"isCA,omitempty"```): an object written with
``isCA: false`` comes back without ``isCA``. To a client, absent and ``false`` are the same value for that type,
so nothing is lost, as long as the apiserver serves the object the same way with the value and without it. It
does not when the schema defaults something there (kube/structural_defaults.py): absent reads as the field's own
``default``, and an ``{}`` kept is filled with its members' defaults (``opts: {}`` is served as
``opts: {mode: fast}``, an object without ``opts`` without it, since nested defaults are filled only where the
parent exists). A field the schema does not declare is different: the apiserver prunes it, and that is a loss
whatever its value.

So a removed path counts as normalised when the stored value is ``false``, ``0``, ``""``, ``[]`` or ``{}``, the
schema of the version the objects are compared at declares the field, and the value served with it (the stored
value with that schema's defaults filled in) is the value served without it: still the bare zero value with no
default for the field, or the field's default served the same. An ``{}`` whose schema lists ``required`` members
is never normalised: kept, it makes the object one that schema refuses (a create with it fails); dropped, the
object is valid, and that is a change the operator must see. Every other removal is a loss. Both are counted per occurrence: one list
item's ``false`` dropped and another item's ``true`` dropped at the same path are one normalised and one lost
value.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Set, Tuple

from ..kube.structural_defaults import with_defaults
from .field_paths import IGNORED_PATHS, key_path, leaf_paths

Schema = Mapping[str, Any]


def is_zero(value: Any) -> bool:
    """The zero value of a JSON type (bool is tested first: ``False == 0`` in Python)."""
    if isinstance(value, bool):
        return value is False
    if isinstance(value, (int, float)):
        return value == 0
    return value in ("", [], {})


def _member_schema(schema: Schema, key: str) -> Optional[Schema]:
    """The schema of ``key`` in an object schema, or None when the schema does not declare it."""
    props = schema.get("properties")
    if isinstance(props, Mapping) and isinstance(props.get(key), Mapping):
        member: Schema = props[key]
        return member
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _served_the_same_without(value: Any, member: Schema) -> bool:
    """The apiserver serves the field the same whether ``value`` is kept or left out (module docstring)."""
    if value == {} and member.get("required"):
        return False  # kept, the schema refuses the object (a create with it fails); dropped, it is valid
    served_with: Any = with_defaults(value, member)
    if "default" in member and member["default"] is not None:
        return bool(with_defaults(member["default"], member) == served_with)  # left out, it reads as the default
    return bool(served_with == value)  # left out, it stays absent: the same only if nothing was filled into the zero


def _dropped(value: Any, member: Optional[Schema]) -> bool:
    """A value left out that reads the same: zero, declared, and served the same without it."""
    return member is not None and is_zero(value) and _served_the_same_without(value, member)


def split_removed(stored: Any, served: Any, schema: Optional[Schema],
                  path: str = "") -> Tuple[Set[str], Set[str]]:
    """(lost, normalised) paths of the values ``stored`` has and ``served`` leaves out, walked as
    field_paths.diff_values walks them; ``schema`` is the openAPIV3Schema of the version both are in."""
    lost: Set[str] = set()
    normalised: Set[str] = set()
    if path in IGNORED_PATHS:
        return lost, normalised
    schema = schema if isinstance(schema, Mapping) else {}
    if isinstance(stored, dict) and isinstance(served, dict):
        for key, value in stored.items():
            sub = key_path(path, key)
            if sub in IGNORED_PATHS:
                continue
            member = _member_schema(schema, key)
            if key not in served:
                (normalised if _dropped(value, member) else lost).update(leaf_paths(value, sub))
            else:
                more = split_removed(value, served[key], member, sub)
                lost |= more[0]
                normalised |= more[1]
    elif isinstance(stored, list) and isinstance(served, list) and len(stored) == len(served):
        items = schema.get("items") if isinstance(schema.get("items"), Mapping) else None
        for old, new in zip(stored, served, strict=True):
            more = split_removed(old, new, items, path + "[]")
            lost |= more[0]
            normalised |= more[1]
    return lost, normalised


def version_openapi(crd_obj: Mapping[str, Any], version: str) -> Optional[Schema]:
    """The raw ``openAPIV3Schema`` of ``version`` in a CRD object, or None."""
    for v in (crd_obj.get("spec") or {}).get("versions") or ():
        if isinstance(v, Mapping) and v.get("name") == version:
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            return schema if isinstance(schema, Mapping) else None
    return None

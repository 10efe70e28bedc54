# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Whether the paths a translated managedFields entry would own exist in the object it belongs to.

A field mapping is learnt once per CRD and old version, and its rules are checked on a sample of objects
(mapping_check.py, mapping_sample.py). A conversion that depends on another field's value can still treat an object
outside the sample differently: a webhook that moves ``weight`` to ``mass.value`` only when ``unit`` is set gives an
object without ``unit`` a ``legacyWeight``. Translated with the sampled rule, that object's entry would own
``f:mass.f:value``, a field it does not have, and ``legacyWeight`` would have no owner: a later apply that drops the
field would not prune it. So each translated entry is held against its own object, as read at the storage version,
before it is written (managed_fields.py): every path it would own must be there.

``metadata``, ``apiVersion`` and ``kind`` are not checked: they keep their paths in every version, so the mapping
does not place them.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Tuple

from ..kube.crd_schema import ANY_NODE
from .field_mapping import canon, readable, walk_members
from .marker_objects import SKIPPED_ROOT_FIELDS

NOT_FOUND = object()  # a step that does not exist in the object (None is a value: a field set to null)


def _step(value: Any, key: str) -> Any:
    """The value one ``fieldsV1`` key leads to inside ``value``, or NOT_FOUND."""
    kind, text = key[:2], key[2:]
    if kind == "f:":
        return value[text] if isinstance(value, Mapping) and text in value else NOT_FOUND
    if not isinstance(value, list):
        return NOT_FOUND
    if kind == "i:":
        index = int(text) if text.isdigit() else -1
        return value[index] if 0 <= index < len(value) else NOT_FOUND
    try:
        bound = json.loads(text)
    except ValueError:
        return NOT_FOUND
    if kind == "k:" and isinstance(bound, dict):  # the list-map item whose key fields hold these values
        for item in value:
            if isinstance(item, Mapping) and all(k in item and canon(item[k]) == canon(v) for k, v in bound.items()):
                return item
        return NOT_FOUND
    if kind == "v:":  # a set value (compared as JSON text: 1 and true are not one value)
        return bound if any(canon(v) == canon(bound) for v in value) else NOT_FOUND
    return NOT_FOUND  # a key kind we do not know: not shown to exist, so not credited


def has_path(obj: Any, keys: Tuple[str, ...]) -> bool:
    """Whether the object holds the path named by these ``fieldsV1`` keys (``f:spec``, ``k:{"name":"a"}``, ...)."""
    value = obj
    for key in keys:
        value = _step(value, key)
        if value is NOT_FOUND:
            return False
    return True


def paths_not_in_object(fields_v1: Any, obj: Mapping[str, Any]) -> Tuple[str, ...]:
    """The owned paths of a translated ``fields_v1`` that ``obj`` lacks, readable (``.spec.mass.value``)."""
    if not isinstance(fields_v1, Mapping):
        return ()
    missing = []
    for member in walk_members(fields_v1, ANY_NODE):
        root = member.keys[0] if member.keys else ""
        if root.startswith("f:") and root[2:] in SKIPPED_ROOT_FIELDS:
            continue  # identical paths in every version: not placed by the mapping
        if not has_path(obj, member.keys):
            missing.append(readable(member.keys))
    return tuple(missing)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""A value as the apiserver serves it under a CRD version's schema: its structural defaults filled in.

The apiserver defaults a custom resource whenever it decodes one (reading from etcd, and every write), with the
algorithm of k8s.io/apiextensions-apiserver v0.37.2, pkg/apiserver/schema/defaulting/algorithm.go, ``Default``:

* in an object, a declared property that is absent (or ``null`` where the schema does not allow null) gets a deep
  copy of its ``default``;
* then every member present, including the defaults just set, is defaulted with its own schema (``properties``,
  else ``additionalProperties``), and every list item with ``items``.

So a nested default is filled only where its parent exists: ``opts: {}`` is served as ``opts: {mode: fast}`` when
``mode`` defaults to ``fast``, while an object without ``opts`` is served without it. normalised.py needs exactly
that difference. Pruning (storage_forecast.prune) is not done here: the caller compares values of one schema.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Mapping, Optional

Schema = Mapping[str, Any]


def _default_members(value: Dict[str, Any], schema: Schema) -> None:
    props = schema.get("properties")
    declared: Mapping[str, Any] = props if isinstance(props, Mapping) else {}
    for key, member in declared.items():
        if not isinstance(member, Mapping) or "default" not in member or member["default"] is None:
            continue  # the apiserver has no default to set for a null default either
        if key not in value or (value[key] is None and not member.get("nullable")):
            value[key] = copy.deepcopy(member["default"])
    extra = schema.get("additionalProperties")
    for key in list(value):
        if isinstance(declared.get(key), Mapping):
            fill_defaults(value[key], declared[key])
        elif isinstance(extra, Mapping):
            fill_defaults(value[key], extra)


def fill_defaults(value: Any, schema: Optional[Schema]) -> Any:
    """Fill ``schema``'s structural defaults into ``value`` in place, as the apiserver does; returns ``value``."""
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        _default_members(value, schema)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            fill_defaults(item, schema["items"])
    return value


def with_defaults(value: Any, schema: Optional[Schema]) -> Any:
    """A copy of ``value`` with ``schema``'s structural defaults filled in (``value`` is left as it is)."""
    return fill_defaults(copy.deepcopy(value), schema)

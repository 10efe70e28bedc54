# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""An exact field mapping, checked on real objects before anything is translated with it.

The exact mapping is learnt from made-up objects that set every field at once (marker_objects.py). A conversion that
depends on another field's presence or value is then seen in one branch only: a webhook that moves ``weight`` to
``mass.value`` when ``unit`` is set, and to ``legacyWeight`` when it is not, is learnt as ``weight -> mass.value``,
and an object without ``unit`` would have its owner's ``f:weight`` relabelled to a field it does not have. Likewise
a conversion that rewrites list-map key values (lower-cases them) keeps the made-up key markers unchanged.

So the rules are checked on real objects read at the old version and at the storage version (the apiserver
converts each read through the webhook; only pairs with one resourceVersion): a value an object sets at an old path
must be present at the path the rule maps it to. A rule an object contradicts is dropped: the path is unmapped and
named, as for any path the conversion is not shown to keep, never a guess. A changed value at the mapped path is
not a contradiction (a conversion may normalise values: ``ecdsa`` becomes ``ECDSA``), nor is a zero value the
conversion leaves out (normalised.py). When the old version is not served, the objects cannot be read at it and
the check says so.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

from ..kube.crd import Crd
from ..kube.crd_schema import Node
from ..kube.errors import CrdOpsError
from .field_mapping import EXACT, FieldMapping, instantiate, readable_abstract
from .marker_objects import Path
from .mapping_learn import flatten, keyed
from .mapping_sample import occurrences, read_pairs
from .normalised import is_zero
from ..kube.transport import Transport

Pair = Tuple[Dict[str, Any], Dict[str, Any]]
MAX_NAMED = 5


def _label(obj: Dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta["namespace"], meta.get("name")) if meta.get("namespace") else str(meta.get("name"))


def contradicted(mapping: FieldMapping, pairs: List[Pair], old_schema: Node, new_schema: Node) -> Dict[Path, str]:
    """Old path -> the first object whose storage-version read has nothing where the rule maps its value."""
    found: Dict[Path, str] = {}
    for old_obj, new_obj in pairs:
        present = keyed(flatten(new_obj, new_schema))
        for occ in occurrences(old_obj, old_schema):
            template = mapping.rules.get(occ.path)
            if template is None or occ.path in found or is_zero(json.loads(occ.value)):
                continue
            target = instantiate(template, occ.bindings)
            if target is None or target not in present:
                found[occ.path] = _label(old_obj)
    return found


def check_on_objects(transport: Transport, crd: Crd, version: str, mapping: FieldMapping, old_schema: Node,
                     new_schema: Node, limit: int) -> FieldMapping:
    """``mapping`` with the rules real objects contradict dropped, and ``checked`` saying what was checked."""
    if mapping.method != EXACT:
        return mapping
    if version not in crd.served_versions:
        mapping.checked = "not checked on real objects: %s is not served, so they cannot be read at it" % version
        return mapping
    try:
        pairs = read_pairs(transport, crd, version, limit)
    except CrdOpsError as exc:
        mapping.checked = "not checked on real objects: %s" % (exc.api_message or exc.message)
        return mapping
    wrong = contradicted(mapping, pairs, old_schema, new_schema)
    with mapping.lock:
        for path in wrong:
            mapping.rules[path] = None
        mapping.derived.clear()  # a struct's image follows its descendants' rules
    mapping.checked = "checked on %d objects read at %s and %s%s" % (len(pairs), version, mapping.to_version,
                                                                     _named(wrong))
    return mapping


def _named(wrong: Dict[Path, str]) -> str:
    if not wrong:
        return ": every rule held"
    items = sorted((readable_abstract(p), obj) for p, obj in wrong.items())
    shown = ", ".join("%s (in %s)" % item for item in items[:MAX_NAMED])
    more = " and %d more" % (len(items) - MAX_NAMED) if len(items) > MAX_NAMED else ""
    return ": %d paths the objects contradict left unmapped: %s%s" % (len(items), shown, more)

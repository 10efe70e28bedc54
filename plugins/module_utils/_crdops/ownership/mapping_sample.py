# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The best-effort field mapping: real objects read at the old version and at the storage version.

The apiserver converts each read through the webhook, so the two reads of one object show where its values
went. Real values are not markers: two fields may hold the same value, a field may be unset, a default may
look like a moved value. So a path pair is accepted only where the value is unique in the old object and in
the converted one, and the pair holds in every object sampled (an object that has the old path but another
value, or nothing, at the new one refutes it). Paths no object sets stay unmapped. Only objects whose two
reads carry one resourceVersion are compared (the object did not change in between).
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

from ..kube.crd import Crd
from ..kube.crd_schema import ANY, LIST, LIST_MAP, LIST_SET, MAP, SCALAR, STRUCT, Node
from .field_mapping import BEST_EFFORT, UNAVAILABLE, FieldMapping, Template, canon, instantiate
from .marker_objects import SKIPPED_ROOT_FIELDS, Path
from .mapping_learn import _item_rule, flatten, keyed
from ..kube.transport import JSON, Transport, error_from_response


class Occurrence(NamedTuple):
    path: Path
    bindings: Tuple[Any, ...]
    value: str  # canonical JSON


def occurrences(value: Any, node: Node, path: Path = (), bindings: Tuple[Any, ...] = (),
                out: Optional[List[Occurrence]] = None) -> List[Occurrence]:
    """Every owned leaf of an old-version object, with its abstract path and the keys bound along it."""
    out = [] if out is None else out
    if node.kind == SCALAR or node.atomic or not isinstance(value, (dict, list)):
        out.append(Occurrence(path, bindings, canon(value)))
    elif isinstance(value, dict):
        if not value and path:  # declared with none of its fields (``selfSigned: {}``): owned as a member itself
            out.append(Occurrence(path, bindings, canon(value)))
        for key in sorted(value):
            if not path and key in SKIPPED_ROOT_FIELDS:
                continue
            if node.kind == STRUCT and key in node.props:
                occurrences(value[key], node.props[key], path + (("f", key),), bindings + (None,), out)
            elif node.kind == MAP:
                occurrences(value[key], node.item or Node(ANY), path + (("m",),), bindings + (key,), out)
            else:
                occurrences(value[key], Node(ANY), path + (("f", key),), bindings + (None,), out)
    elif node.kind == LIST and node.list_type == LIST_MAP:
        for item in value:
            if isinstance(item, dict):
                ident = dict((k, item.get(k)) for k in node.keys)
                occurrences(item, node.item or Node(ANY), path + (("k",),), bindings + (ident,), out)
    elif node.kind == LIST and node.list_type == LIST_SET:
        for item in value:
            out.append(Occurrence(path + (("v",),), bindings + (item,), canon(item)))
    else:
        out.append(Occurrence(path, bindings, canon(value)))
    return out


def template_from(keys: Tuple[str, ...], occ: Occurrence) -> Optional[Template]:
    """The template of a converted path, its keys expressed through what ``occ`` bound along its path."""
    out: List[Tuple[Any, ...]] = []
    for key in keys:
        kind, text = key[:2], key[2:]
        if kind == "f:":
            index = next((i for i, b in enumerate(occ.bindings) if occ.path[i][0] == "m" and b == text), None)
            out.append(("mkey", index) if index is not None else ("lit", key))
        elif kind == "k:":
            fields = []
            for field, value in sorted(_loads(text).items()):
                ref = next(((i, old) for i, b in enumerate(occ.bindings) if isinstance(b, dict)
                            for old, v in sorted(b.items()) if v == value), None)
                if ref is None:
                    return None
                fields.append((field, ref[0], ref[1]))
            out.append(("kkey", tuple(fields)))
        else:
            index = next((i for i, b in enumerate(occ.bindings) if occ.path[i][0] == "v" and canon(b) == text), None)
            if index is None:
                return None
            out.append(("vval", index))
    return tuple(out)


def _loads(text: str) -> Dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def match_objects(pairs: List[Tuple[Dict[str, Any], Dict[str, Any]]], old_schema: Node,
                  new_schema: Node) -> Dict[Path, Optional[Template]]:
    """Rules from (old read, storage-version read) pairs of the same objects."""
    seen: Dict[Path, List[Tuple[Occurrence, Dict[Tuple[str, ...], str]]]] = {}
    candidates: Dict[Path, Set[Optional[Template]]] = {}
    for old_obj, new_obj in pairs:
        occs = occurrences(old_obj, old_schema)
        new_flat = keyed(flatten(new_obj, new_schema))
        old_count: Dict[str, int] = {}
        for occ in occs:
            old_count[occ.value] = old_count.get(occ.value, 0) + 1
        by_value: Dict[str, List[Tuple[str, ...]]] = {}
        for keys, value in new_flat.items():
            by_value.setdefault(value, []).append(keys)
        for occ in occs:
            seen.setdefault(occ.path, []).append((occ, new_flat))
            found = by_value.get(occ.value) or []
            if old_count[occ.value] == 1 and len(found) == 1:
                candidates.setdefault(occ.path, set()).add(template_from(found[0], occ))
    rules: Dict[Path, Optional[Template]] = {}
    for path, occs_of in seen.items():
        options = candidates.get(path) or set()
        template = next(iter(options)) if len(options) == 1 else None
        if template is not None and all(_holds(template, occ, flat) for occ, flat in occs_of):
            rules[path] = template
        else:
            rules[path] = None
    for path in sorted(set(p[:i + 1] for p in seen for i, s in enumerate(p) if s[0] in ("k", "m")), key=len):
        if path not in rules:
            rules[path] = _item_rule(path, rules)
    return rules


def _holds(template: Template, occ: Occurrence, flat: Dict[Tuple[str, ...], str]) -> bool:
    target = instantiate(template, occ.bindings)
    return target is not None and flat.get(target) == occ.value


def read_pairs(transport: Transport, crd: Crd, version: str, limit: int) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """Up to ``limit`` objects read at ``version`` and at the storage version, paired by name and
    resourceVersion (two LISTs of the first objects)."""
    def items(ver: str) -> Dict[Tuple[str, str], Dict[str, Any]]:
        resp = transport.request("GET", crd.resource_path(ver), query=[("limit", str(limit))], accept=JSON)
        if not resp.ok:
            raise error_from_response(resp, "LIST at %s (to learn the field mapping)" % ver,
                                      cluster=transport.cluster_label, crd=crd.name)
        out = {}
        for obj in resp.json().get("items") or ():
            meta = obj.get("metadata") or {}
            out[(str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
        return out

    old, new = items(version), items(crd.storage_version or "")
    pairs = []
    for key, obj in sorted(old.items()):
        other = new.get(key)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if other is not None and (other.get("metadata") or {}).get("resourceVersion") == rv:
            pairs.append((obj, other))
    return pairs


def learn_from_objects(transport: Transport, crd: Crd, version: str, old_schema: Node, new_schema: Node,
                       limit: int, why: str) -> FieldMapping:
    storage = crd.storage_version or ""
    if version not in crd.served_versions:
        return FieldMapping(version, storage, old_schema, UNAVAILABLE,
                            note="%s; %s is not served, so objects cannot be read at it" % (why, version))
    try:
        pairs = read_pairs(transport, crd, version, limit)
    except Exception as exc:  # noqa: BLE001 - any failure leaves the mapping unavailable, named in the result
        return FieldMapping(version, storage, old_schema, UNAVAILABLE, note="%s; %s" % (why, exc))
    rules = match_objects(pairs, old_schema, new_schema)
    return FieldMapping(version, storage, old_schema, BEST_EFFORT, rules,
                        note="%s; best effort from %d objects read at %s and %s" % (why, len(pairs), version, storage))

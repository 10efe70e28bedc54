# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""kubectl's last-applied annotation, rewritten into the storage version's field names.

Client-side ``kubectl apply`` (and Argo CD's default sync) prunes by a three-way JSON merge patch: a field that
``kubectl.kubernetes.io/last-applied-configuration`` names and the new manifest does not is deleted. The
annotation holds the manifest in the names of the version it was applied at. After a webhook renames a field
(``spec.backupZone`` becomes ``spec.zones.backup``), the first apply at the new version cannot know that the new
name was its own, and never prunes it. So the re-store rewrites the annotation of an object applied at a version
the target release removes, in the same guarded write as its managedFields:

- Each value of the manifest moves to the path the field mapping gives its field (field_mapping.py), the same
  mapping the managedFields entries are translated with, so the annotation never names a field the user did
  not declare (a ConversionReview of the annotation could add defaults or a converter's own annotations, which
  kubectl would then delete from the object). A value whose path does not map is left out and named.
- Values are kept as applied: a mapped value lands whole, except inside an atomic struct or map. kubectl's merge
  patch goes into maps key by key whatever ``x-kubernetes-map-type`` says, so a field left with its old name there
  would never be pruned. So each field inside one is a value of its own, mapped through the mapping learnt with
  atomic structs and maps opened (``FieldMapping.inside_atomic``); one that does not map is left out and named,
  never kept under its old name. An atomic list still lands whole with its old inner names: kubectl replaces a
  list whole, so its pruning does not look inside it.
- The write is sent under the field manager that owns the annotation, so its ``Update`` entry keeps it (a write
  under another name would move the annotation's ownership to that name). An annotation owned by no entry, by
  several, or by an ``Apply`` entry is left as it is and reported.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..kube.crd_schema import ANY_NODE, STRUCT, Node
from .field_mapping import FieldMapping, build_trie, readable
from .marker_objects import SKIPPED_ROOT_FIELDS
from .mapping_learn import flatten, keyed

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
POINTER = "/metadata/annotations/" + LAST_APPLIED.replace("~", "~0").replace("/", "~1")
Keys = Tuple[str, ...]  # fieldsV1 trie keys of one path


class LastAppliedFix(NamedTuple):
    """What the pass does to one object's last-applied annotation."""

    version: str  # the version it was applied at
    text: Optional[str]  # the annotation to write; None: left as it is (``note`` says why)
    owner: str  # the field manager whose Update entry owns the annotation (the write is sent as it)
    dropped_paths: Tuple[str, ...] = ()  # applied paths the conversion is not shown to map, left out
    note: str = ""
    missing_paths: Tuple[str, ...] = ()  # translated paths the object lacks: the annotation was left as it is


def applied_version(text: Any, group: str) -> Optional[Tuple[Dict[str, Any], str]]:
    """The annotation's manifest and the version of ``group`` it was applied at; None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        manifest = json.loads(text)
    except ValueError:
        return None
    if not isinstance(manifest, dict):
        return None
    grp, _sep, version = str(manifest.get("apiVersion") or "").rpartition("/")
    return (manifest, version) if grp == group and version else None


def annotation_owner(managed_fields: Any) -> Tuple[str, str]:
    """The manager of the one ``Update`` entry owning the annotation, or "" and why there is none."""
    owners = []
    for entry in managed_fields if isinstance(managed_fields, list) else ():
        fields = entry.get("fieldsV1") if isinstance(entry, dict) else None
        annotations = ((fields or {}).get("f:metadata") or {}).get("f:annotations") or {}
        if isinstance(annotations, dict) and "f:" + LAST_APPLIED in annotations:
            owners.append(entry)
    if len(owners) != 1:
        return "", "%d managedFields entries own the annotation (one Update entry expected)" % len(owners)
    entry = owners[0]
    if entry.get("operation") != "Update" or entry.get("subresource"):
        return "", "owned by %s (%s%s), not by a client-side applier" % (
            entry.get("manager"), entry.get("operation"), " of " + entry["subresource"] if entry.get("subresource") else "")
    return str(entry.get("manager") or ""), ""


def manifest_leaves(manifest: Mapping[str, Any], node: Node) -> List[Tuple[Keys, Any]]:
    """Each applied value that server-side apply would own as one member, with its trie keys (the same walk the
    mapping is learnt with; ``apiVersion``, ``kind`` and ``metadata`` are left out: they keep their paths)."""
    return [(keys, json.loads(text)) for keys, text in keyed(flatten(dict(manifest), node)).items()]


def place(root: Dict[str, Any], keys: Keys, value: Any) -> bool:
    """Put ``value`` at ``keys`` in ``root``, creating the structs and list items on the way; False (nothing put)
    when a step finds a value of another shape there (two mapped paths that disagree on the shape)."""
    node: Any = root
    for i, key in enumerate(keys):
        kind, text, last = key[:2], key[2:], i == len(keys) - 1
        if kind == "f:":
            if not isinstance(node, dict):
                return False
            if last and not (value == {} and isinstance(node.get(text), dict)):
                node[text] = value
            elif not last:
                node = node.setdefault(text, [] if keys[i + 1][:2] in ("k:", "v:") else {})
        elif not isinstance(node, list):
            return False
        elif kind == "v:":
            if json.loads(text) not in node:
                node.append(json.loads(text))
            return True
        else:
            node = _item(node, json.loads(text))
    return True


def _item(items: List[Any], wanted: Dict[str, Any]) -> Dict[str, Any]:
    """The list-map item whose key fields hold ``wanted`` (appended when there is none)."""
    for item in items:
        if isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
            return item
    new: Dict[str, Any] = dict(wanted)
    items.append(new)
    return new


def translate_manifest(manifest: Mapping[str, Any], mapping: FieldMapping) -> Tuple[Dict[str, Any], Tuple[str, ...]]:
    """The manifest with each value at its mapped path, and the readable paths left out. The fields inside an
    atomic struct or map are values of their own here: kubectl's merge patch compares them one by one."""
    mapping = mapping.inside_atomic()
    values = dict(manifest_leaves(manifest, mapping.schema if mapping.schema.kind == STRUCT else ANY_NODE))
    out: Dict[str, Any] = dict((k, manifest[k]) for k in SKIPPED_ROOT_FIELDS if k in manifest)
    dropped = []
    for member, target in mapping.targets(build_trie(list(values))):
        if target is None or member.keys not in values or not place(out, target, values[member.keys]):
            dropped.append(readable(member.keys))
    return out, tuple(dropped)


def fix_last_applied(text: str, manifest: Mapping[str, Any], version: str, group: str, storage_version: str,
                     mapping: FieldMapping, managed_fields: Any,
                     obj: Optional[Mapping[str, Any]] = None) -> LastAppliedFix:
    """The annotation rewritten at the storage version, or left as it is with the reason. ``obj``: the object as
    read at the storage version; a translated manifest naming a path it lacks is not written: kubectl would prune
    a field the user never declared there, and keep the one they did."""
    owner, why = annotation_owner(managed_fields)
    if not owner:
        return LastAppliedFix(version, None, "", note=why)
    new, dropped = translate_manifest(manifest, mapping)
    if not any(k not in SKIPPED_ROOT_FIELDS for k in new):
        return LastAppliedFix(version, None, owner, dropped, "no applied field maps to %s (%s mapping)"
                              % (storage_version, mapping.method))
    missing = manifest_paths_not_in(new, obj) if obj is not None else ()
    if missing:
        why = "translated, it would name %s, which the object does not have at %s (%s mapping)" % (
            ", ".join(missing[:5]), storage_version, mapping.method)
        return LastAppliedFix(version, None, owner, dropped, why, missing)
    new["apiVersion"] = "%s/%s" % (group, storage_version)
    ending = "\n" if text.endswith("\n") else ""
    return LastAppliedFix(version, json.dumps(new, sort_keys=True, separators=(",", ":")) + ending, owner, dropped)


def manifest_paths_not_in(manifest: Mapping[str, Any], obj: Mapping[str, Any]) -> Tuple[str, ...]:
    """The paths of a translated manifest's values that ``obj`` lacks (``.spec.mass.value``). A map is followed
    key by key, as kubectl's merge patch does; a list or a scalar must be there as a whole; a null applied is a
    deletion, so nothing needs to be there."""
    missing: List[str] = []

    def walk(applied: Any, live: Any, path: str) -> None:
        for key, value in applied.items():
            here = "%s.%s" % (path, key)
            if value is None:
                continue
            if not isinstance(live, Mapping) or key not in live:
                missing.append(here)
            elif isinstance(value, dict) and value:
                walk(value, live[key], here)

    walk(dict((k, v) for k, v in manifest.items() if k not in SKIPPED_ROOT_FIELDS), obj, "")
    return tuple(missing)

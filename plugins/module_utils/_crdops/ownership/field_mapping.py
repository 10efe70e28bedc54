# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Where each field path of one CRD version lands in the storage version, and a ``fieldsV1`` rewritten with it.

A *rule* maps an abstract path of the old version (see marker_objects.py: field steps, and key steps that stand for
any map key, list-map item or set value) to a *template* of the storage version's ``fieldsV1`` keys. A
template element is ``("lit", key)`` (that very key), ``("mkey", i)`` (the map key bound at step ``i`` of
the old path), ``("kkey", ((field, i, old_field), ...))`` (a list-map item whose key ``field`` takes the
value of ``old_field`` of the item bound at step ``i``: a renamed list-map key) or ``("vval", i)`` (the set
value bound at step ``i``). A rule of None means the conversion was seen not to keep that path (lost, split,
or not told apart from another): the path is dropped from the entry and named, never mapped to itself.

Rules are learnt by matching value vectors (mapping_learn.py): a path maps to the one place its values land,
only when no other path holds the same values. A struct owned with none of its fields (``f:selfSigned: {}``)
takes the image its mapped descendants agree on (struct_rules.py). ``metadata``, ``apiVersion`` and ``kind`` keep their paths:
a conversion webhook may change nothing in metadata but labels and annotations, and those keep their keys.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple

from ..kube.crd_schema import ANY, ANY_NODE, LIST, LIST_MAP, LIST_SET, MAP, STRUCT, Node
from .marker_objects import SKIPPED_ROOT_FIELDS, Path
from .struct_rules import struct_rule

TElem = Tuple[Any, ...]
Template = Tuple[TElem, ...]
EXACT, BEST_EFFORT, UNAVAILABLE = "exact", "best_effort", "unavailable"


def canon(value: Any) -> str:
    """The JSON text server-side apply writes in ``k:`` and ``v:`` keys (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Member(NamedTuple):
    """One owned path of a ``fieldsV1`` trie: its abstract path (None when the schema does not know it),
    the key bound at each step (None for field steps), the concrete trie keys, and whether it lies under a
    schema-less subtree (learnable from the entry itself)."""

    path: Optional[Path]
    bindings: Tuple[Any, ...]
    keys: Tuple[str, ...]
    schemaless: bool


class Translation(NamedTuple):
    fields: Dict[str, Any]  # the storage version's fieldsV1
    mapped: int  # owned paths carried over
    dropped: Tuple[str, ...]  # owned paths that could not be mapped, readable (``.spec.endpoint``)


class FieldMapping:
    """The rules from ``from_version`` to ``to_version``, and how they were learnt (``method``, ``note``).
    ``learn_more`` (optional) is asked once per entry for paths under schema-less subtrees not seen yet.
    ``learn_inside`` (optional) learns, the first time ``inside_atomic`` is asked, the mapping with atomic structs
    and maps opened (crd_schema.opened)."""

    def __init__(self, from_version: str, to_version: str, schema: Node, method: str,
                 rules: Optional[Dict[Path, Optional[Template]]] = None, note: str = "",
                 learn_more: Optional[Callable[[Mapping[str, Any]], Dict[Path, Optional[Template]]]] = None,
                 learn_inside: Optional[Callable[[], FieldMapping]] = None) -> None:
        self.from_version = from_version
        self.to_version = to_version
        self.schema = schema
        self.method = method
        self.rules: Dict[Path, Optional[Template]] = dict(rules or {})
        self.note = note
        self.checked = ""  # how the rules were checked on real objects (mapping_check.py)
        self.learn_more = learn_more
        self.lock = threading.Lock()  # shared by the pass's workers: rules learnt later, struct rules derived
        self.derived: Dict[Path, Optional[Template]] = {}
        self.learn_inside = learn_inside
        self.inside: Optional[FieldMapping] = None
        self.inside_lock = threading.Lock()  # not ``lock``: a review must not hold up the entries' translation

    def inside_atomic(self) -> FieldMapping:
        """The mapping that also maps the fields inside atomic structs and maps, for kubectl's last-applied
        annotation (server-side apply owns such a value whole, kubectl's merge patch goes into it). Itself when
        there is nothing to open, or when its rules map an atomic value only where it is found unchanged (the best
        effort: its inside keeps its names)."""
        if self.learn_inside is None:
            return self
        with self.inside_lock:
            if self.inside is None:
                self.inside = self.learn_inside()
            return self.inside

    def summary(self) -> Dict[str, Any]:
        unmapped = sorted(readable_abstract(p) for p, t in self.rules.items() if t is None)
        return {"from_version": self.from_version, "to_version": self.to_version, "method": self.method,
                "paths_mapped": sum(1 for t in self.rules.values() if t is not None),
                "paths_unmapped": unmapped[:50], "note": self.note or None,
                "checked_on_objects": self.checked or None}

    def translate(self, fields_v1: Any) -> Translation:
        """``fields_v1`` rewritten into the storage version's paths."""
        targets: List[Tuple[str, ...]] = []
        dropped: List[str] = []
        for member, target in self.targets(fields_v1):
            if target is None:
                dropped.append(readable(member.keys))
            else:
                targets.append(target)
        return Translation(build_trie(targets), len(targets), tuple(dropped))

    def targets(self, fields_v1: Any) -> List[Tuple[Member, Optional[Tuple[str, ...]]]]:
        """Each owned path of ``fields_v1`` with the storage version's trie keys it maps to (None: unmapped)."""
        members = list(walk_members(fields_v1 if isinstance(fields_v1, Mapping) else {}, self.schema))
        unseen = [m for m in members if m.schemaless and m.path is not None and m.path not in self.rules]
        if unseen and self.learn_more is not None and isinstance(fields_v1, Mapping):
            more = self.learn_more(fields_v1)
            with self.lock:
                for path, template in more.items():
                    self.rules.setdefault(path, template)
                self.derived.clear()  # new descendants may change a struct's image
        return [(m, self.target_of(m)) for m in members]

    def target_of(self, m: Member) -> Optional[Tuple[str, ...]]:
        if m.keys and m.keys[0][2:] in SKIPPED_ROOT_FIELDS and m.keys[0].startswith("f:"):
            return m.keys  # metadata, apiVersion, kind: the same paths in every version
        if m.path is None:
            return None
        template = self.rules.get(m.path)
        if template is None:
            template = self.struct_template(m.path)
        return instantiate(template, m.bindings) if template is not None else None

    def struct_template(self, path: Path) -> Optional[Template]:
        """The image of a struct owned with none of its fields, from its descendants' rules (cached); None for
        a leaf (it has no descendants) and for a struct the conversion split or lost."""
        with self.lock:
            if path not in self.derived:
                self.derived[path] = struct_rule(path, self.rules)
            return self.derived[path]


def _child(node: Node, key: str) -> Tuple[Optional[Tuple[str, ...]], Any, Node]:
    """The abstract step, bound key and schema node of trie key ``key`` under ``node`` (step None: unknown)."""
    kind, text = key[:2], key[2:]
    if kind == "f:":
        if node.kind == STRUCT and text in node.props:
            return ("f", text), None, node.props[text]
        if node.kind == MAP:
            return ("m",), text, node.item or ANY_NODE
        if node.kind in (ANY, STRUCT) and not node.atomic:
            return ("f", text), None, ANY_NODE
        return None, None, ANY_NODE
    if node.kind == LIST and kind in ("k:", "v:"):
        try:
            bound = json.loads(text)
        except ValueError:
            return None, None, ANY_NODE
        if kind == "k:" and node.list_type == LIST_MAP and isinstance(bound, dict):
            return ("k",), bound, node.item or ANY_NODE
        if kind == "v:" and node.list_type == LIST_SET:
            return ("v",), bound, node.item or ANY_NODE
    return None, None, ANY_NODE


def walk_members(trie: Mapping[str, Any], node: Node, path: Optional[Path] = (), bindings: Tuple[Any, ...] = (),
                 keys: Tuple[str, ...] = (), schemaless: bool = False) -> Iterator[Member]:
    """Every owned path of ``trie`` (a key mapping to ``{}``, or a node holding ``.``), parsed against ``node``."""
    for key, sub in trie.items():
        if key == "." or not isinstance(key, str):
            continue
        step, bound, child = _child(node, key)
        child_path = path + (step,) if path is not None and step is not None else None
        unknown_field = step is not None and child is ANY_NODE and node.kind == STRUCT and step[0] == "f"
        child_schemaless = schemaless or node.kind == ANY or unknown_field
        child_keys = keys + (key,)
        children = sub if isinstance(sub, Mapping) else {}
        if not [k for k in children if k != "."] or "." in children:
            yield Member(child_path, bindings + (bound,), child_keys, child_schemaless)
        if [k for k in children if k != "."]:
            yield from walk_members(children, child, child_path, bindings + (bound,), child_keys, child_schemaless)


def instantiate(template: Template, bindings: Tuple[Any, ...]) -> Optional[Tuple[str, ...]]:
    out: List[str] = []
    for elem in template:
        kind = elem[0]
        if kind == "lit":
            out.append(elem[1])
        elif kind == "mkey":
            bound = _bound(bindings, elem[1])
            if not isinstance(bound, str):
                return None
            out.append("f:" + bound)
        elif kind == "vval":
            out.append("v:" + canon(_bound(bindings, elem[1])))
        elif kind == "kkey":
            item: Dict[str, Any] = {}
            for field, index, old_field in elem[1]:
                bound = _bound(bindings, index)
                if not isinstance(bound, dict) or old_field not in bound:
                    return None
                item[field] = bound[old_field]
            out.append("k:" + canon(item))
        else:
            return None
    return tuple(out)


def _bound(bindings: Tuple[Any, ...], index: int) -> Any:
    return bindings[index] if 0 <= index < len(bindings) else None


def build_trie(paths: List[Tuple[str, ...]]) -> Dict[str, Any]:
    """A fieldsV1 trie owning each of ``paths``; a member that also has owned children gets ``.``."""
    root: Dict[str, Any] = {}
    members: Set[Tuple[str, ...]] = set(paths)
    for p in paths:
        node = root
        for key in p:
            node = node.setdefault(key, {})

    def mark(node: Dict[str, Any], prefix: Tuple[str, ...]) -> None:
        for key, sub in node.items():
            here = prefix + (key,)
            if sub and here in members:
                sub["."] = {}
            mark(sub, here)
    mark(root, ())
    return root


def readable(keys: Tuple[str, ...]) -> str:
    """``.spec.ports[name="http"].number`` for the trie keys of one path."""
    out = []
    for key in keys:
        kind, text = key[:2], key[2:]
        if kind == "f:":
            out.append("." + text)
        elif kind == "k:":
            try:
                item = json.loads(text)
                out.append("[%s]" % ",".join("%s=%s" % (k, json.dumps(v)) for k, v in sorted(item.items())))
            except (ValueError, AttributeError):
                out.append("[%s]" % text)
        else:
            out.append("[%s]" % text)
    return "".join(out) or "."


def readable_abstract(path: Path) -> str:
    """``.spec.ports[*].number`` for an abstract path."""
    return "".join("." + step[1] if step[0] == "f" else "[*]" for step in path) or "."

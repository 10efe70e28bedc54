# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Made-up objects of one CRD version, one distinct marker value per owned path, for a conversion webhook.

Every field of the schema gets a value; each list-map gets one item and each map one key, whose key values
are markers too, so that where the converted object puts them shows how item keys are renamed. ``count``
objects are made: a leaf's values across them (its *vector*) is unique among all leaves, so a boolean or an
enum can be told apart from its neighbours (a struct field with no fields of its own is present in some objects
and absent from the others, in a pattern of its own), and the strings of the second object carry the separators a
split would cut at (``:``, ``/``, space), so a field split in two never shows up whole on either side.

Paths are *abstract*: a step is ``("f", name)`` for a field, ``("m",)`` for a map key, ``("k",)`` for a
list-map item and ``("v",)`` for a set item; the marker of the key a step stands for is kept in ``keys``.
Where the schema says nothing (``x-kubernetes-preserve-unknown-fields``), the fields a ``guide`` trie
(a managedFields ``fieldsV1``) names are made up as strings.
"""

from __future__ import annotations

import datetime
from typing import AbstractSet, Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from ..kube.crd_schema import ANY, LIST, LIST_MAP, LIST_SET, MAP, SCALAR, STRUCT, Node

Step = Tuple[str, ...]
Path = Tuple[Step, ...]
SKIPPED_ROOT_FIELDS = ("apiVersion", "kind", "metadata")  # the same in every version; never converted
EPOCH = datetime.datetime(2001, 2, 3, tzinfo=datetime.timezone.utc)
MAX_OBJECTS = 16
OMITTED = object()  # a leaf left out of the made-up objects
# other shapes for a string a webhook refuses as a plain marker (it decodes it as a Go duration, time or number)
STYLES = ("duration", "date-time", "number")


class MadeUp(NamedTuple):
    objects: List[Dict[str, Any]]  # the content (no apiVersion, kind, metadata)
    leaves: Dict[Path, Tuple[Any, ...]]  # leaf path -> its value in each object
    keys: Dict[Path, Any]  # path ending in a key step -> the marker of that key (same in every object)
    interior: List[Path]  # paths that are members without being leaves (list-map items, map keys)


class _Maker:
    def __init__(self, count: int, omit: AbstractSet[Path] = frozenset(),
                 styles: Optional[Mapping[Path, str]] = None) -> None:
        self.count = count
        self.omit = omit
        self.styles = dict(styles or {})
        self.serial = 0
        self.flags = 0  # booleans and enums: each gets the next pattern over the objects
        self.leaves: Dict[Path, Tuple[Any, ...]] = {}
        self.keys: Dict[Path, Any] = {}
        self.interior: List[Path] = []

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    def key_marker(self, node: Optional[Node]) -> Any:
        n = self.next_serial()
        if node is not None and node.kind == SCALAR and node.scalar in ("integer", "number", "int-or-string"):
            return 700000 + n
        return "crdops-key-%d" % n

    def scalar(self, node: Node, style: str = "") -> Tuple[Any, ...]:
        n = self.next_serial()
        if style == "duration":
            return tuple("%dh%dm%ds" % (n, j, n % 60) for j in range(self.count))
        if style == "number":
            return tuple(str(100000 + n * MAX_OBJECTS + j) for j in range(self.count))
        if node.enum or node.scalar == "boolean":
            choices = list(node.enum) if node.enum else [False, True]
            self.flags += 1
            p, base = self.flags, len(choices)
            return tuple(choices[(p // base ** j) % base] for j in range(self.count))
        if node.scalar in ("integer", "number", "int-or-string"):
            return tuple(100000 + n * MAX_OBJECTS + j for j in range(self.count))
        if node.fmt == "date":
            days = [EPOCH + datetime.timedelta(days=n * MAX_OBJECTS + j) for j in range(self.count)]
            return tuple(d.strftime("%Y-%m-%d") for d in days)
        if node.fmt == "date-time" or style == "date-time":
            stamps = [EPOCH + datetime.timedelta(days=n, seconds=j) for j in range(self.count)]
            return tuple(t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in stamps)
        return tuple("crdops-%d" % n if j == 0 else "crdops-%d:%d/s p" % (n, j) for j in range(self.count))

    def value(self, node: Node, path: Path, guide: Any, record: bool) -> Tuple[Any, ...]:
        """``node``'s value in every object; records leaves (and key markers) when ``record``."""
        if path in self.omit:
            return tuple(OMITTED for _j in range(self.count))
        if node.kind == SCALAR or (node.kind == ANY and not _has_fields(guide)):
            values = self.scalar(node, self.styles.get(path, ""))
        elif node.atomic:
            values = self.whole(node, path, guide)
        elif node.kind in (STRUCT, ANY):
            return self.struct(node, path, guide, record)
        elif node.kind == MAP:
            return self.map(node, path, guide, record)
        elif node.kind == LIST:
            return self.list(node, path, guide, record)
        else:  # pragma: no cover - every kind is handled above
            values = self.scalar(node)
        if record:
            self.leaves[path] = values
        return values

    def whole(self, node: Node, path: Path, guide: Any) -> Tuple[Any, ...]:
        """An atomic list, map or struct: made up in full, owned and compared as one value."""
        if node.kind == LIST:
            inner = self.value(node.item or Node(SCALAR), path + (("i",),), None, False)
            return tuple([v] for v in inner)
        atomic = Node(node.kind, props=node.props, item=node.item)
        return self.value(atomic, path, guide, False)

    def struct(self, node: Node, path: Path, guide: Any, record: bool,
               skip: Tuple[str, ...] = ()) -> Tuple[Any, ...]:
        objs: List[Dict[str, Any]] = [{} for _j in range(self.count)]
        fields: Dict[str, Node] = dict(node.props)
        for name in _guide_fields(guide):
            fields.setdefault(name, Node(ANY))
        for name in sorted(fields):
            if (not path and name in SKIPPED_ROOT_FIELDS) or name in skip:
                continue
            sub = _guide_child(guide, "f:" + name)
            values = self.value(fields[name], path + (("f", name),), sub, record)
            for obj, v in zip(objs, values, strict=True):
                if v is not OMITTED:
                    obj[name] = v
        if record and not fields and path:
            self.leaves[path] = self.presence() if path[-1][0] == "f" else tuple(objs)
            return self.leaves[path]
        return tuple(objs)

    def presence(self) -> Tuple[Any, ...]:
        """A struct field with no fields of its own (``type: object`` and nothing else) can hold no marker, and
        ``{}`` in every object would look like every other such field. So it is present (``{}``) in some objects
        and left out of the others, in a pattern of its own like a boolean's: where the conversion puts ``{}``
        in exactly those objects is its image. A conversion that drops or fills it is not shown to keep it."""
        self.flags += 1
        return tuple({} if (self.flags >> j) & 1 else OMITTED for j in range(self.count))

    def map(self, node: Node, path: Path, guide: Any, record: bool) -> Tuple[Any, ...]:
        key = self.key_marker(None)
        step = path + (("m",),)
        if record:
            self.keys[step] = key
            self.interior.append(step)
        values = self.value(node.item or Node(ANY), step, None, record)
        return tuple({key: v} for v in values)

    def list(self, node: Node, path: Path, guide: Any, record: bool) -> Tuple[Any, ...]:
        item = node.item or Node(ANY)
        if node.list_type == LIST_SET:
            marker = self.key_marker(item)
            if record:
                self.keys[path + (("v",),)] = marker
                self.leaves[path + (("v",),)] = tuple(marker for _j in range(self.count))
            return tuple([marker] for _j in range(self.count))
        if node.list_type != LIST_MAP or item.kind != STRUCT:
            if record:
                self.leaves[path] = self.whole(node, path, guide)
                return self.leaves[path]
            return self.whole(node, path, guide)
        step = path + (("k",),)
        key = dict((k, self.key_marker(item.props.get(k))) for k in node.keys)
        if record:
            self.keys[step] = key
            self.interior.append(step)
        values = self.struct(item, step, None, record, skip=node.keys)
        for obj in values:
            obj.update(key)
        if record:
            for k in node.keys:
                self.leaves[step + (("f", k),)] = tuple(key[k] for _j in range(self.count))
        return tuple([obj] for obj in values)


def _has_fields(guide: Any) -> bool:
    return bool(_guide_fields(guide))


def _guide_fields(guide: Any) -> List[str]:
    if not isinstance(guide, Mapping):
        return []
    return [k[2:] for k in guide if isinstance(k, str) and k.startswith("f:")]


def _guide_child(guide: Any, key: str) -> Any:
    return guide.get(key) if isinstance(guide, Mapping) else None


def objects_needed(schema: Node, guide: Optional[Mapping[str, Any]] = None) -> int:
    """How many objects make every boolean and enum leaf's vector unique (at least 2, at most 16)."""
    probe = _Maker(1)
    probe.value(schema, (), guide, True)
    return max(2, min(MAX_OBJECTS, probe.flags.bit_length() + 1))


def made_up(schema: Node, guide: Optional[Mapping[str, Any]] = None, omit: AbstractSet[Path] = frozenset(),
            styles: Optional[Mapping[Path, str]] = None) -> MadeUp:
    """The made-up contents (without apiVersion, kind, metadata) and where each marker was put. ``omit``: string
    fields of structs to leave out; ``styles``: another shape (STYLES) for some strings."""
    maker = _Maker(objects_needed(schema, guide), omit, styles)
    objects = maker.value(schema, (), guide, True)
    maker.leaves.pop((), None)
    return MadeUp([dict(o) if isinstance(o, dict) else {} for o in objects], maker.leaves, maker.keys,
                  maker.interior)


def plain_strings(made: MadeUp) -> List[Path]:
    """Struct fields holding a plain string marker: what a webhook may refuse, and what ``omit`` can leave out."""
    return sorted((p for p, v in made.leaves.items() if p and p[-1][0] == "f" and isinstance(v[0], str)
                   and v[0].startswith("crdops-") and not v[0].startswith("crdops-key-")), key=repr)


__all__ = ["ANY", "MAP", "STRUCT", "MadeUp", "Path", "Step", "made_up", "objects_needed"]

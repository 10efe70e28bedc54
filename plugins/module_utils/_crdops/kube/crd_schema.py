# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The shape of one CRD version's ``openAPIV3Schema`` as server-side apply sees it.

Server-side apply tracks ownership per field of a struct, per key of a map, per item of a list-map
(``x-kubernetes-list-type: map``, identified by ``x-kubernetes-list-map-keys``) and per value of a set
(``x-kubernetes-list-type: set``); a list without a list type, a map or struct marked
``x-kubernetes-map-type: atomic`` and a scalar are owned whole (Kubernetes docs, "Server-Side Apply:
Merge strategy"). A subtree under ``x-kubernetes-preserve-unknown-fields`` with no properties has no schema:
its maps are tracked per key, its lists whole.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

STRUCT, MAP, LIST, SCALAR, ANY = "struct", "map", "list", "scalar", "any"
ATOMIC, LIST_MAP, LIST_SET = "atomic", "map", "set"


class Node:
    """One schema node: ``kind`` is struct, map (additionalProperties), list, scalar or any (no schema)."""

    __slots__ = ("kind", "props", "item", "list_type", "keys", "scalar", "fmt", "enum", "atomic")

    def __init__(self, kind: str, props: Optional[Dict[str, Node]] = None, item: Optional[Node] = None,
                 list_type: str = ATOMIC, keys: Tuple[str, ...] = (), scalar: str = "string", fmt: str = "",
                 enum: Tuple[Any, ...] = (), atomic: bool = False) -> None:
        self.kind = kind
        self.props = props or {}
        self.item = item
        self.list_type = list_type
        self.keys = keys
        self.scalar = scalar
        self.fmt = fmt
        self.enum = enum
        self.atomic = atomic  # owned whole: an atomic list, or a struct/map with x-kubernetes-map-type atomic

    @property
    def leaf(self) -> bool:
        """Owned whole by server-side apply (no member paths below it)."""
        return self.kind == SCALAR or self.atomic


ANY_NODE = Node(ANY)


def parse_schema(schema: Optional[Mapping[str, Any]]) -> Node:
    """The node tree of an ``openAPIV3Schema`` (or any sub-schema); no schema gives an ``any`` node."""
    if not isinstance(schema, Mapping):
        return ANY_NODE
    if schema.get("x-kubernetes-int-or-string"):
        return Node(SCALAR, scalar="int-or-string")
    typ = schema.get("type")
    if typ == "array":
        list_type = str(schema.get("x-kubernetes-list-type") or ATOMIC)
        keys = tuple(str(k) for k in schema.get("x-kubernetes-list-map-keys") or ())
        return Node(LIST, item=parse_schema(schema.get("items")), list_type=list_type, keys=keys,
                    atomic=list_type == ATOMIC)
    if typ in ("string", "integer", "number", "boolean"):
        return Node(SCALAR, scalar=str(typ), fmt=str(schema.get("format") or ""),
                    enum=tuple(schema.get("enum") or ()))
    props = schema.get("properties")
    atomic = schema.get("x-kubernetes-map-type") == "atomic"
    if isinstance(props, Mapping) and props:
        return Node(STRUCT, props=dict((str(k), parse_schema(v)) for k, v in props.items()), atomic=atomic)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        return Node(MAP, item=parse_schema(extra), atomic=atomic)
    if typ == "object" and not schema.get("x-kubernetes-preserve-unknown-fields") and extra is not True:
        return Node(STRUCT, atomic=atomic)  # an object with no fields: only owned whole
    return ANY_NODE


def version_schema(crd_obj: Mapping[str, Any], version: str) -> Optional[Node]:
    """The parsed schema of ``version`` in a raw CRD; None when the CRD has no such version."""
    for v in (crd_obj.get("spec") or {}).get("versions") or ():
        if isinstance(v, Mapping) and v.get("name") == version:
            return parse_schema((v.get("schema") or {}).get("openAPIV3Schema"))
    return None


def opened(node: Node) -> Node:
    """``node`` with every atomic struct and map opened (tracked per field or key); lists stay as they are.

    kubectl's client-side apply diffs custom resources with a JSON merge patch, which goes into maps key by key
    whatever the schema says and replaces lists whole: its last-applied annotation needs the names inside an atomic
    struct, not those inside an atomic list."""
    if node.kind in (SCALAR, ANY):
        return node  # kept as the same object: ANY_NODE is told apart by identity
    return Node(node.kind, dict((k, opened(v)) for k, v in node.props.items()),
                opened(node.item) if node.item is not None else None, node.list_type, node.keys, node.scalar,
                node.fmt, node.enum, node.atomic and node.kind == LIST)


def has_atomic_maps(node: Node) -> bool:
    """Whether an atomic struct or map lies anywhere in ``node``."""
    if node.kind in (STRUCT, MAP) and node.atomic:
        return True
    return any(has_atomic_maps(n) for n in list(node.props.values()) + ([node.item] if node.item else []))

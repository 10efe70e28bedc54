# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The rule of an atomic value whose inside the conversion changes.

Server-side apply owns an atomic value (a list with no ``x-kubernetes-list-type``, a map or struct marked
atomic) as one member: ``f:solvers: {}``, never the fields inside it. The exact mapping looks for the converted
path holding the made-up value whole, so a conversion that renames a field *inside* it (cert-manager renames
``spec.acme.solvers[].dns01.clouddns`` to ``cloudDNS`` from ``v1alpha2`` to ``v1``) leaves it unmapped,
although the owner still owns the whole list at the new version. Its markers say where it went: the value maps
to the one converted path that holds, in every made-up object, each of its markers the conversion kept and no
marker of any other leaf. A marker found outside that path (the value was split), markers of a neighbour inside
it (values were merged), or two such paths: it stays unmapped, dropped from the entry and named. A marker the
conversion dropped altogether does not count against it: what was owned is still owned as one value.
Booleans, enums and nulls are no markers (the same values recur across leaves), so only values unique to one
leaf are compared.
"""

from __future__ import annotations

import json
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Set, Tuple

from .field_mapping import canon
from .marker_objects import OMITTED, Path

RawPath = Tuple[Tuple[Any, ...], ...]  # a converted object's leaf path: ("f", name), ("k", keys), ("v", json)
Flat = Mapping[RawPath, str]  # one converted object: leaf path -> its value as canonical JSON


def scalars(value: Any) -> Set[str]:
    """Every string and number inside ``value``, as JSON (booleans and nulls are left out)."""
    found: Set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None and item is not OMITTED and not isinstance(item, bool):
            found.add(canon(item))
    return found


class WholeValues:
    """The markers of every made-up leaf and of every converted leaf, object by object."""

    def __init__(self, leaves: Mapping[Path, Sequence[Any]], flat: Sequence[Flat]) -> None:
        self.old: Dict[Path, List[Set[str]]] = dict((path, [scalars(v) for v in values])
                                                    for path, values in leaves.items())
        self.distinct = self._unique_to_one_leaf()
        self.new: Dict[RawPath, List[FrozenSet[str]]] = {}
        for raw in set(p for f in flat for p in f):
            self.new[raw] = [frozenset(scalars(json.loads(f[raw])) & self.distinct) if raw in f else frozenset()
                             for f in flat]
        self.kept: List[Set[str]] = [set() for _f in flat]  # per object: the markers found anywhere converted
        for sets in self.new.values():
            for kept, markers in zip(self.kept, sets, strict=True):
                kept.update(markers)

    def _unique_to_one_leaf(self) -> Set[str]:
        owners: Dict[str, Set[Path]] = {}
        for path, sets in self.old.items():
            for markers in sets:
                for marker in markers:
                    owners.setdefault(marker, set()).add(path)
        return set(m for m, paths in owners.items() if len(paths) == 1)

    def image(self, path: Path) -> Optional[RawPath]:
        """The one converted path that holds ``path``'s kept markers and nothing else's; None when none or
        several do, or when ``path`` holds no marker the conversion kept."""
        wanted = [frozenset(m & self.distinct & kept) for m, kept in zip(self.old[path], self.kept, strict=True)]
        if not any(wanted):
            return None
        found = [raw for raw, held in self.new.items() if held == wanted]
        return found[0] if len(found) == 1 else None


def whole_value_paths(leaves: Mapping[Path, Sequence[Any]]) -> List[Path]:
    """The leaves that are whole values with something inside (atomic lists, maps and structs)."""
    return [path for path, values in leaves.items()
            if any(isinstance(v, (dict, list)) and v for v in values)]

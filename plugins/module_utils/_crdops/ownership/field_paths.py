# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Field-by-field difference of two JSON objects, as readable paths.

Notation: ``.spec.listeners[].port`` - a dot per map key, ``[]`` for "an item of this list" (items are
compared by position, but the index is left out so that counts over many objects add up per field);
keys that are not plain identifiers are quoted: ``.metadata.annotations["example.com/owner"]``.
A subtree that exists on one side only is reported down to its leaves through maps, and as one path at
a list (``.status.conditions``), so a defaulted ``status`` reads as the fields it brings.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, Set, Tuple

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")

# Set by the apiserver on every read or write, not part of what the re-store changes in the value.
IGNORED_PATHS = frozenset([
    ".apiVersion",  # the re-store changes it on purpose; reported as the storage version elsewhere
    ".metadata.resourceVersion",  # not stored in the value: etcd's mod_revision
    ".metadata.managedFields",  # server-side apply bookkeeping (its own pass rewrites stale entries)
    ".metadata.generation",
    ".metadata.creationTimestamp",
    ".metadata.selfLink",
])


def key_path(parent: str, key: str) -> str:
    if _PLAIN.match(key):
        return "%s.%s" % (parent, key)
    return "%s[%s]" % (parent, json.dumps(key))


def leaf_paths(value: Any, path: str) -> Iterable[str]:
    """The paths a subtree brings: through non-empty maps down to leaves; a list is one leaf."""
    if isinstance(value, dict) and value:
        for key in sorted(value):
            yield from leaf_paths(value[key], key_path(path, key))
    else:
        yield path


def diff_values(stored: Any, served: Any, path: str = "") -> Tuple[Set[str], Set[str], Set[str]]:
    """(added, removed, changed) paths going from ``stored`` (etcd) to ``served`` (the API's view)."""
    added: Set[str] = set()
    removed: Set[str] = set()
    changed: Set[str] = set()
    if path in IGNORED_PATHS:
        return added, removed, changed
    if isinstance(stored, dict) and isinstance(served, dict):
        for key in set(stored) | set(served):
            sub = key_path(path, key)
            if sub in IGNORED_PATHS:
                continue
            if key not in served:
                removed.update(leaf_paths(stored[key], sub))
            elif key not in stored:
                added.update(leaf_paths(served[key], sub))
            else:
                _merge((added, removed, changed), diff_values(stored[key], served[key], sub))
    elif isinstance(stored, list) and isinstance(served, list) and len(stored) == len(served):
        for old, new in zip(stored, served, strict=True):
            _merge((added, removed, changed), diff_values(old, new, path + "[]"))
    elif not _same(stored, served):
        changed.add(path or ".")
    return added, removed, changed


def _same(a: Any, b: Any) -> bool:
    # bool is an int in Python: True == 1 must still count as a change of type
    return type(a) is type(b) and a == b or (_number(a) and _number(b) and a == b)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _merge(into: Tuple[Set[str], Set[str], Set[str]], more: Tuple[Set[str], Set[str], Set[str]]) -> None:
    for target, extra in zip(into, more, strict=True):
        target.update(extra)


def count_into(counts: Dict[str, int], paths: Iterable[str]) -> None:
    for p in paths:
        counts[p] = counts.get(p, 0) + 1

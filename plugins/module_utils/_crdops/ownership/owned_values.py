# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Single values a field manager owns, and a different value for each: what the client check changes.

Re-applying unchanged values proves little: the apiserver accepts it even when ownership was lost (the values
match, so nothing conflicts). What a real client needs is to *change* a value it owns without force, and a new
manager changing the same value must conflict naming that owner. A value here is a scalar leaf (string,
number, bool) reached through struct and map fields (``f:``) and list-map items (``k:``); the key fields of a
list-map item are never changed (that would name another item), and set items (``v:``) and positional items
(``i:``) are skipped. ``metadata`` gives only labels and annotations.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .fieldsv1 import _is_leaf, _list_matches

Step = Tuple[str, Any]  # ("f", field name) or ("k", {key field: value})
Path = Tuple[Step, ...]
SUFFIX = "-crdops"
_METADATA_OWNED = ("labels", "annotations")


def _scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, str))


def _walk(value: Any, trie: Mapping[str, Any], path: Path, out: List[Path]) -> None:
    for key, sub in trie.items():
        sub = sub if isinstance(sub, dict) else {}
        if key.startswith("f:") and isinstance(value, dict) and key[2:] in value:
            if path == () and key == "f:metadata":
                sub = dict((k, v) for k, v in sub.items() if k[2:] in _METADATA_OWNED)
            step: Step = ("f", key[2:])
            if _is_leaf(sub):
                if _scalar(value[key[2:]]) and path + (step,) != (("f", "apiVersion"),) and key != "f:kind":
                    out.append(path + (step,))
            else:
                _walk(value[key[2:]], sub, path + (step,), out)
        elif key.startswith("k:") and isinstance(value, list):
            index = _list_matches(value, key)
            keys = json.loads(key[2:])
            if index is None or not isinstance(keys, dict):
                continue
            inner = dict((k, v) for k, v in sub.items() if not (k.startswith("f:") and k[2:] in keys))
            _walk(value[index], inner, path + (("k", keys),), out)


def owned_values(obj: Mapping[str, Any], fields_v1: Mapping[str, Any]) -> List[Path]:
    """Paths of the scalar values ``fields_v1`` owns in ``obj``: ``spec`` first, then the rest, metadata last."""
    out: List[Path] = []
    _walk(dict(obj), fields_v1 or {}, (), out)
    return sorted(out, key=lambda p: (0 if p[0] == ("f", "spec") else 2 if p[0] == ("f", "metadata") else 1))


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for kind, arg in path:
        if kind == "f":
            node = node[arg]
        else:
            node = next(item for item in node if all(item.get(k) == v for k, v in arg.items()))
    return node


def set_at(obj: Any, path: Path, value: Any) -> None:
    """Set the value at ``path`` in ``obj`` (an apply configuration that holds the path)."""
    parent = value_at(obj, path[:-1])
    parent[path[-1][1]] = value


def different(value: Any) -> Any:
    """Another value of the same type (a string keeps its start, so a prefix pattern still matches)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0
    text = str(value)
    return text[:-len(SUFFIX)] if text.endswith(SUFFIX) else text[:56] + SUFFIX


def trie_of(path: Path) -> Dict[str, Any]:
    """A fieldsV1 trie owning exactly ``path``."""
    trie: Dict[str, Any] = {}
    for kind, arg in reversed(path):
        key = "f:" + arg if kind == "f" else "k:" + json.dumps(arg, sort_keys=True, separators=(",", ":"))
        trie = {key: trie}
    return trie


def merge_patch_of(path: Path, value: Any) -> Optional[Dict[str, Any]]:
    """A JSON merge patch setting ``path`` to ``value``; None through a list (a merge patch replaces lists)."""
    if any(kind != "f" for kind, _arg in path):
        return None
    patch: Any = value
    for _kind, name in reversed(path):
        patch = {name: patch}
    return dict(patch)


def describe(path: Path) -> str:
    """``.spec.ports[port=80].name``, as the apiserver names paths in conflicts."""
    out = ""
    for kind, arg in path:
        out += "." + arg if kind == "f" else "[%s]" % ",".join("%s=%s" % (k, json.dumps(v)) for k, v in sorted(arg.items()))
    return out

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The fields one field manager owns, cut out of an object (its "apply configuration").

A ``managedFields`` entry's ``fieldsV1`` is a trie in JSON (format defined by sigs.k8s.io/structured-merge-diff,
summarised in the Kubernetes API reference "FieldsV1"): each key is ``.`` (the field itself), ``f:<name>``
(a field of a struct or a key of a map), ``k:<json>`` (the list-map item whose key fields have these values),
``v:<json>`` (the set item with this value) or ``i:<n>`` (the list item at this position). A key mapping to
an empty trie is a member of the set: the whole value at that path is owned.

Extracting exactly those paths from the live object gives what that manager last applied, as client-go's
``ExtractInto`` does for typed objects; applying it again as that manager is the "same manifest" apply of
Argo CD, Flux or ``kubectl apply --server-side``. Without the CRD schema a member that is a map is taken
whole; for a dry-run apply of unchanged values that can only add shared ownership, never a conflict.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple


def _is_leaf(trie: Any) -> bool:
    """A member with no owned children: ``{}`` (or only ``.``)."""
    return not isinstance(trie, dict) or not [k for k in trie if k != "."]


def _child(value: Any, trie: Mapping[str, Any]) -> Any:
    if _is_leaf(trie) or not isinstance(value, (dict, list)):
        return copy.deepcopy(value)
    return extract_owned(value, trie)


def _parse_json(text: str) -> Tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


def _list_matches(items: List[Any], key: str) -> Optional[int]:
    """Index of the list item a ``k:``, ``v:`` or ``i:`` trie key names, or None when it is not there."""
    kind, text = key[:2], key[2:]
    if kind == "i:":
        try:
            index = int(text)
        except ValueError:
            return None
        return index if 0 <= index < len(items) else None
    ok, wanted = _parse_json(text)
    if not ok:
        return None
    for index, item in enumerate(items):
        if kind == "v:" and item == wanted:
            return index
        if kind == "k:" and isinstance(item, dict) and isinstance(wanted, dict) and all(
                item.get(k) == v for k, v in wanted.items()):
            return index
    return None


def _extract_list(items: List[Any], trie: Mapping[str, Any]) -> List[Any]:
    picked: Dict[int, Any] = {}
    for key, sub in trie.items():
        if key == "." or key[:2] not in ("k:", "v:", "i:"):
            continue
        index = _list_matches(items, key)
        if index is None:
            continue  # the item is gone from the object: nothing to apply for it
        item = _child(items[index], sub)
        if key.startswith("k:") and isinstance(item, dict):
            # a list-map item is identified by its key fields: always send them
            item.update(json.loads(key[2:]))
        picked[index] = item
    return [picked[i] for i in sorted(picked)]  # keep the object's order


def extract_owned(value: Any, trie: Mapping[str, Any]) -> Any:
    """The part of ``value`` (a dict or list) whose paths are in ``trie``; paths the object lacks are skipped."""
    if isinstance(value, list):
        return _extract_list(value, trie)
    if not isinstance(value, dict):
        return copy.deepcopy(value)
    out: Dict[str, Any] = {}
    for key, sub in trie.items():
        if not key.startswith("f:"):
            continue
        name = key[2:]
        if name in value:
            out[name] = _child(value[name], sub if isinstance(sub, dict) else {})
    return out


def apply_configuration(obj: Mapping[str, Any], fields_v1: Mapping[str, Any], api_version: str,
                        kind: str) -> Dict[str, Any]:
    """What the owner of ``fields_v1`` would apply to ``obj``: its owned fields plus the identity.

    ``managedFields``, ``resourceVersion`` and the like never appear in a trie, so they are never sent.
    """
    config: Dict[str, Any] = extract_owned(dict(obj), fields_v1 or {})
    meta = dict(config.get("metadata") or {})
    src = obj.get("metadata") or {}
    meta["name"] = src.get("name")
    if src.get("namespace"):
        meta["namespace"] = src["namespace"]
    config["metadata"] = meta
    config["apiVersion"] = api_version
    config["kind"] = kind
    return config

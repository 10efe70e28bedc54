# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""managedFields entries recorded at a version other than the storage version, and the JSON patch that fixes them.

An object server-side applied at an old version keeps ``managedFields`` entries with ``apiVersion: <group>/<old>``.
Once the old version is removed from the CRD, every server-side apply to the object fails with HTTP 500
"request to convert CR to an invalid group/version" (kubernetes/kubernetes#111937), because apply converts the
object to each entry's version. The re-store pass fixes that in its one write per object: a JSON patch, guarded by
a ``test`` of the listed resourceVersion, that

- rewrites each stale entry's ``apiVersion`` to the storage version when the versions share field paths
  (conversion strategy ``None``), which keeps ownership (conflicts still name the original manager); or
- removes the entry otherwise (a webhook may rename fields, so the recorded field set may not apply).

Removing every entry must be sent as ``managedFields: [{}]``: the apiserver ignores an empty list but strips
managedFields when given a single empty entry (kubernetes.io docs, "Server-Side Apply: Clearing managedFields").

The module does not know the next release, so every version of the CRD's group other than the storage version
counts as stale. Only indices and small identifiers are kept per object, and only for objects that have stale
entries, so memory stays bounded by the page size.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Tuple

JSON_PATCH = "application/json-patch+json"


class StaleFields(NamedTuple):
    """The stale entries of one object's ``metadata.managedFields`` as listed."""

    indices: Tuple[int, ...]  # positions of the stale entries, ascending
    total: int  # number of entries the object has
    collide: FrozenSet[int] = frozenset()  # stale entries whose rewrite would duplicate another entry's identity


class PatchPlan(NamedTuple):
    ops: List[Dict[str, Any]]
    rewritten: int  # entries whose apiVersion is set to the storage version
    dropped: int  # entries removed


def _split(api_version: str) -> Tuple[str, str]:
    group, _sep, version = api_version.rpartition("/")
    return group, version


def _identity(entry: Dict[str, Any], api_version: str) -> Tuple[Any, ...]:
    """How the apiserver keys managers (BuildManagerIdentifier): an Update entry includes its apiVersion,
    an Apply entry does not. Two entries with one identity would be merged by the apiserver, one set lost."""
    operation = entry.get("operation")
    return (entry.get("manager"), operation, entry.get("subresource") or "",
            api_version if operation == "Update" else "")


def stale_entries(managed_fields: Any, group: str, storage_version: Optional[str]) -> Optional[StaleFields]:
    """Entries whose apiVersion is ``<group>/<v>`` with ``v`` != the storage version; None when there are none."""
    entries = list(managed_fields or ()) if isinstance(managed_fields, list) else []
    if not storage_version or not entries:
        return None
    target = "%s/%s" % (group, storage_version)
    stale: List[int] = []
    for i, entry in enumerate(entries):
        grp, ver = _split(str(entry.get("apiVersion") or "")) if isinstance(entry, dict) else ("", "")
        if grp == group and ver and ver != storage_version:
            stale.append(i)
    if not stale:
        return None
    # identities that exist after the rewrite: the entries that stay, then each rewritten one in turn
    taken = set(_identity(e, str(e.get("apiVersion") or "")) for i, e in enumerate(entries)
                if i not in stale and isinstance(e, dict))
    collide = set()
    for i in stale:
        ident = _identity(entries[i], target)
        if ident in taken:
            collide.add(i)
        taken.add(ident)
    return StaleFields(tuple(stale), len(entries), frozenset(collide))


def plan_patch(resource_version: str, stale: StaleFields, group: str, storage_version: str,
               keep_ownership: bool) -> PatchPlan:
    """The JSON patch for one object: resourceVersion test, then rewrites, then removals (descending)."""
    ops: List[Dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
    if keep_ownership:
        rewrite = [i for i in stale.indices if i not in stale.collide]
        drop = sorted(stale.collide)
    else:
        rewrite, drop = [], list(stale.indices)
    if drop and len(drop) == stale.total:
        # an empty list would be ignored; a single empty entry strips managedFields
        ops.append({"op": "replace", "path": "/metadata/managedFields", "value": [{}]})
        return PatchPlan(ops, 0, len(drop))
    target = "%s/%s" % (group, storage_version)
    for i in rewrite:  # replacements first, at the listed indices, before any removal shifts them
        ops.append({"op": "replace", "path": "/metadata/managedFields/%d/apiVersion" % i, "value": target})
    for i in sorted(drop, reverse=True):
        ops.append({"op": "remove", "path": "/metadata/managedFields/%d" % i})
    return PatchPlan(ops, len(rewrite), len(drop))


def keeps_ownership(conversion_strategy: str) -> bool:
    """Field paths are identical across versions only without a converting webhook."""
    return conversion_strategy == "None"

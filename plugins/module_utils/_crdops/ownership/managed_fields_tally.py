# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What one pass did to the managedFields entries at other versions, per manager, for the module result.

Entries changed are counted when their write succeeded (in check mode, when planned); entries left as they are
(untouched, kept unmappable) when their object is listed. An entry kept because nothing of it maps blocks the
removal of its version: ``unmappable_entries`` names the manager, the version and a few objects, and
``versions_not_removable`` lists those versions (the role refuses to apply a release that removes one). So does an
entry kept because, translated, it would own a path its object lacks (``entries_not_in_object``): left at its
version, it breaks server-side apply on that object once the version is removed, like an unmappable one.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .last_applied import LastAppliedFix

from .managed_fields import DROPPED, KEPT_NOT_IN_OBJECT, KEPT_UNMAPPABLE, REWRITTEN, TRANSLATED, UNTOUCHED, EntryFix

MAX_EXAMPLES = 5  # objects named per unmappable manager
MAX_PATHS = 20  # dropped paths named per manager
ACTIONS = (TRANSLATED, REWRITTEN, DROPPED, KEPT_UNMAPPABLE, KEPT_NOT_IN_OBJECT, UNTOUCHED)

ManagerKey = Tuple[str, str, str, str]  # manager, operation, subresource, version


class ManagedFieldsTally:
    """Thread-safe: workers add what their writes did while the listing adds what stays."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.managers: Dict[ManagerKey, Dict[str, Any]] = {}
        self.unmappable: Dict[ManagerKey, Dict[str, Any]] = {}
        self.not_in_object: Dict[ManagerKey, Dict[str, Any]] = {}
        self.last_applied: Dict[Tuple[str, str, str], Dict[str, Any]] = {}  # (owner, version, note) -> row

    def add(self, fixes: Iterable[EntryFix], obj: str) -> None:
        with self.lock:
            for fix in fixes:
                key = (fix.manager, fix.operation, fix.subresource, fix.version)
                row = self.managers.get(key)
                if row is None:
                    row = dict(manager=fix.manager, operation=fix.operation, subresource=fix.subresource or None,
                               from_version=fix.version, objects=0, paths_dropped=[],
                               **dict((a, 0) for a in ACTIONS))
                    self.managers[key] = row
                row[fix.action] += 1
                row["objects"] += 1
                if fix.action in (TRANSLATED, DROPPED):
                    for path in fix.dropped_paths:
                        if path not in row["paths_dropped"] and len(row["paths_dropped"]) < MAX_PATHS:
                            row["paths_dropped"].append(path)
                if fix.action == KEPT_UNMAPPABLE:
                    self.note_unmappable(key, fix, obj)
                if fix.action == KEPT_NOT_IN_OBJECT:
                    self.note_not_in_object(key, fix, obj)

    def add_last_applied(self, fix: Optional[LastAppliedFix], obj: str) -> None:
        """kubectl's last-applied annotation of one object: rewritten (its write succeeded) or left as it is."""
        if fix is None:
            return
        with self.lock:
            key = (fix.owner, fix.version, fix.note)
            row = self.last_applied.setdefault(key, dict(
                manager=fix.owner or None, from_version=fix.version, translated=0, kept=0, paths_dropped=[],
                why_kept=fix.note or None, examples=[]))
            row["translated" if fix.text is not None else "kept"] += 1
            for path in fix.dropped_paths:
                if path not in row["paths_dropped"] and len(row["paths_dropped"]) < MAX_PATHS:
                    row["paths_dropped"].append(path)
            if fix.text is None and len(row["examples"]) < MAX_EXAMPLES:
                row["examples"].append(obj)

    def note_unmappable(self, key: ManagerKey, fix: EntryFix, obj: str) -> None:
        row = self.unmappable.setdefault(key, dict(
            version=fix.version, manager=fix.manager, operation=fix.operation, subresource=fix.subresource or None,
            objects=0, examples=[], why=fix.note))
        row["objects"] += 1
        if len(row["examples"]) < MAX_EXAMPLES:
            row["examples"].append(obj)

    def note_not_in_object(self, key: ManagerKey, fix: EntryFix, obj: str) -> None:
        row = self.not_in_object.setdefault(key, dict(
            version=fix.version, manager=fix.manager, operation=fix.operation, subresource=fix.subresource or None,
            objects=0, examples=[], paths_missing=[]))
        row["objects"] += 1
        if len(row["examples"]) < MAX_EXAMPLES:
            row["examples"].append(obj)
        for path in fix.missing_paths:
            if path not in row["paths_missing"] and len(row["paths_missing"]) < MAX_PATHS:
                row["paths_missing"].append(path)

    def count(self, action: str) -> int:
        with self.lock:
            return sum(int(row[action]) for row in self.managers.values())

    def to_result(self) -> Dict[str, Any]:
        """The result fields (see the module's RETURN: managed_fields_*, unmappable_entries, ...)."""
        with self.lock:
            managers = [dict(row, paths_dropped=sorted(row["paths_dropped"]))
                        for _key, row in sorted(self.managers.items())]
            unmappable = [dict(row) for _key, row in sorted(self.unmappable.items())]
            not_in_object = [dict(row, paths_missing=sorted(row["paths_missing"]))
                             for _key, row in sorted(self.not_in_object.items())]
            last_applied = [dict(row, paths_dropped=sorted(row["paths_dropped"]))
                            for _key, row in sorted(self.last_applied.items())]
        reduced = [m for m in managers if m["paths_dropped"] or m[DROPPED]]
        return {
            "managed_fields_translated": sum(m[TRANSLATED] for m in managers),
            "managed_fields_untouched": sum(m[UNTOUCHED] for m in managers),
            "managed_fields_unmappable": sum(m[KEPT_UNMAPPABLE] for m in managers),
            "managed_fields_managers": managers,
            "managed_fields_ownership_reduced": [
                {"manager": m["manager"], "operation": m["operation"], "from_version": m["from_version"],
                 "paths_dropped": m["paths_dropped"], "entries_dropped": m[DROPPED]} for m in reduced],
            "unmappable_entries": unmappable,
            "managed_fields_not_in_object": sum(m[KEPT_NOT_IN_OBJECT] for m in managers),
            "entries_not_in_object": not_in_object,
            "versions_not_removable": sorted(set(u["version"] for u in unmappable + not_in_object)),
            "last_applied_translated": sum(row["translated"] for row in last_applied),
            "last_applied": last_applied,
        }


def empty_result() -> Dict[str, Any]:
    return ManagedFieldsTally().to_result()


def ownership_warnings(crd: str, fields: Dict[str, Any]) -> List[str]:
    """One warning per CRD whose pass reduced someone's ownership or kept entries it could not translate."""
    out = []
    reduced = fields.get("managed_fields_ownership_reduced") or []
    if reduced:
        out.append("CRD %s: managedFields ownership reduced for %s" % (crd, "; ".join(
            "%s (%s at %s): %s" % (r["manager"], r["operation"], r["from_version"], ", ".join(
                r["paths_dropped"]) or "%d duplicate entries dropped" % r["entries_dropped"]) for r in reduced)))
    for row in fields.get("last_applied") or []:
        if row["kept"]:
            out.append("CRD %s: %d objects keep kubectl's last-applied annotation at %s (%s): client-side apply at the "
                       "new version will not prune a renamed field they drop (e.g. %s)" % (
                           crd, row["kept"], row["from_version"], row["why_kept"], ", ".join(row["examples"])))
        if row["translated"] and row["paths_dropped"]:
            out.append("CRD %s: kubectl's last-applied annotation of %d objects (%s) leaves out %s: the conversion is "
                       "not shown to map them, so client-side apply will not prune them" % (
                           crd, row["translated"], row["manager"], ", ".join(row["paths_dropped"])))
    for u in fields.get("unmappable_entries") or []:
        out.append("CRD %s: %d objects keep %s's %s entry at %s: none of its fields maps to the storage version "
                   "(%s); removing %s would break server-side apply for them (e.g. %s)" % (
                       crd, u["objects"], u["manager"], u["operation"], u["version"], u["why"], u["version"],
                       ", ".join(u["examples"])))
    for n in fields.get("entries_not_in_object") or []:
        out.append("CRD %s: %d objects keep %s's %s entry at %s: translated, it would own %s, which they do not have "
                   "(their conversion differs from the objects the mapping was checked on); removing %s would break "
                   "server-side apply for them (e.g. %s)" % (
                       crd, n["objects"], n["manager"], n["operation"], n["version"], ", ".join(n["paths_missing"]),
                       n["version"], ", ".join(n["examples"])))
    return out

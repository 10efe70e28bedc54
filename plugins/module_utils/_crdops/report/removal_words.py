# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What following a release removes from a live CRD, as the plan and the fleet report say it.

The role records each ``crd_release_follow`` result per CRD with the two releases it compared (``declared_by``:
the release before, ``not_declared_by``: the release applied). A check-mode run records what the step would
remove (the plan); a real run what it removed (the report's details). Both say it the same way, per field:
``spec.conversion (declared by release N, not by release N+1; owned by kubectl-create (Update))``.

Pure data shaping; no I/O.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

_KEYS = ("path", "declared_by", "not_declared_by", "owners", "injected")


def removal(path_or_entry: Any, declared_by: Any = None, not_declared_by: Any = None) -> Dict[str, Any]:
    """One removed field with the releases that tell why: from a ``crd_release_follow`` ``removed`` entry, or
    from a bare path (the report of an older release kept only the path)."""
    entry: Mapping[str, Any] = path_or_entry if isinstance(path_or_entry, Mapping) else {"path": path_or_entry}
    out = dict((k, entry.get(k)) for k in _KEYS)
    out["declared_by"] = out["declared_by"] or declared_by
    out["not_declared_by"] = out["not_declared_by"] or not_declared_by
    out["owners"] = list(out["owners"] or [])
    out["injected"] = list(out["injected"] or [])
    out["path"] = str(out["path"] or "")
    return out


def removals_by_crd(records: Sequence[Mapping[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    """CRD name to its removed fields, in the order the follow steps ran (after release N, then N+1).

    ``records`` are ``crd_release_follow`` ``crds`` entries, each tagged by the role with ``declared_by`` and
    ``not_declared_by``; a record without ``removed`` entries adds nothing.
    """
    out: Dict[str, List[Dict[str, Any]]] = {}
    for record in records or ():
        name = record.get("name")
        if not name or not record.get("removed"):
            continue
        out.setdefault(str(name), []).extend(
            removal(r, record.get("declared_by"), record.get("not_declared_by")) for r in record["removed"])
    return out


def removal_words(entry: Mapping[str, Any]) -> str:
    """``spec.conversion (declared by release N, not by release N+1; owned by a (Update); with <injected>)``:
    the field, why it goes, who owned it, and the fields other tools wrote inside it that go with it."""
    why = []
    if entry.get("declared_by") or entry.get("not_declared_by"):
        before = entry.get("declared_by") or "the release before"
        applied = entry.get("not_declared_by") or "the release applied"
        why.append("declared by %s, not by %s" % (before, applied))
    if entry.get("owners"):
        why.append("owned by %s" % ", ".join(str(o) for o in entry["owners"]))
    if entry.get("injected"):
        why.append("with %s, which no release declared" % ", ".join(str(i) for i in entry["injected"]))
    return "%s (%s)" % (entry.get("path"), "; ".join(why)) if why else str(entry.get("path"))


def plan_step(entries: Sequence[Mapping[str, Any]]) -> str:
    """The plan's step for one CRD: ``would remove <field> (...); would remove <field> (...)``."""
    return "; ".join("would remove %s" % removal_words(e) for e in entries)

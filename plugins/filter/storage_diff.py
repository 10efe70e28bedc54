# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters that turn crd_storage_info's ``storage_diff`` results into the role's plan lines and its gate.

``crds | crdops.migration.storage_diff_pruning`` -> CRDs whose re-store would delete stored fields
``crds | crdops.migration.storage_diff_lines`` -> one readable line per CRD (what it adds/removes/changes)
``pruning | crdops.migration.storage_diff_pruning_message(cluster)`` -> the gate's failure message
"""

from __future__ import annotations

from typing import Any, Dict, List


def _paths(counts: Dict[str, int], sampled: int) -> str:
    return ", ".join("%s (%d of %d)" % (p, n, sampled) for p, n in sorted(counts.items()))


def storage_diff_pruning(crds: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """CRDs whose sample has fields the re-store would delete for good."""
    out = []
    for crd in crds or []:
        diff = crd.get("storage_diff") or {}
        # objects the diff could not compare (stored at a version not served, webhook not reachable) are a
        # loss that cannot be ruled out: they stop the run like pruning does, never silently
        if diff.get("checked") and (diff.get("removed") or diff.get("unverified")):
            removed = dict(diff.get("removed") or {})
            out.append({"name": crd.get("name"), "removed": removed,
                        "compared": diff.get("compared", 0), "keys": diff.get("key_count", diff.get("keys", 0)),
                        "examples": {p: (diff.get("examples") or {}).get(p, []) for p in removed},
                        "unverified": diff.get("unverified"),
                        "not_compared": (diff.get("skipped") or {}).get("webhook_version_not_served", 0)})
        forecast = crd.get("storage_forecast") or {}
        if forecast.get("checked") and forecast.get("removed"):  # after release N: known before it is applied
            removed = dict(forecast["removed"])
            name = "%s (after release N, storage version %s)" % (crd.get("name"), forecast.get("storage_version"))
            out.append({"name": name,
                        "removed": removed, "compared": forecast.get("compared", 0), "keys": forecast.get("sampled", 0),
                        "examples": {p: (forecast.get("examples") or {}).get(p, []) for p in removed},
                        "unverified": None, "not_compared": 0})
    return out


def storage_diff_lines(crds: List[Dict[str, Any]]) -> List[str]:
    lines = []
    for crd in crds or []:
        diff = crd.get("storage_diff") or {}
        if not diff.get("checked"):
            lines.append("%s: stored values not checked (%s)" % (crd.get("name"), diff.get("reason") or "no result"))
            continue
        head = "%s: %d of %d stored objects compared at %s, %d would change beyond apiVersion" % (
            crd.get("name"), diff.get("compared", 0), diff.get("key_count", diff.get("keys", 0)), diff.get("storage_version"),
            diff.get("would_change", 0))
        if diff.get("view") == "get":
            head += " (read with GET, no patch permission: defaults of the storage version may be missing)"
        parts = [head]
        for what, verb in (("added", "adds (defaults persisted)"), ("removed", "removes for good"),
                           ("normalised", "normalised by the conversion (a zero value left out, the same value "
                                          "when read)"),
                           ("changed", "changes")):
            if diff.get(what):
                parts.append("%s %s" % (verb, _paths(diff[what], diff.get("compared", 0))))
        if diff.get("compared_by_conversion_review"):
            parts.append("%d stored at a version not served compared through the conversion webhook"
                         % diff["compared_by_conversion_review"])
        if diff.get("skipped"):
            parts.append("skipped %s" % ", ".join("%s: %d" % kv for kv in sorted(diff["skipped"].items())))
        if diff.get("unverified"):
            parts.append("NOT COMPARED: %s" % diff["unverified"])
        lines.append("; ".join(parts))
        if crd.get("storage_forecast"):
            lines.append(_forecast_line(crd.get("name"), crd["storage_forecast"]))
    return lines


def _forecast_line(name: Any, forecast: Dict[str, Any]) -> str:
    head = "%s after release N (storage version %s): " % (name, forecast.get("storage_version"))
    if not forecast.get("checked"):
        return head + "not forecast (%s)" % forecast.get("reason")
    parts = ["%d of %d sampled stored values taken through release N's conversion and schema"
             % (forecast.get("compared", 0), forecast.get("sampled", 0))]
    if forecast.get("removed"):
        parts.append("removes for good %s" % _paths(forecast["removed"], forecast.get("compared", 0)))
    if forecast.get("normalised"):
        parts.append("normalised by the conversion %s" % _paths(forecast["normalised"], forecast.get("compared", 0)))
    if not forecast.get("removed") and not forecast.get("normalised"):
        parts.append("nothing lost")
    if forecast.get("unverified"):
        parts.append("not forecast for the rest: %s (checked again after the flip)" % forecast["unverified"])
    return head + "; ".join(parts)


def storage_diff_pruning_message(pruning: List[Dict[str, Any]], cluster: str, when: str = "before any change") -> str:
    """The gate's refusal; ``when`` says whether this run's storage flip (release N) was already applied."""
    items = []
    for c in pruning or []:
        example = next((e for p in sorted(c["examples"]) for e in c["examples"][p]), None)
        if c["removed"]:
            items.append("%s: %s%s" % (c["name"], _paths(c["removed"], c["compared"]),
                                       " (e.g. %s)" % example if example else ""))
        if c.get("unverified"):
            items.append("%s: %d sampled objects could not be compared, so a loss cannot be ruled out (%s)"
                         % (c["name"], c.get("not_compared") or 0, c["unverified"]))
    return ("cluster %s: the re-store would delete stored fields that the storage version's schema no longer "
            "has, and a rollback could not bring them back: %s. %s Set crd_upgrade_accept_pruning: true to accept "
            "the loss." % (cluster, "; ".join(items), _written(when)))


def _written(when: str) -> str:
    if when == "after the storage flip":
        # the new schema is live only after the flip, so this check can come after it: say so, it is a write
        return ("Release N was applied (the storage flip: new objects are stored at the new version); no stored "
                "object was re-stored.")
    return "Nothing was written."


class FilterModule:
    """Registers nothing: these are steps of the crd_upgrade role, reached through its one filter
    crdops.migration.crd_upgrade_step (role_step.py), so that they are not an API of their own."""

    def filters(self):
        return {}

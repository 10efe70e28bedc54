# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What a run will do to one CRD, said before it does it: the plan an on-call engineer approves.

From the CRD as discovered (crd_storage_info), the storage version release N sets, the role's switches and
the preflight's dry-run sample: the storage flip, the objects to re-store, ``status.storedVersions`` after the
trim, the versions release N+1 removes and which of them are blocked (and why), the fields following the releases would
remove from the live CRD (check mode), and an estimated duration
(the pace of the last pass recorded on the CRD, else the dry-run sample's latency per write).
"""

from __future__ import annotations

import calendar
import time
from typing import Any, Dict, List, Optional, Tuple

from .removal_words import plan_step

NOTHING = "nothing to do"
IN_EFFECT = "release N already in effect, not re-applied"


def _epoch(text: Any) -> Optional[float]:
    try:
        return float(calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def recorded_pace(record: Dict[str, Any]) -> Optional[Tuple[float, str]]:
    """(objects per second, when) of the last pass recorded on the CRD, valid or stale: the pace of this cluster."""
    listed = int(record.get("listed") or 0)
    started, completed = _epoch(record.get("startedAt")), _epoch(record.get("completedAt"))
    if listed <= 0 or started is None or completed is None or completed < started:
        return None
    # the record keeps whole seconds: a pass shorter than one second counts as one
    return listed / max(completed - started, 1.0), str(record.get("completedAt"))


def estimate(to_restore: int, record: Dict[str, Any], sample_ms: Optional[float],
             workers: int) -> Tuple[Optional[float], str]:
    """(seconds, basis) for re-storing ``to_restore`` objects; (None, why) when nothing says how fast."""
    if to_restore <= 0:
        return 0.0, "no object to re-store"
    pace = recorded_pace(record)
    if pace is not None:
        return round(to_restore / pace[0], 1), "last recorded pace %.1f objects/s (pass completed %s)" % pace
    if sample_ms:
        rate = max(workers, 1) * 1000.0 / sample_ms
        return round(to_restore / rate, 1), "dry-run sample %.1f ms per write, %d writes in flight" % (
            sample_ms, max(workers, 1))
    return None, "unknown: no pace recorded on the CRD and no dry-run sample"


def _unique(items: List[str]) -> List[str]:
    out: List[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _blocked(entry: Dict[str, Any], clears: bool) -> List[Dict[str, str]]:
    """Versions release N+1 removes that cannot go yet and that this run will not clear, each with why. A version
    still in storedVersions that the run's re-store and trim clear is the normal path, not a blocker: the steps
    already say it (``storedVersions v1,v2 -> v2``)."""
    out = []
    if entry.get("target_removes_storage"):
        out.append({"version": str(entry.get("storage_after_flip")),
                    "why": "it is the storage version after release N: apply the release that flips storage first"})
    if not clears:
        out.extend({"version": version, "why": "still in status.storedVersions and crd_upgrade_migrate or "
                    "crd_upgrade_trim is off: the run refuses release N+1"}
                   for version in entry.get("blocked_removals") or [])
    return out


def _steps(plan: Dict[str, Any], new: bool) -> List[str]:
    steps = []
    if new:
        steps.append("create" + (" at %s" % plan["storage_target"] if plan["storage_target"] else ""))
    elif plan["flip"]:
        steps.append("storage %s -> %s" % (plan["storage_now"], plan["storage_target"]))
    if plan["to_restore"]:
        steps.append("re-store %d objects" % plan["to_restore"])
    if not new and plan["stored_after"] != plan["stored_now"]:
        steps.append("storedVersions %s -> %s" % (",".join(plan["stored_now"]), ",".join(plan["stored_after"])))
    if plan["removes"]:
        steps.append("release N+1 removes %s" % ",".join(plan["removes"]))
    if plan["removes_fields"]:
        steps.append(plan_step(plan["removes_fields"]))
    return steps


def pace_words(switches: Dict[str, Any]) -> str:
    """The pace the re-store will keep, as the plan says it: which budget it holds for other clients, and under
    which API Priority and Fairness FlowSchema its requests fall (``apf``: flow_control.py's words)."""
    apf = "; %s" % switches["apf"] if switches.get("apf") else ""
    if switches.get("pace", "gentle") != "gentle":
        return "pace max: %d writes in flight, other clients' latency not held%s" % (
            int(switches.get("workers") or 1), apf)
    budget = float(switches.get("latency_budget", 2.0) or 0)
    if not budget:
        return "pace gentle by the writes' own latency (latency budget off)%s" % apf
    return "pace gentle: other clients' GET p90 and p99 held within x%.1f of idle%s" % (budget, apf)


def plan_of(entry: Dict[str, Any], record: Dict[str, Any], switches: Dict[str, Any],
            sample: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The plan of one CRD from its crd_upgrade_plan entry, its migration record (crd_storage_info) and sample."""
    migrate, trim = bool(switches.get("migrate", True)), bool(switches.get("trim", True))
    now, target = entry.get("storage_version"), entry.get("storage_after_flip") or entry.get("storage_version")
    stored_now = list(entry.get("stored_versions") or [])
    needs = bool(entry.get("needs_migration"))
    to_restore = int(entry.get("object_count") or 0) if needs and migrate else 0
    if entry.get("new"):
        stored_after = [target] if target else []
    elif needs and migrate and trim:
        stored_after = [target]
    else:
        stored_after = _unique(stored_now + [target]) if target else stored_now
    seconds, basis = estimate(to_restore, record, (sample or {}).get("dry_run_latency_ms"),
                              int(switches.get("workers") or 1))
    plan: Dict[str, Any] = {
        "storage_now": now, "storage_target": target, "flip": bool(now and target and now != target),
        "objects": entry.get("object_count"), "to_restore": to_restore,
        "stored_now": stored_now, "stored_after": stored_after,
        "removes": list(entry.get("removed_versions") or []) if entry.get("target_found") else [],
        "blocked": _blocked(entry, needs and migrate and trim),
        "estimate_s": seconds, "estimate_basis": basis,
        # what following the releases would remove from the live CRD (check mode reads it: removal_words.py)
        "removes_fields": list(entry.get("follow_removals") or []),
        "release_in_effect": bool(entry.get("release_in_effect")),
        "pace": pace_words(switches) if to_restore else None}
    plan["steps"] = _steps(plan, bool(entry.get("new")))
    plan["action"] = "; ".join(plan["steps"]) or NOTHING
    # not a step (nothing changes): said so the plan shows why no storage flip is sent and no drain is waited
    plan["notes"] = [IN_EFFECT] if plan["release_in_effect"] else []
    return plan

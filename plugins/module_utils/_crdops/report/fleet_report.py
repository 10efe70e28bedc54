# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The fleet report as data, read at 100 clusters: counts first, then failures (phase, cause, next step), then
one line per cluster, then the details. The JSON is this data; the Markdown and HTML templates print it.

Pure data shaping over the per-cluster ``crd_upgrade_result`` facts; no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .removal_words import removal, removal_words
from ..restore.latency_probe import describe as probe_words
from .approval_plan import NOTHING
from .holders_table import holders_table

TROUBLESHOOTING = "docs/troubleshooting.md"

# (pattern in the error, the next step, the section of docs/troubleshooting.md that explains it); first match wins
_STEPS: Tuple[Tuple[str, str, str], ...] = (
    (r"missing permissions", "grant the verbs named (docs/rbac/clusterrole.yaml has them all), then rerun",
     "Role `crd_upgrade` (by task file)"),
    (r"HA barrier|apiserver\(s\) alive|lagging", "name every apiserver in crd_upgrade_apiserver_endpoints (managed "
     "clusters: crd_upgrade_barrier_fallback: settle), then rerun; nothing was written", "HA barrier"),
    (r"conversion webhook", "fix the conversion webhook (Service, endpoints, certificate), then rerun: the pass "
     "resumes from its checkpoint", "Conversion webhook failures"),
    (r"admission|denied the request|ValidatingAdmissionPolicy", "let the no-op UPDATE of the field manager "
     "crdops-migration through the webhook or policy named, then rerun", "Check-mode preflight (`predicted_rejections`)"),
    (r"\b[Ll]ease\b", "another run holds the pass Lease: let it finish (or wait until it expires), then rerun",
     "One pass per CRD at a time (the pass Lease)"),
    (r"stopped by signal|time_limit|supervising process|stopped:", "rerun: finished CRDs are skipped by their record, "
     "objects by the checkpoint", "Role `crd_upgrade` (by task file)"),
    (r"removes the version objects are stored at", "apply the release that flips the storage version first "
     "(crd_upgrade_release_manifests)", "Role `crd_upgrade` (by task file)"),
    (r"would remove versions still in status.storedVersions", "set crd_upgrade_migrate and crd_upgrade_trim to true, or "
     "upgrade through the intermediate release", "Role `crd_upgrade` (by task file)"),
    (r"refused by the apiserver \(dry-run\)", "read the API message: most often a trim is missing; nothing of release "
     "N+1 was applied", "Role `crd_upgrade` (by task file)"),
    (r"not in effect", "stop whatever re-applies the old CRD (Helm, an operator), then rerun",
     "Role `crd_upgrade` (by task file)"),
    (r"no valid migration record|etcd still holds|not fully migrated|incomplete",
     "fix the object named in the CRD's first failure, then rerun: the re-store resumes and writes a record",
     "Re-store (`crd_storage_migrate`)"),
    (r"for good|pruning", "review the stored fields named; set crd_upgrade_accept_pruning: true to accept deleting "
     "them", "Role `crd_upgrade` (by task file)"),
    (r"server-side apply|client check", "the clients named cannot apply: fix their managedFields (entry point repair) "
     "before they write again", "Client check (`crd_client_check`)"),
    (r"cannot load kubeconfig", "fix this host's kubeconfig or context (the cluster's details name the file), "
     "then rerun", "Connection and authentication"),
    (r"cluster unreachable, no answer|^apiserver \S+ unreachable", "check the server URL of this host's context and "
     "the network path to it, then rerun", "Connection and authentication"),
    (r"kubeconfig|not authenticated|certificate|connect|timed out|Name or service not known",
     "check this host's kubeconfig and context, and that its apiserver answers", "Connection and authentication"),
    (r"no CRDs selected|manifest|glob|CustomResourceDefinition in", "fix crd_upgrade_release_manifests / "
     "crd_upgrade_target_manifests or crd_upgrade_crd_names", "CRD manifests"),
)
_PREFIX = re.compile(r"^(cluster \S+: (phase \S+ failed: )?)+")
# a module names the cluster by its context or kubeconfig file ("[cluster <label>, CRD <crd>] "); the report names
# it by host: only the cluster goes, a CRD or object named stays
_LABEL = re.compile(r"^\[cluster [^\],]*(\] |, )")
_KUBECONFIG_FILE = re.compile(r"^cannot load kubeconfig \S+: ")
_UNREACHABLE = re.compile(r"^[A-Z]+ \S+: cluster unreachable, no answer within (connect_timeout \S+)")
_ENDPOINT = re.compile(r"host='([^']+)', port=(\d+)|Failed to resolve '([^']+)'")
_NO_ANSWER = ("Connection refused", "No route to host", "Name or service not known",
              "Temporary failure in name resolution", "Network is unreachable", "Connection reset by peer", "timed out")


def _unreachable(line: str) -> Optional[str]:
    """``apiserver <host:port> unreachable: <why> (no answer within connect_timeout <s>)``: the transport's
    message puts the request first and the socket's reason last, past where a one-line cause is cut."""
    found = _UNREACHABLE.match(line)
    if not found:
        return None
    endpoint = _ENDPOINT.search(line)
    where = (endpoint.group(3) or "%s:%s" % endpoint.group(1, 2)) if endpoint else "of this host"
    why = next((w for w in _NO_ANSWER if w.lower() in line.lower()), None)
    if not why:
        return "apiserver %s unreachable: no answer within %s" % (where, found.group(1))
    return "apiserver %s unreachable: %s (no answer within %s)" % (where, why, found.group(1))


def cause(error: Optional[str], limit: int = 240) -> Optional[str]:
    """The error in one line: without the repeated ``cluster <c>:`` prefix and the module's ``[cluster <label>]``
    (the report names the cluster), a kubeconfig's path (the cluster's details keep the whole error) or an
    unreachable apiserver's request, cut at ``limit`` characters."""
    if not error:
        return None
    line = " ".join(str(error).split())
    line = _LABEL.sub(lambda m: "" if m.group(1) == "] " else "[", _PREFIX.sub("", line))
    line = _unreachable(line) or _KUBECONFIG_FILE.sub("cannot load kubeconfig: ", line)
    return line if len(line) <= limit else line[:limit - 3] + "..."


def next_step(phase: Optional[str], error: Optional[str]) -> Dict[str, str]:
    """What to do about a failure, and where docs/troubleshooting.md explains it."""
    for pattern, step, section in _STEPS:
        if re.search(pattern, str(error or "")):
            return {"step": step, "see": "%s: %s" % (TROUBLESHOOTING, section)}
    return {"step": "read the error; the phase's task file is in the table of the section named, then rerun",
            "see": "%s: Role `crd_upgrade` (by task file), %s" % (TROUBLESHOOTING, phase or "init")}


def _sum(crds: List[Dict[str, Any]], key: str) -> int:
    return sum(int((c.get("plan") or {}).get(key) or 0) for c in crds)


def cluster_plan(crds: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The plan of one cluster from its CRDs' plans: what changes, objects to re-store, estimate, blocked."""
    plans = [c.get("plan") or {} for c in crds]
    changing = [c["name"] for c in crds if (c.get("plan") or {}).get("steps")]
    estimates = [p.get("estimate_s") for p in plans if p.get("to_restore")]
    blocked = ["%s %s: %s" % (c["name"], b["version"], b["why"]) for c in crds
               for b in (c.get("plan") or {}).get("blocked") or []]
    paces = [p["pace"] for p in plans if p.get("pace")]
    return {"crds_changing": changing, "to_restore": _sum(crds, "to_restore"),
            "estimate_s": None if None in estimates else round(sum(float(e or 0) for e in estimates), 1),
            "blocked": blocked, "nothing_to_do": not changing, "pace": paces[0] if paces else None}


def duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "unknown duration"
    seconds = float(seconds)
    return "~%dm%02ds" % (seconds // 60, seconds % 60) if seconds >= 60 else "~%.0fs" % max(seconds, 1)


def plan_line(plan: Dict[str, Any]) -> str:
    if plan["nothing_to_do"]:
        return NOTHING
    text = "%d CRD(s) change (%s), %d objects to re-store" % (
        len(plan["crds_changing"]), ", ".join(plan["crds_changing"]), plan["to_restore"])
    if plan["to_restore"]:
        text += ", %s" % duration(plan["estimate_s"])
    if plan.get("pace"):
        text += " (%s)" % plan["pace"]
    if plan["blocked"]:
        text += "; blocked removals: %s" % "; ".join(plan["blocked"])
    return text


def _unseen(c: Dict[str, Any]) -> str:
    """What the client check could not look at, where a version was being removed: readers (the counters were not
    read) and Helm releases (their storage could not be listed or read), each a client that may break unseen."""
    if not any(d.get("removed_versions") for d in c.get("crds") or []):
        return ""
    notes = ["readers of removed versions not checked"] if c.get("readers_checked") is False else []
    helm = str(c.get("helm_releases") or "")
    if "not checked" in helm or "not listed" in helm:
        notes.append(helm)
    return "".join("; " + note for note in notes)


def _done_line(c: Dict[str, Any]) -> str:
    totals = c.get("totals") or {}
    changed = [d["name"] for d in c.get("crds") or [] if crd_changed(d)]
    return "%d CRD(s) changed, %s objects re-stored of %s, %s s%s" % (
        len(changed), totals.get("rewritten", 0), totals.get("objects", 0), c.get("duration_s"), _unseen(c))


HELD_BACK = "held back"  # a cluster's status: everything done but release N+1 for CRDs a client still declares


def _held_line(c: Dict[str, Any]) -> str:
    held = [h for h in c.get("held_back") or [] if isinstance(h, dict)]
    return "release N+1 held back for %s (a client still uses a version it removes; fix: %s)" % (
        ", ".join(str(h.get("crd")) for h in held), held[0].get("fix") if held else "")


def cluster_line(c: Dict[str, Any]) -> str:
    """One line for a cluster, after its name and status."""
    status = c.get("status")
    if status == HELD_BACK:
        return "%s; %s" % (_done_line(c), _held_line(c))
    if status == "failed":
        return "phase %s: %s" % (c.get("failed_phase"), c.get("cause"))
    if status == "not run":
        return "waiting: its wave never started, or the run stopped first"
    if c.get("nothing_to_do"):  # a cluster already done: one check, every phase skipped
        return "nothing to do: %s" % c["nothing_to_do"]
    if status == "planned":
        return plan_line(c["plan"])
    return _done_line(c)


def crd_changed(d: Dict[str, Any]) -> bool:
    """Did the run change this CRD (stored objects, storedVersions or its versions)?"""
    return bool(d.get("rewritten") or d.get("trimmed") or d.get("upgraded") or d.get("new") or d.get("crd_fields_removed")
                or (d.get("stored_after") is not None and d.get("stored_after") != d.get("stored_before"))
                or (d.get("storage_before") and d.get("storage_version") != d.get("storage_before")))


def crd_line(d: Dict[str, Any]) -> str:
    """One line per CRD that changed, for the end of a cluster's run."""
    parts = []
    if d.get("storage_before") and d.get("storage_version") != d.get("storage_before"):
        parts.append("storage %s -> %s" % (d.get("storage_before"), d.get("storage_version")))
    if d.get("rewritten") is not None:
        parts.append("re-stored %s of %s (unchanged %s, gone %s, failed %s)" % (
            d.get("rewritten"), d.get("listed"), d.get("unchanged"), d.get("gone"), d.get("failed")))
    if d.get("stored_after") is not None and d.get("stored_after") != d.get("stored_before"):
        before, after = ",".join(d.get("stored_before") or []), ",".join(d.get("stored_after") or [])
        parts.append("storedVersions %s -> %s" % (before, after))
    if d.get("upgraded") and d.get("removed_versions"):
        parts.append("removed %s" % ",".join(d["removed_versions"]))
    if d.get("crd_fields_removed"):
        parts.append("fields removed from the CRD: %s" % ", ".join(
            str(f.get("path") if isinstance(f, dict) else f) for f in d["crd_fields_removed"]))
    etcd = d.get("etcd") or {}
    if etcd:
        parts.append("etcd %s of %s keys at %s" % (etcd.get("at_want"), etcd.get("key_count"), etcd.get("want")))
    others = probe_words(d.get("others_saw"))
    if others:
        parts.append(others)
    return "%s: %s" % (d.get("name"), "; ".join(parts) or "changed")


# every key a template reads, so a report from an older release (a slice, a set_stats artifact) renders too
_CRD_KEYS = ("new", "stored_before", "stored_after", "storage_before", "storage_version", "objects", "listed",
             "rewritten", "unchanged", "gone", "failed", "duration_s", "skipped", "first_failure", "trimmed", "etcd",
             "upgraded", "removed_versions", "proof", "managed_fields", "storage_diff", "client_check", "plan",
             "writers", "crd_fields_removed", "others_saw")
_CLUSTER_KEYS = ("status", "failed_phase", "error", "duration_s", "crds", "totals", "nothing_to_do", "held_back")


def _worded(fields: Any) -> List[Dict[str, Any]]:
    """Fields removed (or to remove) from a live CRD, each with its ``words``; a bare path (the report of an
    older release) becomes an entry with that path."""
    return [dict(entry, words=removal_words(entry)) for entry in (removal(f) for f in fields or [])]


def _complete(c: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = dict((k, None) for k in _CLUSTER_KEYS)
    out.update(c)
    out["crds"] = [dict(dict((k, None) for k in _CRD_KEYS), **d) for d in out["crds"] or []]
    for d in out["crds"]:
        d["crd_fields_removed"] = _worded(d["crd_fields_removed"])
        d["others_saw_words"] = probe_words(d["others_saw"])
        if d.get("plan") and d["plan"].get("removes_fields"):
            d["plan"] = dict(d["plan"], removes_fields=_worded(d["plan"]["removes_fields"]))
    out["totals"] = out["totals"] or {}
    return out


def writer_words(client: Dict[str, Any]) -> str:
    """One client that still uses a version release N+1 removes (crd_client_check check=writers)."""
    get = client.get
    if get("seen_in") == "metrics":
        return "%s requests at %s on apiserver %s" % (get("requests"), get("version"), get("apiserver"))
    kind = get("kind") or "writes"
    did = ("wrote at %s" % get("version")) if kind == "writes" else "%s %s" % (kind, get("version"))
    sources = "; source %s" % ", ".join(str(s) for s in get("sources") or []) if get("sources") else ""
    return "%s (%s) %s on %s objects, last write %s%s" % (
        get("manager"), get("operation"), did, get("objects"), get("last_write") or "unknown", sources)


def _writers(out: Dict[str, Any]) -> None:
    """Each CRD's clients of versions release N+1 removes (the cluster's ``broken_clients``): named per CRD, as
    holding release N+1 back, as accepted (broken), or in a plan as blocking the removal of their version."""
    clients = [b for b in out.get("broken_clients") or [] if isinstance(b, dict)]
    held = dict((str(h.get("crd")), h) for h in out.get("held_back") or [] if isinstance(h, dict))
    for d in out["crds"]:
        mine = [b for b in clients if b.get("crd") == d.get("name")]
        d["held_back"] = held.get(str(d.get("name")))
        label = ("holds release N+1 back" if d["held_back"] else
                 "seen using a removed version" if out.get("status") == "planned" else "accepted, broken")
        d["writers"] = ["%s: %s" % (label, writer_words(b)) for b in mine]
        d["held_back_fix"] = d["held_back"].get("fix") if d["held_back"] else None
        if mine and out.get("status") == "planned" and d.get("plan"):
            d["plan"] = dict(d["plan"], blocked=list(d["plan"].get("blocked") or []) + [
                {"version": str(b.get("version")), "why": "a client still uses it: %s" % writer_words(b)}
                for b in mine])


def enrich(c: Dict[str, Any]) -> Dict[str, Any]:
    """A cluster's result with the report's words: plan, cause, next step and its one line."""
    out = _complete(c)
    _writers(out)
    out["plan"] = cluster_plan(out["crds"])
    out["cause"] = cause(c.get("error")) if c.get("status") == "failed" else None
    out["next_step"] = next_step(c.get("failed_phase"), c.get("error")) if c.get("status") == "failed" else None
    out["line"] = cluster_line(out)
    return out


def summarize(clusters: List[Dict[str, Any]]) -> Dict[str, Any]:
    def count(status: str) -> int:
        return sum(1 for c in clusters if c.get("status") == status)

    def total(key: str) -> int:
        return sum(int((c.get("totals") or {}).get(key) or 0) for c in clusters)

    planned = [c for c in clusters if c.get("status") == "planned"]
    return {"clusters": len(clusters), "ok": count("ok"), "held_back": count(HELD_BACK), "planned": count("planned"),
            "failed": count("failed"),
            "not_run": count("not run"), "objects": total("objects"), "rewritten": total("rewritten"),
            "failed_objects": total("failed"),
            "nothing_to_do": sum(1 for c in planned if (c.get("plan") or {}).get("nothing_to_do")),
            "to_restore": sum(int((c.get("plan") or {}).get("to_restore") or 0) for c in planned)}


def headline(summary: Dict[str, Any], check_mode: bool) -> str:
    if check_mode:
        return "PLAN: %d clusters: %d with changes, %d nothing to do, %d failed, %d waiting; %d objects to re-store" % (
            summary["clusters"], summary["planned"] - summary["nothing_to_do"], summary["nothing_to_do"],
            summary["failed"], summary["not_run"], summary["to_restore"])
    return "%d clusters: %d done, %d release N+1 held back, %d failed, %d waiting; %d objects, %d re-stored, %d failed" % (
        summary["clusters"], summary["ok"], summary.get("held_back", 0), summary["failed"], summary["not_run"],
        summary["objects"], summary["rewritten"], summary["failed_objects"])


def outcome(summary: Dict[str, Any]) -> str:
    """How the run ended, as its report says it first."""
    if not summary["clusters"]:
        return ("no result: no cluster has recorded one; if the run is over, it stopped before (argument "
                "validation, an interruption): see its ansible-playbook output")
    if summary["failed"]:
        return "failed: %d of %d clusters failed" % (summary["failed"], summary["clusters"])
    if summary["not_run"]:
        return "incomplete: %d of %d clusters did not run" % (summary["not_run"], summary["clusters"])
    if summary.get("held_back"):
        return ("complete, release N+1 held back on %d of %d clusters: move the named clients, then run again"
                % (summary["held_back"], summary["clusters"]))
    return "complete"


def result_lines(c: Dict[str, Any]) -> List[str]:
    """The end of a cluster's run on the console: its status, then one line per CRD that changed (or the plan)."""
    rich = enrich(c)
    # the error itself was printed once, by the task that failed
    line = "phase %s failed (the error above)" % c.get("failed_phase") if c.get("status") == "failed" else rich["line"]
    lines = ["%s: %s - %s" % (c.get("cluster"), c.get("status"), line)]
    if c.get("status") == "planned":
        lines.extend("  %s: %s" % (d["name"], (d.get("plan") or {}).get("action", NOTHING)) for d in c.get("crds") or []
                     if (d.get("plan") or {}).get("steps"))
    else:
        lines.extend("  " + crd_line(d) for d in c.get("crds") or [] if crd_changed(d))
    if rich["next_step"]:
        lines.append("  next: %s (%s)" % (rich["next_step"]["step"], rich["next_step"]["see"]))
    return lines


def build(clusters: List[Dict[str, Any]], head: Dict[str, Any]) -> Dict[str, Any]:
    """The fleet report: ``head`` (title, generated, slice, run, ...) then summary, failures, what holds release N+1
    back (holders_table.py) and clusters."""
    rich = [enrich(c) for c in clusters]
    check_mode = bool(head.get("check_mode")) or any(c.get("check_mode") for c in clusters)
    summary = summarize(rich)
    report = dict(head, check_mode=check_mode)
    report["run"] = dict(head.get("run") or {}, outcome=outcome(summary))
    report.update(summary=summary, headline=headline(summary, check_mode),
                  failures=[{"cluster": c.get("cluster"), "phase": c.get("failed_phase"), "cause": c["cause"],
                             "next_step": c["next_step"]} for c in rich if c.get("status") == "failed"],
                  # one row per source across the fleet, the one that alone frees the most clusters first; a plan
                  # (check mode) shows what would hold release N+1 back, from the same writers check
                  holders=holders_table(rich), clusters=rich)
    return report

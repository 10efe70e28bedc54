# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Data shaping for the discover, storage flip, verify, result and report phases of the crd_upgrade role.

Documented in the sidecar .yml files of the same names.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.report import fleet_report
from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.removal_words import removals_by_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.follow import dropped_paths, pair_manifests
from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.approval_plan import plan_of

_NOT_YET = ("stored_after", "listed", "rewritten", "unchanged", "gone", "failed", "duration_s", "objects_per_s",
            "skipped", "first_failure", "drain")
_PASS_COUNTS = ("listed", "rewritten", "unchanged", "gone", "failed", "duration_s", "objects_per_s", "skipped",
                "storage_version", "drain")


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _planned(crd, release_storage, switches, sample, follow):
    storage_after = release_storage.get(crd["name"], crd.get("storage_version"))
    stored_after_flip = _unique(list(crd.get("stored_versions") or []) + [storage_after])
    entry = {
        "name": crd["name"], "stored_versions": crd.get("stored_versions"), "storage_version": crd.get("storage_version"),
        "storage_after_flip": storage_after, "object_count": crd.get("object_count"),
        # after the flip, anything stored but the new storage version needs the re-store
        "needs_migration": stored_after_flip != [storage_after],
        "blocked_removals": crd.get("blocked_removals"), "removed_versions": crd.get("removed_versions"),
        "target_removes_storage": storage_after in (crd.get("removed_versions") or []),
        "target_found": crd.get("target_found", False),
        "conversion": (crd.get("conversion") or {}).get("strategy", "None"),
        "migration_record_valid": (crd.get("migration_record") or {}).get("valid", False),
        # release N's apply (dryRun=All) would change only managedFields: the storage flip does not send it
        "release_in_effect": bool(crd.get("release_in_effect")),
        "follow_removals": follow.get(crd["name"], [])}
    entry["plan"] = plan_of(entry, crd.get("migration_record") or {}, switches, (sample or {}).get(crd["name"]))
    return entry


def crd_upgrade_plan(before, names, release_storage, sample=None, migrate=True, trim=True, workers=8, follow=None,
                     pace="gentle", latency_budget=2.0, flow_control=None):
    """The plan per CRD: every live CRD of ``before`` (crd_storage_info), then each of ``names`` not live yet.

    Each entry's ``plan`` says what release N and the run will do to it (plan_of); ``sample`` is the preflight's
    crd_storage_migrate ``crds`` (their dry-run latency estimates a duration when no record has a pace),
    ``migrate``/``trim`` the role's switches, ``workers`` its writes in flight, ``pace`` and ``latency_budget``
    the pace the re-store will keep, ``follow`` the check-mode crd_release_follow records (what following the
    releases would remove from each live CRD), ``flow_control`` crd_storage_info's (which API Priority and Fairness
    FlowSchema the run's requests fall under: said with the pace).
    """
    release_storage = release_storage or {}
    switches = {"migrate": bool(migrate), "trim": bool(trim), "workers": int(workers or 1), "pace": pace,
                "latency_budget": float(latency_budget or 0), "apf": (flow_control or {}).get("words")}
    by_name = dict((c.get("name"), c) for c in sample or [])
    removals = removals_by_crd(follow or [])
    out = [_planned(crd, release_storage, switches, by_name, removals) for crd in before or []]
    live = [crd["name"] for crd in before or []]
    for name in names or []:
        if name not in live:
            entry = {"name": name, "new": True, "stored_versions": [], "object_count": 0,
                     "storage_after_flip": release_storage.get(name), "needs_migration": False,
                     "blocked_removals": [], "removed_versions": [], "target_removes_storage": False,
                     "release_in_effect": False}
            entry["plan"] = plan_of(entry, {}, switches, None)
            out.append(entry)
    return out


def crd_upgrade_flipped(now, before):
    """Names of the CRDs in ``now`` whose storage version differs from ``before`` (or that are new)."""
    was = dict((crd["name"], crd.get("storage_version")) for crd in reversed(before or []))
    return [crd["name"] for crd in now or [] if crd["name"] not in was or was[crd["name"]] != crd.get("storage_version")]


def crd_upgrade_etcd_records(crds):
    """The role's record of each CRD's etcd scan, from crd_storage_verify's ``crds``."""
    return [{"name": c.get("name"), "want": c.get("expected_api_version"), "key_count": c.get("key_count"),
             "counts": c.get("counts"), "keys_not_at_storage": c.get("mismatched_keys"),
             "mismatched": c.get("mismatched"), "revision": c.get("revision"), "ok": c.get("verified")}
            for c in crds or []]


def _first_failure(migrated):
    failures = migrated.get("first_failures") or []
    if not failures:
        return migrated.get("aborted_reason") or None
    f = failures[0]
    return "%s%s: HTTP %s %s" % ("%s/" % f["namespace"] if f.get("namespace") else "", f.get("name"), f.get("status"),
                                 f.get("message"))


def _from_plan(crd):
    entry = {"name": crd["name"], "new": crd.get("new", False), "stored_before": crd.get("stored_versions"),
             "storage_before": crd.get("storage_version"), "storage_version": crd.get("storage_after_flip"),
             "objects": crd.get("object_count"), "blocked_removals": crd.get("blocked_removals"),
             "removed_versions": crd.get("removed_versions"), "conversion": crd.get("conversion", "None")}
    entry.update(dict.fromkeys(_NOT_YET))
    entry.update(trimmed=False, etcd=None, upgraded=False, read_back=None)  # the report's key order
    entry.update(proof=None, managed_fields=None, storage_diff=None, client_check=None, plan=crd.get("plan"))
    return entry


class _ResultCrds:
    """The per-CRD result of a run: the plan, overlaid by each later phase's record, in phase order."""

    def __init__(self, plan):
        self.by_name = dict((crd["name"], _from_plan(crd)) for crd in plan or [])

    def overlay(self, records, shape):
        for record in records or []:
            if record.get("name") in self.by_name:
                self.by_name[record["name"]].update(shape(record))

    def values(self):
        return list(self.by_name.values())


def _etcd(record, want):
    """The etcd scan as the report keeps it: keys at ``want`` (the storage version the run ends with) and in all."""
    counts = record.get("counts") or {}
    at_want = int(counts.get(want) or 0)
    return {"key_count": record.get("key_count"), "counts": counts, "want": want, "at_want": at_want,
            "ok": record.get("ok") if record.get("want") == want else at_want == (record.get("key_count") or 0)}


def _group_version(name, version):
    return "%s/%s" % (str(name).split(".", 1)[-1], version)


def _planned_only(result, etcd):
    """Check mode: what release N and the run will leave (the plan), nothing claimed as done; the etcd scan is
    judged against the storage version release N sets, not today's."""
    for entry in result.by_name.values():
        plan = entry.get("plan") or {}
        entry.update(storage_version=plan.get("storage_target", entry["storage_version"]),
                     stored_after=plan.get("stored_after"))
    result.overlay(etcd, lambda e: {"etcd": _etcd(e, _group_version(
        e.get("name"), result.by_name[e["name"]]["storage_version"]))})
    return result.values()


def _managed_fields(m):
    """What the pass did to managedFields entries at other versions (per manager where the pass says)."""
    return {"rewritten": m.get("managed_fields_rewritten") or 0, "translated": m.get("managed_fields_translated") or 0,
            "dropped": m.get("managed_fields_dropped") or 0, "objects": m.get("objects_with_stale_managed_fields") or 0,
            "by_manager": m.get("managed_fields_managers"),
            "last_applied_translated": m.get("last_applied_translated") or 0, "last_applied": m.get("last_applied"),
            "mappings": [dict((k, f.get(k)) for k in ("from_version", "to_version", "method", "note"))
                         for f in m.get("field_mappings") or []]}


def _others_saw(m):
    """What the pass's latency probe saw (other clients' GET latency idle and during the writes), with the pass's
    objects per second; None without a probe (pace max, latency_budget 0, nothing written)."""
    probe = (m.get("pace") or {}).get("probe")
    if not probe:
        return None
    return dict(probe, objects_per_s=m.get("objects_per_s"))


def _proof(record):
    """The migration record the verify read: valid for the live CRD or why not (drain adds how it was proven)."""
    return {"record_valid": bool(record.get("valid")), "reason": record.get("reason"),
            "completed_at": record.get("completedAt"), "kind": record.get("proof") or record.get("proofKind"),
            "barrier_mode": record.get("barrierMode") or None}


def _diff(d):
    diff = d.get("storage_diff") or {}
    if not diff.get("checked"):
        return {"checked": False, "reason": diff.get("reason")}
    return dict(dict((k, diff.get(k)) for k in ("compared", "would_change", "added", "removed", "normalised",
                                                "changed")),
                checked=True, keys=diff.get("key_count", diff.get("keys")))


def _client(c):
    return dict((k, c.get(k)) for k in ("ok", "listed", "checked_objects", "applies", "probes", "failed",
                                        "stale_objects", "managers", "broken_clients", "by_manager"))


def _followed(result, followed):
    """Fields crd_release_follow removed from each live CRD (after release N, then N+1), in order, each with the
    releases that declared and no longer declared it, its owners and what other tools wrote inside it."""
    for name, removed in removals_by_crd(followed or []).items():
        if name in result.by_name:
            result.by_name[name]["crd_fields_removed"] = removed


def crd_upgrade_follow_names(applied, previous, live):
    """Names of the CRDs in both releases, live now, of which ``previous`` declares something ``applied`` does not:
    the only CRDs following ``applied`` can change (a CRD whose release drops nothing has nothing left over)."""
    live = set(live or [])
    return [str(a["metadata"]["name"]) for p, a in pair_manifests(previous or [], applied or [])
            if a["metadata"]["name"] in live and dropped_paths(p, a)]


def crd_upgrade_result_crds(plan, migrated=(), verified=(), trimmed=(), etcd=(), upgraded=(), read_back=None,
                            check_mode=False, diff=(), client_check=(), followed=()):
    """One entry per CRD of the plan for ``crd_upgrade_result.crds``, from each phase's record.

    ``migrated`` is crd_storage_migrate's ``crds``, ``verified`` and ``upgraded`` crd_storage_info's after the
    re-store and after release N+1, ``trimmed`` crd_stored_versions_trim's, ``etcd`` crd_upgrade_etcd_records',
    ``read_back`` the objects read back per CRD after the upgrade, ``diff`` crd_storage_info's with a storage diff,
    ``client_check`` crd_client_check's ``crds``. In ``check_mode`` the entry is the plan:
    ``storage_version`` and ``stored_after`` are what the run will leave, only ``listed`` comes from the pass.
    """
    result = _ResultCrds(plan)
    if check_mode:
        result.overlay(migrated, lambda m: {"listed": m.get("listed"), "skipped": m.get("skipped"),
                                            "first_failure": _first_failure(m)})
        result.overlay(diff, lambda d: {"storage_diff": _diff(d)})
        result.overlay(client_check, lambda c: {"client_check": _client(c)})
        return _planned_only(result, etcd)
    result.overlay(migrated, lambda m: dict(dict((k, m.get(k)) for k in _PASS_COUNTS), first_failure=_first_failure(m),
                                            managed_fields=_managed_fields(m), others_saw=_others_saw(m)))
    result.overlay(diff, lambda d: {"storage_diff": _diff(d)})
    result.overlay(client_check, lambda c: {"client_check": _client(c)})
    # the state after the last phase that read it: release N+1 if it was applied, else the verify
    result.overlay(upgraded or verified, lambda c: {"stored_after": c.get("stored_versions"),
                                                    "storage_version": c.get("storage_version")})
    result.overlay(verified, lambda v: {"proof": _proof(v.get("migration_record") or {})})
    result.overlay(trimmed, lambda t: {"trimmed": t.get("changed"), "stored_after": t.get("stored_versions_after")})
    result.overlay(etcd, lambda e: {"etcd": _etcd(e, e.get("want"))})
    result.overlay(upgraded, lambda c: {"upgraded": True, "read_back": (read_back or {}).get(c["name"])})
    _followed(result, followed)
    return result.values()


def crd_upgrade_report_clusters(hosts, hostvars):
    """Each host's ``crd_upgrade_result``, or a ``not run`` entry for a host without one, in the order of ``hosts``."""
    out = []
    for host in hosts or []:
        facts = hostvars[host]
        result = facts.get("crd_upgrade_result") if "crd_upgrade_result" in facts else None
        if result is None:
            result = {"cluster": host, "context": facts.get("context", "") if "context" in facts else "",
                      "status": "not run", "phases_done": [], "failed_phase": None, "error": None, "crds": [],
                      "duration_s": None, "totals": {"objects": 0, "rewritten": 0, "unchanged": 0, "failed": 0}}
        out.append(result)
    return out


def _crd_plan_line(crd):
    plan = crd.get("plan") or {}
    text = plan.get("action") or "nothing to do"
    if plan.get("to_restore"):
        text += " (%s; %s)" % (fleet_report.duration(plan.get("estimate_s")), plan.get("estimate_basis"))
    for blocked in plan.get("blocked") or []:
        text += "; blocked: %s (%s)" % (blocked["version"], blocked["why"])
    for note in plan.get("notes") or []:
        text += "; " + note
    return "%s: %s" % (crd.get("name"), text)


def crd_upgrade_plan_line(plan, cluster=None):
    """The plan for the console: for the whole plan (a list), ``PLAN <cluster>: <summary>`` then one line per CRD;
    for one entry, its line."""
    if isinstance(plan, dict):
        return _crd_plan_line(plan)
    crds = list(plan or [])
    head = fleet_report.plan_line(fleet_report.cluster_plan(crds))
    return ["PLAN %s: %s" % (cluster or "", head)] + ["  " + _crd_plan_line(c) for c in crds]


def crd_upgrade_storage_removed(plan):
    """``<CRD> (storage <v>)`` for each CRD of the plan whose storage version release N+1 removes."""
    return ["%s (storage %s)" % (c.get("name"), c.get("storage_after_flip")) for c in plan or []
            if c.get("target_removes_storage")]


def crd_upgrade_still_stored(plan):
    """``<CRD> still stores <versions>`` for each CRD of the plan with versions release N+1 would remove while
    they are still in status.storedVersions (the skip-a-version trap)."""
    return ["%s still stores %s" % (c.get("name"), ",".join(c["blocked_removals"])) for c in plan or []
            if c.get("blocked_removals")]


def crd_upgrade_unrecorded(crds):
    """``<CRD>: <reason>`` for each CRD (crd_storage_info) that needs a migration and has no valid record."""
    out = []
    for crd in crds or []:
        record = crd.get("migration_record") or {}
        if crd.get("needs_migration") and not record.get("valid"):
            out.append("%s: %s" % (crd.get("name"), record.get("reason", "missing")))
    return out


def crd_upgrade_etcd_mismatches(records):
    """``<CRD> <n> of <keys> keys not at <apiVersion> <counts> (e.g. <3 keys>)`` per etcd record not ok."""
    return ["%s %s of %s keys not at %s %s (e.g. %s)" % (
        r.get("name"), r.get("mismatched"), r.get("key_count"), r.get("want"), r.get("counts"),
        ", ".join((r.get("keys_not_at_storage") or [])[:3])) for r in records or [] if not r.get("ok")]


class FilterModule:
    """Registers nothing: these are steps of the crd_upgrade role, reached through its one filter
    crdops.migration.crd_upgrade_step (role_step.py), so that they are not an API of their own."""

    def filters(self):
        return {}

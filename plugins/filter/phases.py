# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Data shaping for the discover, storage flip, verify, result and report phases of the crd_upgrade role.

Documented in the sidecar .yml files of the same names.
"""

from __future__ import annotations

_NOT_YET = ("stored_after", "listed", "rewritten", "unchanged", "gone", "failed", "duration_s", "objects_per_s",
            "skipped", "first_failure")
_PASS_COUNTS = ("listed", "rewritten", "unchanged", "gone", "failed", "duration_s", "objects_per_s", "skipped",
                "storage_version")


def _unique(items):
    out = []
    for item in items:
        if item not in out:
            out.append(item)
    return out


def _planned(crd, release_storage):
    storage_after = release_storage.get(crd["name"], crd.get("storage_version"))
    stored_after_flip = _unique(list(crd.get("stored_versions") or []) + [storage_after])
    return {
        "name": crd["name"], "stored_versions": crd.get("stored_versions"), "storage_version": crd.get("storage_version"),
        "storage_after_flip": storage_after, "object_count": crd.get("object_count"),
        # after the flip, anything stored but the new storage version needs the re-store
        "needs_migration": stored_after_flip != [storage_after],
        "blocked_removals": crd.get("blocked_removals"), "removed_versions": crd.get("removed_versions"),
        "target_removes_storage": storage_after in (crd.get("removed_versions") or []),
        "target_found": crd.get("target_found", False),
        "conversion": (crd.get("conversion") or {}).get("strategy", "None"),
        "migration_record_valid": (crd.get("migration_record") or {}).get("valid", False)}


def crd_upgrade_plan(before, names, release_storage):
    """The plan per CRD: every live CRD of ``before`` (crd_storage_info), then each of ``names`` not live yet."""
    release_storage = release_storage or {}
    out = [_planned(crd, release_storage) for crd in before or []]
    live = [crd["name"] for crd in before or []]
    out.extend({"name": n, "new": True, "stored_versions": [], "object_count": 0,
                "storage_after_flip": release_storage.get(n), "needs_migration": False, "blocked_removals": [],
                "removed_versions": [], "target_removes_storage": False} for n in names or [] if n not in live)
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


def crd_upgrade_result_crds(plan, migrated=(), verified=(), trimmed=(), etcd=(), upgraded=(), read_back=None):
    """One entry per CRD of the plan for ``crd_upgrade_result.crds``, from each phase's record.

    ``migrated`` is crd_storage_migrate's ``crds``, ``verified`` and ``upgraded`` crd_storage_info's after the
    re-store and after release N+1, ``trimmed`` crd_stored_versions_trim's, ``etcd`` crd_upgrade_etcd_records',
    ``read_back`` the objects read back per CRD after the upgrade.
    """
    result = _ResultCrds(plan)
    result.overlay(migrated, lambda m: dict(dict((k, m.get(k)) for k in _PASS_COUNTS), first_failure=_first_failure(m)))
    # the state after the last phase that read it: release N+1 if it was applied, else the verify
    result.overlay(upgraded or verified, lambda c: {"stored_after": c.get("stored_versions"),
                                                    "storage_version": c.get("storage_version")})
    result.overlay(trimmed, lambda t: {"trimmed": t.get("changed"), "stored_after": t.get("stored_versions_after")})
    result.overlay(etcd, lambda e: {"etcd": {"key_count": e.get("key_count"), "counts": e.get("counts"),
                                             "ok": e.get("ok")}})
    result.overlay(upgraded, lambda c: {"upgraded": True, "read_back": (read_back or {}).get(c["name"])})
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


def crd_upgrade_plan_line(crd):
    """One readable line about a CRD of the plan (crd_upgrade_plan)."""
    if crd.get("new"):
        text = "new CRD"
    else:
        storage, after = crd.get("storage_version"), crd.get("storage_after_flip")
        text = "storedVersions %s, storage %s%s, %s objects" % (
            ",".join(crd.get("stored_versions") or []), storage, " -> %s" % after if after != storage else "",
            crd.get("object_count"))
    if crd.get("needs_migration"):
        text += ", needs re-store"
    if crd.get("removed_versions"):
        text += ", release N+1 removes " + ",".join(crd["removed_versions"])
    if crd.get("blocked_removals"):
        text += " (still stored: %s)" % ",".join(crd["blocked_removals"])
    return "%s: %s" % (crd.get("name"), text)


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

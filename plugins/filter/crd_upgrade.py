# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Data shaping for the upgrade phase of the crd_upgrade role (documented in the sidecar .yml files)."""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.latency_probe import describe as probe_words

MAX_MESSAGE = 500


def _short(text, limit=MAX_MESSAGE):
    text = str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def crd_upgrade_refusals(crds):
    """``<CRD>: <message>`` for each manifest of release N+1 the server-side dry-run refused (crd_release_apply's
    ``crds``), the message cut to about 500 characters."""
    return ["%s: %s" % (crd.get("name"), _short(crd["error"])) for crd in crds or [] if crd.get("error") is not None]


def crd_upgrade_leftovers(crds):
    """``<CRD> still has <versions>`` for each CRD where release N+1 is not in effect after the apply."""
    out = []
    for crd in crds or []:
        left = list(crd.get("removed_versions") or []) + list(crd.get("blocked_removals") or [])
        if left or not crd.get("target_found"):
            out.append("%s still has %s" % (crd.get("name"), ",".join(left) if left else "no release N+1 manifest"))
    return out


def _doubt(crd):
    """Why removing versions from this CRD is not proven safe, or None."""
    storage = crd.get("storage_version")
    stored = list(crd.get("stored_versions") or [])
    if stored != [storage]:
        return "status.storedVersions is %s, not [%s]" % (stored, storage)
    record = crd.get("migration_record") or {}
    if record.get("valid"):
        return None
    if crd.get("object_count") == 0:
        return None  # no object: nothing stored, no managedFields to break
    count = crd.get("object_count")
    return "no valid migration record (%s) for its %s objects" % (
        record.get("reason") or "missing", count if count is not None else "unknown number of")


def crd_upgrade_doubts(crds):
    """``<CRD> (removes <versions>): <reason>`` for each CRD release N+1 removes versions from without proof.

    Proof is a migration record that is valid for the live CRD (same storage version and generation,
    every listed object accounted for, no failure) and ``storedVersions == [storage]``; a CRD without
    objects needs no record.
    """
    out = []
    for crd in crds or []:
        removed = list(crd.get("removed_versions") or [])
        if not crd.get("target_found") or not removed:
            continue
        why = _doubt(crd)
        if why:
            out.append("%s (removes %s): %s" % (crd.get("name"), ",".join(removed), why))
    return out


def _manager_words(tally):
    words = "%s (%s) %d objects: %d changed" % (tally.get("manager"), tally.get("operation"), tally.get("objects", 0),
                                                tally.get("changed", 0))
    if tally.get("operation") == "Apply":
        words += ", %d conflicts named it" % tally.get("conflicts_named", 0)
    if tally.get("unchanged_only"):
        words += ", %d unchanged only" % tally["unchanged_only"]
    if tally.get("failed"):
        words += ", %d FAILED" % tally["failed"]
    return words


def crd_upgrade_client_summary(crds):
    """One line per CRD of crd_client_check's ``crds``."""
    out = []
    for crd in crds or []:
        line = "%s: %d objects listed, %d checked, %d applies and %d probes" % (
            crd.get("name"), crd.get("listed", 0), crd.get("checked_objects", 0), crd.get("applies", 0),
            crd.get("probes", 0))
        if crd.get("by_manager"):
            line += " (%s)" % "; ".join(_manager_words(t) for t in crd["by_manager"])
        elif crd.get("managers"):
            line += " (managers %s)" % ", ".join(crd["managers"])
        if not crd.get("ok", True):
            line += ", FAILED: %d failed, %d objects with entries at removed versions" % (
                crd.get("failed", 0), crd.get("stale_objects", 0))
        out.append(line)
    return out


def crd_upgrade_client_records(crds, broken_clients=None):
    """crd_client_check's ``crds``, each with the ``broken_clients`` (writers.yml) of its CRD."""
    out = []
    for crd in crds or []:
        mine = [c for c in broken_clients or [] if c.get("crd") == crd.get("name")]
        out.append(dict(crd, broken_clients=mine))
    return out


def crd_upgrade_managed_fields_managers(passes):
    """Per CRD and manager what crd_storage_migrate's passes did to managedFields entries (``managed_fields_managers``),
    and which managers lost ownership (``managed_fields_ownership_reduced``), each tagged with its CRD and pass.

    ``passes`` is a list of ``{"when": <pass>, "crds": <crd_storage_migrate crds>}``."""
    managers, reduced = [], []
    for one in passes or []:
        for crd in one.get("crds") or []:
            tag = {"crd": crd.get("name"), "pass": one.get("when")}
            managers.extend(dict(m, **tag) for m in crd.get("managed_fields_managers") or [])
            reduced.extend(dict(r, **tag) for r in crd.get("managed_fields_ownership_reduced") or [])
    return {"managers": managers, "ownership_reduced": reduced}


def crd_upgrade_others_saw(crd):
    """What other clients saw during a crd_storage_migrate pass (its ``pace.probe``), in words."""
    return probe_words((crd.get("pace") or {}).get("probe"))


class FilterModule:
    """Registers nothing: these are steps of the crd_upgrade role, reached through its one filter
    crdops.migration.crd_upgrade_step (role_step.py), so that they are not an API of their own."""

    def filters(self):
        return {}


def crd_upgrade_held_back_entry(crd):
    """A CRD that release N+1 must not reach yet (crd_client_check writers' ``crds[]`` with ``held_back``): its
    name, the versions, who holds it back (one sentence each, not accepted) and the fix."""
    return {"crd": crd.get("name"), "removed_versions": list(crd.get("removed_versions") or []),
            "clients": list(crd.get("held_back_by") or []), "fix": crd.get("fix")}


def crd_upgrade_without(docs, names):
    """The release manifests (CRD documents) of ``docs`` whose CRD is not in ``names`` (the held-back CRDs)."""
    held = set(names or [])
    return [doc for doc in docs or [] if ((doc.get("metadata") or {}).get("name")) not in held]

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Data shaping for the managedFields side of the crd_upgrade role's restore phase (documented in the .yml files)."""

from __future__ import annotations


def crd_upgrade_removed_versions(plan):
    """``<CRD>/<version>`` for every version release N+1 removes (crd_storage_migrate's ``removed_versions``)."""
    return ["%s/%s" % (c.get("name"), v) for c in plan or [] for v in c.get("removed_versions") or []]


def crd_upgrade_unmappable(migrated, plan):
    """One line per managedFields entry kept at a version release N+1 removes: nothing of it maps
    (``unmappable_entries``), or, translated, it would own paths its object lacks (``entries_not_in_object``)."""
    removed = dict((c.get("name"), set(c.get("removed_versions") or [])) for c in plan or [])
    out = []
    for crd in migrated or []:
        kept = [(u, u.get("why")) for u in crd.get("unmappable_entries") or []]
        kept += [(u, "translated, it would own %s, which those objects do not have"
                  % ", ".join(u.get("paths_missing") or [])) for u in crd.get("entries_not_in_object") or []]
        for u, why in kept:
            if u.get("version") not in removed.get(crd.get("name"), ()):
                continue
            out.append("%s: %s objects keep %s's %s entry at %s (e.g. %s): %s" % (
                crd.get("name"), u.get("objects"), u.get("manager"), u.get("operation"), u.get("version"),
                ", ".join(u.get("examples") or []), why))
    return out


class FilterModule:
    """Registers nothing: these are steps of the crd_upgrade role, reached through its one filter
    crdops.migration.crd_upgrade_step (role_step.py), so that they are not an API of their own."""

    def filters(self):
        return {}

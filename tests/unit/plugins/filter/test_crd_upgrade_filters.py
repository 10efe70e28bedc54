# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.crd_upgrade import (
    crd_upgrade_client_records, crd_upgrade_client_summary, crd_upgrade_doubts, crd_upgrade_leftovers,
    crd_upgrade_managed_fields_managers, crd_upgrade_refusals)


def crd(name="w.example.com", removed=("v1alpha1",), stored=("v1beta1",), valid=True, count=5, target=True,
        reason="valid: complete pass"):
    return {"name": name, "target_found": target, "removed_versions": list(removed), "blocked_removals": [],
            "storage_version": "v1beta1", "stored_versions": list(stored), "object_count": count,
            "migration_record": {"valid": valid, "reason": reason, "present": valid}}


def test_refusals_name_the_crd_and_cut_long_messages():
    crds = [{"name": "a.x", "action": "unchanged", "error": None}, {"name": "b.x", "action": "refused", "error": "x" * 600}]
    [line] = crd_upgrade_refusals(crds)
    assert line.startswith("b.x: xxx") and len(line) == len("b.x: ") + 500 and line.endswith("...")
    assert crd_upgrade_refusals(crds[:1]) == [] and crd_upgrade_refusals(None) == []


def test_leftovers():
    assert crd_upgrade_leftovers([crd(removed=())]) == []
    assert crd_upgrade_leftovers([crd(removed=("v1alpha1",))]) == ["w.example.com still has v1alpha1"]
    assert crd_upgrade_leftovers([crd(removed=(), target=False)]) == ["w.example.com still has no release N+1 manifest"]


def test_doubts_need_a_valid_record_and_trimmed_stored_versions():
    assert crd_upgrade_doubts([crd()]) == []
    assert crd_upgrade_doubts([crd(removed=(), valid=False)]) == []  # removes nothing: no gate
    assert crd_upgrade_doubts([crd(target=False, valid=False)]) == []  # not in release N+1
    [untrimmed] = crd_upgrade_doubts([crd(stored=("v1alpha1", "v1beta1"))])
    assert untrimmed == ("w.example.com (removes v1alpha1): status.storedVersions is ['v1alpha1', 'v1beta1'], "
                         "not [v1beta1]")
    [stale] = crd_upgrade_doubts([crd(valid=False, reason="stale: record is for CRD generation 3")])
    assert stale == ("w.example.com (removes v1alpha1): no valid migration record "
                     "(stale: record is for CRD generation 3) for its 5 objects")
    assert "unknown number of objects" in crd_upgrade_doubts([crd(valid=False, count=None)])[0]
    assert crd_upgrade_doubts([crd(valid=False, count=0)]) == []  # no object, nothing to prove


def test_client_summary():
    ok = {"name": "a", "listed": 60, "checked_objects": 10, "applies": 20, "probes": 0, "managers": ["x", "y"],
          "ok": True}
    bad = dict(ok, name="b", ok=False, failed=2, stale_objects=60)
    assert crd_upgrade_client_summary([ok, bad]) == [
        "a: 60 objects listed, 10 checked, 20 applies and 0 probes (managers x, y)",
        "b: 60 objects listed, 10 checked, 20 applies and 0 probes (managers x, y), FAILED: 2 failed, "
        "60 objects with entries at removed versions"]


def test_client_summary_per_manager_and_records_with_broken_clients():
    crd_entry = {"name": "a", "listed": 3, "checked_objects": 3, "applies": 3, "probes": 0, "ok": True,
                 "by_manager": [{"manager": "argo", "operation": "Apply", "objects": 3, "changed": 2,
                                 "unchanged_only": 1, "conflicts_named": 2, "failed": 0},
                                {"manager": "edit", "operation": "Update", "objects": 1, "changed": 1, "failed": 1}]}
    assert crd_upgrade_client_summary([crd_entry]) == [
        "a: 3 objects listed, 3 checked, 3 applies and 0 probes (argo (Apply) 3 objects: 2 changed, 2 conflicts named "
        "it, 1 unchanged only; edit (Update) 1 objects: 1 changed, 1 FAILED)"]
    broken = [{"crd": "a", "manager": "old"}, {"crd": "b", "manager": "other"}]
    assert crd_upgrade_client_records([crd_entry, {"name": "c"}], broken) == [
        dict(crd_entry, broken_clients=[{"crd": "a", "manager": "old"}]), {"name": "c", "broken_clients": []}]


def test_managed_fields_managers_over_passes_tagged_with_crd_and_pass():
    row = {"manager": "flux", "operation": "Apply", "from_version": "v1alpha1", "translated": 3, "dropped": 0}
    cut = {"manager": "argo", "operation": "Apply", "from_version": "v1alpha1", "paths_dropped": [".spec.x"],
           "entries_dropped": 0}
    passes = [{"when": "re-store", "crds": [{"name": "a", "managed_fields_managers": [row],
                                             "managed_fields_ownership_reduced": [cut]}]},
              {"when": "after release N+1", "crds": [{"name": "a"}]}]
    assert crd_upgrade_managed_fields_managers(passes) == {
        "managers": [dict(row, crd="a", **{"pass": "re-store"})],
        "ownership_reduced": [dict(cut, crd="a", **{"pass": "re-store"})]}
    assert crd_upgrade_managed_fields_managers([]) == {"managers": [], "ownership_reduced": []}

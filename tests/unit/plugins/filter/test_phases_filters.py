# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.phases import (
    crd_upgrade_etcd_mismatches, crd_upgrade_etcd_records, crd_upgrade_flipped, crd_upgrade_follow_names,
    crd_upgrade_plan, crd_upgrade_plan_line, crd_upgrade_report_clusters, crd_upgrade_result_crds, crd_upgrade_still_stored,
    crd_upgrade_storage_removed, crd_upgrade_unrecorded)


def live(name, stored, storage, **extra):
    return dict({"name": name, "stored_versions": stored, "storage_version": storage, "object_count": 5,
                 "blocked_removals": [], "removed_versions": [], "target_found": True,
                 "conversion": {"strategy": "None"}, "migration_record": {"valid": False}}, **extra)


def test_plan_after_the_flip_of_release_n():
    before = [live("a.io", ["v1"], "v1"),                               # release N flips it to v2
              live("b.io", ["v1", "v2"], "v2", removed_versions=["v2"]),  # stored twice; N+1 drops the storage
              live("c.io", ["v2"], "v2", conversion=None, migration_record={"valid": True})]
    del before[2]["target_found"]
    plan = crd_upgrade_plan(before, ["a.io", "b.io", "c.io", "new.io"], {"a.io": "v2", "new.io": "v1"})
    a, b, c, new = plan
    assert (a["storage_after_flip"], a["needs_migration"], a["target_removes_storage"]) == ("v2", True, False)
    assert (b["storage_after_flip"], b["needs_migration"], b["target_removes_storage"]) == ("v2", True, True)
    assert (c["needs_migration"], c["target_found"], c["conversion"], c["migration_record_valid"]) == (False, False, "None", True)
    plan_of_new = new.pop("plan")
    assert new == {"name": "new.io", "new": True, "stored_versions": [], "object_count": 0, "storage_after_flip": "v1",
                   "needs_migration": False, "blocked_removals": [], "removed_versions": [],
                   "target_removes_storage": False, "release_in_effect": False}
    assert (plan_of_new["action"], plan_of_new["stored_after"], plan_of_new["to_restore"]) == ("create at v1", ["v1"], 0)
    assert crd_upgrade_plan([], [], {}) == []


def test_flipped_names_changed_and_new_crds():
    before = [{"name": "a.io", "storage_version": "v1"}, {"name": "b.io", "storage_version": "v2"}]
    now = [{"name": "a.io", "storage_version": "v2"}, {"name": "b.io", "storage_version": "v2"},
           {"name": "n.io", "storage_version": "v1"}]
    assert crd_upgrade_flipped(now, before) == ["a.io", "n.io"]
    assert crd_upgrade_flipped(before, before) == []


def test_etcd_records():
    scan = {"name": "a.io", "expected_api_version": "g/v2", "key_count": 4, "counts": {"g/v2": 3, "g/v1": 1},
            "mismatched_keys": ["/registry/g/as/ns/x"], "mismatched": 1, "verified": False}
    assert crd_upgrade_etcd_records([scan]) == [{
        "name": "a.io", "want": "g/v2", "key_count": 4, "counts": {"g/v2": 3, "g/v1": 1},
        "keys_not_at_storage": ["/registry/g/as/ns/x"], "mismatched": 1, "revision": None, "ok": False}]


def test_result_starts_from_the_plan_and_each_phase_fills_in_its_part():
    plan = crd_upgrade_plan([live("a.io", ["v1"], "v1"), live("b.io", ["v2"], "v2")], ["a.io", "b.io"], {"a.io": "v2"})
    only_plan = crd_upgrade_result_crds(plan)
    assert only_plan[0] == {
        "name": "a.io", "new": False, "stored_before": ["v1"], "storage_before": "v1", "storage_version": "v2",
        "objects": 5, "blocked_removals": [], "removed_versions": [], "conversion": "None", "stored_after": None,
        "listed": None, "rewritten": None, "unchanged": None, "gone": None, "failed": None, "duration_s": None,
        "objects_per_s": None, "skipped": None, "first_failure": None, "drain": None, "trimmed": False, "etcd": None,
        "upgraded": False, "read_back": None, "proof": None, "managed_fields": None, "storage_diff": None, "client_check": None,
        "plan": plan[0]["plan"]}
    assert list(only_plan[0]) == list(only_plan[1])
    migrated = [{"name": "a.io", "listed": 5, "rewritten": 4, "unchanged": 0, "gone": 0, "failed": 1, "duration_s": 0.5,
                 "objects_per_s": 10.0, "skipped": False, "storage_version": "v2",
                 "first_failures": [{"namespace": "ns", "name": "w", "status": 422, "message": "invalid"}]},
                {"name": "b.io", "listed": 0, "failed": 0, "aborted_reason": "stopped", "first_failures": []},
                {"name": "not-planned.io", "listed": 9}]
    verified = [{"name": "a.io", "stored_versions": ["v1", "v2"], "storage_version": "v2"}]
    trimmed = [{"name": "a.io", "changed": True, "stored_versions_after": ["v2"]}]
    etcd = [{"name": "a.io", "key_count": 5, "counts": {"g/v2": 5}, "want": "g/v2", "ok": True}]
    a, b = crd_upgrade_result_crds(plan, migrated=migrated, verified=verified, trimmed=trimmed, etcd=etcd)
    assert (a["listed"], a["rewritten"], a["failed"], a["first_failure"]) == (5, 4, 1, "ns/w: HTTP 422 invalid")
    assert (a["stored_after"], a["trimmed"], a["etcd"], a["upgraded"]) == (["v2"], True, {
        "key_count": 5, "counts": {"g/v2": 5}, "want": "g/v2", "at_want": 5, "ok": True}, False)
    assert (b["first_failure"], b["stored_after"]) == ("stopped", None)
    upgraded = [{"name": "a.io", "stored_versions": ["v2"], "storage_version": "v3"}]
    (a, _b) = crd_upgrade_result_crds(plan, verified=verified, upgraded=upgraded, read_back={"a.io": 5})
    assert (a["stored_after"], a["storage_version"], a["upgraded"], a["read_back"]) == (["v2"], "v3", True, 5)


def test_report_clusters_mark_hosts_that_did_not_run():
    hostvars = {"h1": {"crd_upgrade_result": {"cluster": "h1", "status": "ok"}}, "h2": {"context": "kind-h2"}, "h3": {}}
    h1, h2, h3 = crd_upgrade_report_clusters(["h1", "h2", "h3"], hostvars)
    assert h1 == {"cluster": "h1", "status": "ok"}
    assert (h2["cluster"], h2["context"], h2["status"], h2["crds"], h2["totals"]) == (
        "h2", "kind-h2", "not run", [], {"objects": 0, "rewritten": 0, "unchanged": 0, "failed": 0})
    assert (h3["context"], h3["failed_phase"], h3["duration_s"]) == ("", None, None)


def test_plan_lines_and_what_stops_discover():
    plan = crd_upgrade_plan([live("a.io", ["v1", "v2"], "v1", removed_versions=["v1"], blocked_removals=["v1"]),
                             live("b.io", ["v2"], "v2")], ["a.io", "b.io", "new.io"], {"a.io": "v2", "b.io": "v3"})
    plan[1]["target_removes_storage"] = True
    assert [crd_upgrade_plan_line(c) for c in plan] == [
        "a.io: storage v1 -> v2; re-store 5 objects; storedVersions v1,v2 -> v2; release N+1 removes v1 (unknown "
        "duration; unknown: no pace recorded on the CRD and no dry-run sample)",
        "b.io: storage v2 -> v3; re-store 5 objects; storedVersions v2 -> v3 (unknown duration; unknown: no pace "
        "recorded on the CRD and no dry-run sample)",
        "new.io: create"]
    assert crd_upgrade_storage_removed(plan) == ["b.io (storage v3)"]
    assert crd_upgrade_still_stored(plan) == ["a.io still stores v1"]
    assert crd_upgrade_storage_removed([]) == crd_upgrade_still_stored([]) == []


def test_what_stops_verify():
    crds = [{"name": "a.io", "needs_migration": True, "migration_record": {"valid": False, "reason": "stale generation"}},
            {"name": "b.io", "needs_migration": True},
            {"name": "c.io", "needs_migration": True, "migration_record": {"valid": True}},
            {"name": "d.io", "needs_migration": False}]
    assert crd_upgrade_unrecorded(crds) == ["a.io: stale generation", "b.io: missing"]
    records = crd_upgrade_etcd_records([
        {"name": "a.io", "expected_api_version": "g/v2", "key_count": 5, "counts": {"g/v1": 4, "g/v2": 1},
         "mismatched_keys": ["/k1", "/k2", "/k3", "/k4"], "mismatched": 4, "verified": False},
        {"name": "b.io", "expected_api_version": "g/v2", "key_count": 1, "counts": {"g/v2": 1},
         "mismatched_keys": [], "mismatched": 0, "verified": True}])
    assert crd_upgrade_etcd_mismatches(records) == [
        "a.io 4 of 5 keys not at g/v2 {'g/v1': 4, 'g/v2': 1} (e.g. /k1, /k2, /k3)"]


def test_plan_estimates_from_the_recorded_pace_else_the_dry_run_sample_and_says_nothing_to_do():
    record = {"valid": False, "listed": 300, "startedAt": "2026-12-01T10:00:00Z", "completedAt": "2026-12-01T10:00:10Z"}
    before = [live("a.io", ["v1"], "v1", object_count=600, migration_record=record),
              live("b.io", ["v1"], "v1", object_count=50),
              live("c.io", ["v2"], "v2")]
    sample = [{"name": "b.io", "dry_run_latency_ms": 8.0}]
    a, b, c = crd_upgrade_plan(before, ["a.io", "b.io", "c.io"], {"a.io": "v2", "b.io": "v2"}, sample=sample, workers=4)
    assert (a["plan"]["to_restore"], a["plan"]["estimate_s"]) == (600, 20.0)  # 30 objects/s recorded
    assert "last recorded pace 30.0 objects/s" in a["plan"]["estimate_basis"]
    assert (b["plan"]["estimate_s"], b["plan"]["estimate_basis"]) == (
        0.1, "dry-run sample 8.0 ms per write, 4 writes in flight")  # 50 writes at 500/s
    assert (a["plan"]["storage_now"], a["plan"]["storage_target"], a["plan"]["stored_after"]) == ("v1", "v2", ["v2"])
    assert (c["plan"]["action"], c["plan"]["to_restore"], c["plan"]["stored_after"]) == ("nothing to do", 0, ["v2"])
    lines = crd_upgrade_plan_line([a, b, c], "prod-1")
    assert lines[0] == ("PLAN prod-1: 2 CRD(s) change (a.io, b.io), 650 objects to re-store, ~20s (pace gentle: other "
                        "clients' GET p90 and p99 held within x2.0 of idle)")
    # check mode says which budget the run will hold, or that it holds none
    (m,) = crd_upgrade_plan(before[:1], ["a.io"], {"a.io": "v2"}, pace="max", workers=4)
    assert m["plan"]["pace"] == "pace max: 4 writes in flight, other clients' latency not held"
    (off,) = crd_upgrade_plan(before[:1], ["a.io"], {"a.io": "v2"}, latency_budget=0)
    assert off["plan"]["pace"] == "pace gentle by the writes' own latency (latency budget off)"
    assert c["plan"]["pace"] is None  # nothing to re-store: no pace to announce
    assert lines[3] == "  c.io: nothing to do"
    assert crd_upgrade_plan_line([c], "clean") == ["PLAN clean: nothing to do", "  c.io: nothing to do"]
    # without the trim, storedVersions keeps the old version and release N+1's removal stays blocked
    (d,) = crd_upgrade_plan([live("d.io", ["v1", "v2"], "v2", removed_versions=["v1"], blocked_removals=["v1"])],
                            ["d.io"], {}, trim=False)
    assert d["plan"]["stored_after"] == ["v1", "v2"] and "the run refuses release N+1" in d["plan"]["blocked"][0]["why"]


def test_check_mode_result_is_the_plan_and_claims_nothing_done():
    plan = crd_upgrade_plan([live("a.io", ["v1"], "v1", object_count=200)], ["a.io"], {"a.io": "v2"})
    etcd = crd_upgrade_etcd_records([{"name": "a.io", "expected_api_version": "a.io/v1", "key_count": 200,
                                      "counts": {"io/v1": 200}, "mismatched": 0, "verified": True}])
    verified = [{"name": "a.io", "stored_versions": ["v1"], "storage_version": "v1"}]
    trimmed = [{"name": "a.io", "changed": True, "stored_versions_after": ["v1"]}]
    (a,) = crd_upgrade_result_crds(plan, migrated=[{"name": "a.io", "listed": 200, "rewritten": 0}], verified=verified,
                                   trimmed=trimmed, etcd=etcd, check_mode=True)
    assert (a["storage_version"], a["stored_after"], a["trimmed"], a["rewritten"]) == ("v2", ["v2"], False, None)
    assert a["etcd"] == {"key_count": 200, "counts": {"io/v1": 200}, "want": "io/v2", "at_want": 0, "ok": False}
    assert a["plan"]["to_restore"] == 200


def _follow(name, removed, declared_by, not_declared_by):
    """A crd_release_follow ``crds`` entry as follow_release.yml records it."""
    return {"name": name, "dropped_by_release": [r["path"] for r in removed], "changed": bool(removed),
            "removed": [dict({"pointer": "/" + r["path"].replace(".", "/"), "owners": [], "injected": []}, **r)
                        for r in removed], "declared_by": declared_by, "not_declared_by": not_declared_by}


def test_fields_the_release_follow_removed_are_listed_per_crd():
    plan = crd_upgrade_plan([live("a.io", ["v1"], "v1")], ["a.io"], {"a.io": "v2"})
    followed = [_follow("a.io", [{"path": "spec.conversion", "owners": ["kubectl-create (Update)"]}],
                        "the installed release", "release N"),
                _follow("b.io", [{"path": "x"}], "the installed release", "release N"),
                _follow("a.io", [{"path": "spec.versions[v1].deprecated"}], "release N", "release N+1"),
                _follow("a.io", [], "release N", "release N+1")]
    (a,) = crd_upgrade_result_crds(plan, followed=followed)
    assert a["crd_fields_removed"] == [
        {"path": "spec.conversion", "declared_by": "the installed release", "not_declared_by": "release N",
         "owners": ["kubectl-create (Update)"], "injected": []},
        {"path": "spec.versions[v1].deprecated", "declared_by": "release N", "not_declared_by": "release N+1",
         "owners": [], "injected": []}]
    (a,) = crd_upgrade_result_crds(plan)
    assert "crd_fields_removed" not in a
    # a check-mode run removed nothing: what it would remove is in the plan, not here
    (a,) = crd_upgrade_result_crds(plan, followed=followed, check_mode=True)
    assert "crd_fields_removed" not in a


def _manifest(name, **spec):
    return {"metadata": {"name": name}, "spec": dict({"group": "x.io", "versions": [{"name": "v1"}]}, **spec)}


def test_only_crds_whose_release_drops_something_are_followed():
    previous = [_manifest("a.x.io", conversion={"strategy": "Webhook"}), _manifest("b.x.io"),
                _manifest("c.x.io", names={"shortNames": ["c"]}), _manifest("gone.x.io", conversion={})]
    # a.io drops spec.conversion, c.io its short names; b.io drops nothing (a list that changes is still declared)
    applied = [_manifest("a.x.io"), _manifest("b.x.io", versions=[{"name": "v2"}]), _manifest("c.x.io", names={}),
               _manifest("new.x.io")]
    assert crd_upgrade_follow_names(applied, previous, ["a.x.io", "b.x.io", "c.x.io", "new.x.io"]) == [
        "a.x.io", "c.x.io"]
    assert crd_upgrade_follow_names(applied, previous, ["c.x.io"]) == ["c.x.io"]   # a.io does not exist (yet)
    assert crd_upgrade_follow_names(applied, [], ["a.x.io"]) == []


def test_check_mode_plan_says_what_following_the_releases_would_remove():
    preview = [_follow("a.io", [{"path": "spec.conversion", "owners": ["cainjector (Update)", "kubectl-create (Update)"],
                                 "injected": ["spec.conversion.webhook.clientConfig.caBundle"]}],
                       "release N", "release N+1"),
               _follow("c.io", [{"path": "spec.names.shortNames"}], "release N", "release N+1")]
    # c.io needs nothing else: the leftover field alone makes it a CRD that changes
    a, c = crd_upgrade_plan([live("a.io", ["v1"], "v1"), live("c.io", ["v1"], "v1")], ["a.io", "c.io"],
                            {"a.io": "v2"}, follow=preview)
    assert a["plan"]["removes_fields"][0]["path"] == "spec.conversion"
    assert a["plan"]["steps"][-1] == (
        "would remove spec.conversion (declared by release N, not by release N+1; owned by cainjector (Update), "
        "kubectl-create (Update); with spec.conversion.webhook.clientConfig.caBundle, which no release declared)")
    assert c["plan"]["action"] == ("would remove spec.names.shortNames (declared by release N, not by release N+1)")
    lines = crd_upgrade_plan_line([a, c], "prod-1")
    assert lines[0].startswith("PLAN prod-1: 2 CRD(s) change (a.io, c.io), 5 objects to re-store")
    assert lines[2] == "  c.io: would remove spec.names.shortNames (declared by release N, not by release N+1)"
    # the check-mode result carries the plan as it is
    (a, c) = crd_upgrade_result_crds([a, c], followed=preview, check_mode=True)
    assert c["plan"]["removes_fields"] == [{"path": "spec.names.shortNames", "declared_by": "release N",
                                            "not_declared_by": "release N+1", "owners": [], "injected": []}]
    # without a preview (a real run plans before anything is applied) the plan has no such step
    (a,) = crd_upgrade_plan([live("a.io", ["v1"], "v1")], ["a.io"], {})
    assert a["plan"]["removes_fields"] == [] and a["plan"]["action"] == "nothing to do"


def test_release_n_in_effect_is_said_in_the_plan_and_changes_nothing():
    """discover found release N in effect (its apply would change only managedFields): no flip, a note, no step."""
    plan = crd_upgrade_plan([live("a.io", ["v2"], "v2", release_in_effect=True, migration_record={"valid": True}),
                             live("b.io", ["v1"], "v1", release_in_effect=False)], ["a.io", "b.io"],
                            {"a.io": "v2", "b.io": "v2"}, migrate=True)
    a, b = plan
    assert a["release_in_effect"] and not b["release_in_effect"]
    assert a["plan"]["notes"] == ["release N already in effect, not re-applied"] and b["plan"]["notes"] == []
    assert not a["plan"]["flip"] and b["plan"]["flip"]
    assert crd_upgrade_plan_line(a) == "a.io: nothing to do; release N already in effect, not re-applied"
    assert crd_upgrade_plan_line(b).startswith("b.io: storage v1 -> v2")
    assert "already in effect" not in crd_upgrade_plan_line(b)

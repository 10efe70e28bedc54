# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A run over CRDs: Events on each pass, a managedFields-only pass for CRDs already done, totals, changed."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import events
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (
    ProgressFile, RunOptions, run_migration)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import status
from tests.unit.crdops_mf_fakes import MfCluster, entry

NAME = "crontabs.stable.example.com"
G = "stable.example.com"


def cluster(stored=("v1", "v2")):
    c = MfCluster()
    c.add_crd(stored=stored)
    c.add_objects(NAME, 5, namespaces=("a",), stored=stored[0])
    c.set_managed_fields(NAME, "a/obj-00001", [entry("argocd", G + "/v1"), entry("flux", G + "/v1")])
    return c


def run(c, check_mode=False, **kw):
    kw = dict(dict(drain_window=0, confirm_passes=0), **kw)  # the drain and the proof have tests of their own
    options = RunOptions(restore=RestoreOptions(page_size=2, workers=2, check_mode=check_mode), **kw)
    return run_migration(c, [get_crd(c, NAME)], options, {c.base_url: c}, ProgressFile(None, "t", check_mode, print))


def test_pass_posts_started_and_succeeded_events_with_counts():
    c = cluster()
    res = run(c)
    entry_ = res.crds[0]
    assert entry_["event_errors"] == [] and res.changed
    assert [e["reason"] for e in c.events] == [events.PASS_STARTED, events.PASS_SUCCEEDED]
    started, done = (e["message"] for e in c.events)
    assert "storage version v2" in started and "v1, v2" in started and "set to v2 (ownership kept)" in started
    assert "listed 5, rewritten 5, unchanged 0, gone 0" in done and "2 rewritten to the storage version" in done
    assert "migration record written" in done and all(e["involvedObject"]["name"] == NAME for e in c.events)
    assert res.totals["managed_fields_rewritten"] == 2 and res.totals["objects_with_stale_managed_fields"] == 1


def test_event_errors_are_collected_never_fail_the_pass():
    c = cluster()
    c.hooks.append(lambda m, p, q, b: status(400, 'admission webhook "v" denied the request: frozen', "BadRequest")
                   if m == "PATCH" and p.endswith("/obj-00003") else None)
    c.hooks.append(lambda m, p, q, b: status(403, "events is forbidden", "Forbidden")
                   if m == "POST" and p.endswith("/events") else None)
    res = run(c)
    entry_ = res.crds[0]
    assert entry_["failed"] == 1 and len(entry_["event_errors"]) == 2
    assert all("HTTP 403" in e and "not posted" in e for e in entry_["event_errors"])
    assert entry_["rewritten"] == 4 and entry_["complete"]


def test_failed_pass_event_is_a_warning():
    c = cluster()
    c.hooks.append(lambda m, p, q, b: status(400, 'admission webhook "v" denied the request: frozen', "BadRequest")
                   if m == "PATCH" and p.endswith("/obj-00003") else None)
    run(c)
    failed = [e for e in c.events if e["reason"] == events.PASS_FAILED]
    assert len(failed) == 1 and failed[0]["type"] == "Warning"
    assert "obj-00003" in failed[0]["message"] and "denied the request: frozen" in failed[0]["message"]


def test_check_mode_posts_no_event():
    c = cluster()
    res = run(c, check_mode=True)
    assert c.events == [] and c.writes() == [] and res.crds[0]["objects_with_stale_managed_fields"] == 1


def test_skipped_crd_gets_a_managed_fields_only_pass():
    c = cluster(stored=("v2",))
    res = run(c)
    e = res.crds[0]
    assert "already [v2]" in e["skipped"] and e["managed_fields_only"] and e["barrier"] is None
    assert (e["listed"], e["rewritten"], e["unchanged"], e["managed_fields_rewritten"]) == (5, 1, 4, 2)
    assert res.changed and c.object_writes == 1 and [ev["reason"] for ev in c.events] == [events.PASS_SUCCEEDED]
    assert "managedFields-only pass" in c.events[0]["message"]
    again = run(c)
    assert not again.changed and again.crds[0]["rewritten"] == 0 and len(c.events) == 1


def test_skipped_crd_check_mode_reports_a_change_only_with_stale_entries():
    c = cluster(stored=("v2",))
    assert run(c, check_mode=True).changed and c.writes() == []
    c.set_managed_fields(NAME, "a/obj-00001", [entry("argocd", G + "/v2")])
    assert not run(c, check_mode=True).changed


def test_a_clean_crd_that_must_carry_a_record_gets_a_full_pass_and_one():
    """storedVersions [v2] may have been trimmed by hand: where release N+1 removes a version, the role asks for proof."""
    skipped = run(cluster(stored=("v2",)))
    assert skipped.crds[0]["skipped"] and not skipped.crds[0]["record_written"]
    c = cluster(stored=("v2",))
    res = run(c, require_record=(NAME,))
    entry_ = res.crds[0]
    assert entry_["skipped"] is None and entry_["record_written"] and entry_["listed"] == 5
    assert entry_["rewritten"] + entry_["unchanged"] == 5 and res.changed
    again = run(c, require_record=(NAME,))  # the record now exists: a rerun skips the pass
    assert again.crds[0]["skipped"] and not again.crds[0]["record_written"]


def test_progress_lines_name_the_crd_being_migrated_never_the_next_one():
    """Every line about the first of two CRDs says CRD 1/2, its last one (sent after the pass counted it) too."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.progress import progress_line
    c = cluster()
    other = "gadgets.stable.example.com"
    c.add_crd(name=other, stored=("v1", "v2"))
    c.add_objects(other, 3, namespaces=("a",), stored="v1")
    progress = ProgressFile(None, "t", False, print)
    lines = []
    progress.on_update = lambda state: lines.append(progress_line(state, None))
    options = RunOptions(restore=RestoreOptions(page_size=2, workers=2))
    run_migration(c, [get_crd(c, NAME), get_crd(c, other)], options, {c.base_url: c}, progress)
    by_crd = {}
    for line in filter(None, lines):
        by_crd.setdefault(line.split(":", 1)[0].split(",", 1)[0].split(" ", 2)[2], set()).add(line.split(" ", 2)[1])
    assert by_crd == {NAME: {"1/2"}, other: {"2/2"}}, lines

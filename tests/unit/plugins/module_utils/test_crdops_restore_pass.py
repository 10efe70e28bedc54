# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each job of the re-store pass on its own: select, submit, tally, advance the checkpoint, progress, record."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import AdmissionRejected
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.listing import ObjectRef
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import (
    StaleFields, stale_entries)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    CHECKPOINT_ANNOTATION, RECORD_ANNOTATION, validate_record)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import (
    FAILED, GONE, NOT_ATTEMPTED, REWRITTEN, UNCHANGED, Outcome, RestoreOptions, RestorePass, _Page, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"


def make_pass(n=6, mf_only=False, **kw):
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, n, namespaces=("a",))
    kw.setdefault("page_size", 3)
    seen = []
    p = RestorePass(c, get_crd(c, NAME), RestoreOptions(**kw), progress=seen.append, managed_fields_only=mf_only,
                    clock=iter(range(1000)).__next__, now=lambda: "2026-12-01T05:00:00Z")
    return c, p, seen


def ref(name, stale=None):
    return ObjectRef("a", name, "1", stale)


def test_select_skips_through_the_clean_key_and_in_mf_only_mode_objects_without_stale_entries():
    _c, p, _seen = make_pass()
    refs = [ref("obj-1"), ref("obj-2", StaleFields((0,), 1)), ref("obj-3")]
    assert p.select(refs) == (refs, 0)
    p.clean_through = "a/obj-1"
    assert p.select(refs) == (refs[1:], 1)
    _c, q, _seen = make_pass(mf_only=True)
    assert q.select(refs) == ([refs[1]], 0) and q.result.unchanged == 2


def test_submit_writes_in_workers_or_in_check_mode_only_plans():
    c, p, _seen = make_pass()
    with ThreadPoolExecutor(2) as ex:
        page = p.submit(ex, [ref("obj-00000"), ref("obj-00001")], "a/obj-00001", 1)
        assert [f.result().kind for f in page.futures] == [REWRITTEN, REWRITTEN]
    assert page.skipped == 1 and page.last_key == "a/obj-00001"
    c2, q, _seen = make_pass(check_mode=True, preflight_sample=1)
    with ThreadPoolExecutor(1) as ex:
        two_old = [{"manager": m, "operation": "Apply", "apiVersion": "stable.example.com/v1"} for m in "ab"]
        page = q.submit(ex, [ref("obj-00000", stale_entries(two_old, "stable.example.com", "v2"))], "a/obj-00000", 0)
    assert page.futures == [] and c2.writes() == [] and len(c2.dry_runs()) == 1
    assert (q.result.objects_with_stale_managed_fields, q.result.managed_fields_rewritten) == (1, 2)


def test_tally_counts_each_kind_and_keeps_the_first_failures():
    _c, p, _seen = make_pass(max_failures=1)
    err = AdmissionRejected("re-store rejected", cluster="c1", crd=NAME, obj="a/x", status=400, api_message="no")
    results = [p.tally(o) for o in (Outcome(REWRITTEN, None, 2, 0, True), Outcome(UNCHANGED), Outcome(GONE),
                                    Outcome(NOT_ATTEMPTED, stale_object=True), Outcome(FAILED, err))]
    assert results == [False, False, False, True, True]
    r = p.result
    assert (r.rewritten, r.unchanged, r.gone, r.not_attempted, r.failed) == (1, 1, 1, 1, 1)
    assert (r.objects_with_stale_managed_fields, r.managed_fields_rewritten) == (1, 2)  # not attempted: not counted
    assert r.first_failures == [{"namespace": "a", "name": "x", "status": 400, "reason": None, "kind": "admission",
                                 "message": "no", "error": str(err)}]
    assert not p.abort.is_set()
    p.tally(Outcome(FAILED, err))
    assert p.abort.is_set() and "max_failures=1" in p.abort_reasons[0]


def test_advance_checkpoint_only_while_clean_and_forward():
    c, p, _seen = make_pass(checkpoint_every=1)
    page = _Page([ref("obj-00001")], ["done"], "a/obj-00001", 0)
    p.advance_checkpoint(page)
    ckpt = json.loads(get_crd(c, NAME).annotations[CHECKPOINT_ANNOTATION])
    assert ckpt["last"] == "a/obj-00001" and p.clean_through == "a/obj-00001"
    writes = c.crd_writes
    p.advance_checkpoint(_Page([], ["done"], "a/obj-00000", 0))  # never backwards
    p.clean = False
    p.advance_checkpoint(_Page([], ["done"], "a/obj-00009", 0))  # never past a failure
    assert c.crd_writes == writes and p.clean_through == "a/obj-00001"


def test_checkpoint_write_failure_is_a_note_not_an_error():
    c, p, _seen = make_pass()
    c.hooks.append(lambda m, path, q, b: status(500, "etcd busy", "InternalError")
                   if m == "PATCH" and "customresourcedefinitions" in path else None)
    p.advance_checkpoint(_Page([], ["done"], "a/obj-00001", 0))
    assert "checkpoint write failed" in p.result.checkpoint_note


def test_report_progress_carries_the_counts():
    _c, p, seen = make_pass()
    p.result.rewritten, p.result.managed_fields_dropped = 3, 2
    p.report_progress()
    assert seen[-1]["rewritten"] == 3 and seen[-1]["done"] == 3 and seen[-1]["managed_fields_dropped"] == 2
    assert seen[-1]["managed_fields_only"] is False


def test_write_record_only_after_a_complete_clean_pass_and_never_in_mf_only_mode():
    c, p, _seen = make_pass()
    p.result.complete, p.result.listed, p.result.rewritten, p.result.skipped_by_checkpoint = True, 6, 4, 2
    p.write_record()
    assert p.result.record_written and validate_record(get_crd(c, NAME)).ok
    assert p.result.record["skippedByCheckpoint"] == 2
    for mutate in (lambda q: setattr(q.result, "failed", 1), lambda q: setattr(q.result, "complete", False)):
        c2, q, _seen = make_pass()
        q.result.complete = True
        mutate(q)
        q.write_record()
        assert not q.result.record_written and RECORD_ANNOTATION not in get_crd(c2, NAME).annotations
    c3, m, _seen = make_pass(mf_only=True)
    m.result.complete = True
    m.write_record()
    assert not m.result.record_written and c3.crd_writes == 0


def test_relist_skips_are_counted_and_the_record_accounts_for_every_listing():
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, 12, namespaces=("a",))
    expired = []

    def hook(method, path, q, body):  # the 3rd page's continue token has expired: relist from the start
        if method == "GET" and q.get("continue") == "a/obj-00007" and not expired:
            expired.append(1)
            return status(410, "The provided continue parameter is too old", "Expired")
    c.hooks.append(hook)
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=4, workers=2))
    assert r.relists == 1 and r.ok and r.record_written
    # 8 listed before the relist, 12 after; the 8 done before are listed again and skipped
    assert (r.listed, r.rewritten, r.unchanged, r.gone, r.skipped_by_checkpoint) == (20, 12, 0, 0, 8)
    assert validate_record(get_crd(c, NAME)).ok


def test_managed_fields_only_pass_after_a_relist_counts_each_object_once():
    from tests.unit.crdops_mf_fakes import MfCluster, entry

    c = MfCluster()
    c.add_crd(stored=("v2",))
    c.add_objects(NAME, 12, namespaces=("a",), stored="v2")
    c.set_managed_fields(NAME, "a/obj-00009", [entry("argocd", "stable.example.com/v1")])
    expired = []

    def hook(method, path, q, body):
        if method == "GET" and q.get("continue") == "a/obj-00007" and not expired:
            expired.append(1)
            return status(410, "The provided continue parameter is too old", "Expired")
    c.hooks.append(hook)
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import fix_managed_fields
    r = fix_managed_fields(c, get_crd(c, NAME), RestoreOptions(page_size=4, workers=2))
    assert (r.listed, r.rewritten, r.unchanged, r.skipped_by_checkpoint) == (20, 1, 11, 8) and r.relists == 1
    assert c.crd_writes == 0  # no checkpoint, no record in this mode

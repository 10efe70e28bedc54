# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Exceptions that are not ours stop the pass like our own; a resumed pass records the whole pass's counts."""
from __future__ import annotations

import json

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import scrub
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    CHECKPOINT_ANNOTATION, RECORD_ANNOTATION, validate_record)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, migrate_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"
TOKEN = "sha256~Zm9vYmFyYmF6cXV4cXV1eHRva2VuLXNlY3JldC12YWx1ZQ"


def cluster(n=10):
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, n, namespaces=("a",))
    return c


def test_a_worker_exception_that_is_not_ours_stops_the_pass_without_secrets():
    c = cluster()

    def refresh_fails(method, path, q, body):  # an exec credential plugin failing on token refresh
        if method == "PATCH" and path.endswith("obj-00002"):
            raise RuntimeError("exec: process returned 1: token=%s Bearer %s" % (TOKEN, TOKEN))
    c.hooks.append(refresh_fails)
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))
    assert c.object_writes == 2 and not r.complete and r.aborted_kind == "unexpected"
    # no write after the stop; the objects submitted but not written are not_attempted, and at most the one page
    # listed while the failing page was written was not submitted at all
    assert (r.rewritten, r.failed) == (2, 1) and r.listed - (r.rewritten + r.failed + r.not_attempted) in (0, 2)
    text = json.dumps(r.to_dict())
    assert TOKEN not in text and "Traceback" not in text
    assert "re-store write failed with an unexpected RuntimeError: exec: process returned 1" in r.aborted_reason
    assert "object a/obj-00002" in r.aborted_reason and not r.record_written


def test_an_exception_while_listing_stops_the_pass():
    c = cluster()

    def fail_on_second_page(method, path, query, body):
        if query.get("continue"):
            raise ValueError("bad")

    c.hooks.append(fail_on_second_page)
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))
    assert r.aborted_kind == "unexpected" and "unexpected ValueError: bad" in r.aborted_reason
    # the stop reaches the worker whatever it was doing: no write after it, every listed object accounted for
    assert r.rewritten == c.object_writes and r.rewritten + r.not_attempted == 2 and not r.complete


def test_scrub_removes_tokens_and_cuts():
    text = scrub("password: hunter2 Bearer abc.def eyJhbGciOiJI.eyJzdWIi.sig " + "x" * 400)
    assert "hunter2" not in text and "abc.def" not in text and "eyJ" not in text and len(text) <= 303


def _fail_one(c, name):
    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith(name):
            return status(422, 'admission webhook "deny" denied the request', "Invalid")
    c.hooks.append(hook)
    return hook


def test_a_resumed_pass_records_the_whole_pass_exactly_once():
    c = cluster(10)
    hook = _fail_one(c, "obj-00004")
    first = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))
    assert (first.rewritten, first.failed, first.record_written) == (9, 1, False)
    ckpt = json.loads(c.crds[NAME]["metadata"]["annotations"][CHECKPOINT_ANNOTATION])
    assert ckpt["last"] == "a/obj-00003"  # never past the failed page
    assert ckpt["counts"]["listed"] == 4 and ckpt["counts"]["rewritten"] == 4
    c.hooks.remove(hook)
    second = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))
    # this run: 10 listed, the 4 before the checkpoint skipped, obj-00004 rewritten, 5 already done by run 1
    assert (second.listed, second.skipped_by_checkpoint, second.rewritten, second.unchanged) == (10, 4, 1, 5)
    assert second.carried["rewritten"] == 4
    record = json.loads(c.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION])
    # the whole pass: the 4 of run 1 are counted once (carried), not again as skipped
    assert (record["listed"], record["rewritten"], record["unchanged"], record["gone"],
            record["skippedByCheckpoint"]) == (10, 5, 5, 0, 0)
    assert validate_record(get_crd(c, NAME)).ok


def test_three_runs_and_a_relist_still_account_for_every_listing():
    c = cluster(14)
    hook = _fail_one(c, "obj-00006")
    migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))  # checkpoint through obj-00005
    c.hooks.remove(hook)
    hook = _fail_one(c, "obj-00010")
    migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))  # checkpoint through obj-00009
    c.hooks.remove(hook)
    assert json.loads(c.crds[NAME]["metadata"]["annotations"][CHECKPOINT_ANNOTATION])["counts"] == {
        "listed": 10, "rewritten": 7, "unchanged": 3, "gone": 0, "skipped_by_checkpoint": 0, "already_current": 0,
        "managed_fields_rewritten": 0, "managed_fields_dropped": 0, "objects_with_stale_managed_fields": 0}
    expired = []

    def relist(method, path, q, body):  # run 3 relists once: the checkpoint's prefix is listed twice
        if method == "GET" and q.get("continue") == "a/obj-00011" and not expired:
            expired.append(1)
            return status(410, "The provided continue parameter is too old", "Expired")
    c.hooks.append(relist)
    third = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))
    assert third.relists == 1 and third.ok
    # listings this run: 12 before the 410 + 14 after; skipped: 10 (checkpoint) + 10 again + obj-00010/11 (written
    # before the relist); written: obj-00010 to 13, unchanged (run 1 re-stored them, run 2 failed obj-00010 only)
    assert (third.listed, third.skipped_by_checkpoint, third.rewritten, third.unchanged) == (26, 22, 0, 4)
    record = json.loads(c.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION])
    # 20 of the 26 listings are covered by the carried counts; the 2 repeats of obj-00010/11 stay skipped
    assert (record["listed"], record["rewritten"], record["unchanged"], record["skippedByCheckpoint"]) == (16, 7, 7, 2)
    assert validate_record(get_crd(c, NAME)).ok


def test_an_old_checkpoint_without_counts_counts_the_resumed_objects_as_skipped():
    c = cluster(6)
    c.crds[NAME]["metadata"]["annotations"][CHECKPOINT_ANNOTATION] = json.dumps(
        {"storageVersion": "v2", "generation": 2, "last": "a/obj-00001", "startedAt": "2026-12-01T00:00:00Z",
         "crdUid": "u-" + NAME})
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1))
    record = json.loads(c.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION])
    assert r.carried is None and (record["listed"], record["rewritten"], record["skippedByCheckpoint"]) == (6, 4, 2)
    assert validate_record(get_crd(c, NAME)).ok

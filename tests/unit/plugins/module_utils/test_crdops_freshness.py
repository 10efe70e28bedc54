# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The skip rule: objects last written after the HA barrier passed, with no stale managedFields, are not written."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import PermissionDenied
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.freshness import (
    barrier_revision, parse_revision, written_after)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.listing import ObjectRef
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import StaleFields
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (
    ProgressFile, RunOptions, run_migration)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    CHECKPOINT_ANNOTATION, RECORD_ANNOTATION, validate_record)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import (
    RestoreOptions, fix_managed_fields, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import status
from tests.unit.crdops_mf_fakes import entry, stale_cluster

NAME = "crontabs.stable.example.com"
G = "stable.example.com"


def cluster(old=4):
    return stale_cluster(old, NAME)


def add_current(c, names, mf=None):
    """Objects written now, at the storage version (as every write after the barrier is)."""
    for name in names:
        key = "a/" + name
        c.objects[NAME][key] = {"ns": "a", "name": name, "rv": c.next_rv(), "stored": c.storage_of(NAME)}
        if mf:
            c.set_managed_fields(NAME, key, mf)


def ref(rv, stale=None):
    return ObjectRef("a", "x", rv, stale)


@pytest.mark.parametrize("text, value", [("1234", 1234), ("1", 1), ("0", None), ("", None), (None, None),
                                         ("-3", None), (" 12", None), ("12a", None), ("１２", None),
                                         ("1" * 21, None)])
def test_parse_revision_takes_plain_positive_integers_only(text, value):
    assert parse_revision(text) == value


def test_written_after_needs_a_newer_revision_and_no_stale_managed_fields():
    assert written_after(ref("101"), 100)
    assert not written_after(ref("100"), 100)  # the revision read at the barrier itself: before it
    assert not written_after(ref("99"), 100)
    assert not written_after(ref("101", StaleFields((0,), 1)), 100)  # applied at an old version: needs the fix
    assert not written_after(ref("101"), None)  # no revision recorded: no skip
    assert not written_after(ref("not-a-number"), 100)


def test_barrier_revision_is_a_quorum_list_of_one_object_metadata_only():
    c = cluster()
    rv = barrier_revision(c, get_crd(c, NAME))
    assert rv == c._rv
    method, path, query = c.calls[-1]
    assert method == "GET" and path.endswith("/crontabs") and query == {"limit": "1"}  # no resourceVersion=0


def test_barrier_revision_failure_raises_and_an_opaque_one_is_none():
    c = cluster()
    c.hooks.append(lambda m, p, q, b: status(403, "forbidden", "Forbidden") if q.get("limit") == "1" else None)
    with pytest.raises(PermissionDenied):
        barrier_revision(c, get_crd(c, NAME))
    c.hooks.clear()
    c._rv = 0
    assert barrier_revision(c, get_crd(c, NAME)) is None


def test_pass_skips_objects_written_after_the_revision_and_records_them_exactly():
    c = cluster(old=5)
    revision = c._rv
    add_current(c, ["new-1", "new-2", "new-3"])
    add_current(c, ["new-ssa"], mf=[entry("kubectl", G + "/v1")])  # applied at v1 after the barrier
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=3, workers=2), barrier_revision=revision)
    assert r.ok and r.barrier_revision == revision
    assert (r.listed, r.rewritten, r.unchanged, r.already_current) == (9, 6, 0, 3)
    written = sorted(p.rsplit("/", 1)[1] for m, p, _q in c.writes() if "/crontabs/" in p)
    assert written == ["new-ssa", "obj-00000", "obj-00001", "obj-00002", "obj-00003", "obj-00004"]
    record = json.loads(c.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION])
    assert (record["listed"], record["rewritten"], record["alreadyCurrent"]) == (9, 6, 3)
    assert validate_record(get_crd(c, NAME)).ok
    assert c.stored_versions_on_disk(NAME) == ["v2"]


def test_a_record_that_hides_its_already_current_objects_does_not_validate():
    c = cluster(old=2)
    revision = c._rv
    add_current(c, ["new-1"])
    migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=5), barrier_revision=revision)
    ann = c.crds[NAME]["metadata"]["annotations"]
    data = json.loads(ann[RECORD_ANNOTATION])
    del data["alreadyCurrent"]
    ann[RECORD_ANNOTATION] = json.dumps(data)
    v = validate_record(get_crd(c, NAME))
    assert not v.ok and "accounts for 2" in v.reason and "already current 0" in v.reason


def test_check_mode_and_the_managed_fields_only_pass_ignore_the_revision():
    c = cluster(old=2)
    revision = c._rv
    add_current(c, ["new-1"])
    plan = migrate_crd(c, get_crd(c, NAME), RestoreOptions(check_mode=True), barrier_revision=revision)
    assert (plan.listed, plan.already_current, plan.barrier_revision) == (3, 0, None)
    fixed = fix_managed_fields(c, get_crd(c, NAME), RestoreOptions())
    assert (fixed.already_current, fixed.unchanged) == (0, 3)


def test_resumed_pass_carries_already_current_through_the_checkpoint():
    c = cluster(old=4)
    revision = c._rv
    # pages of 2: [obj-00000, obj-00001] [obj-00001a, obj-00002] [obj-00003 (refused), obj-00003a]
    add_current(c, ["obj-00001a", "obj-00003a"])
    c.hooks.append(lambda m, p, q, b: status(422, 'admission webhook "deny" denied the request', "Invalid")
                   if m == "PATCH" and p.endswith("obj-00003") else None)
    first = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1), barrier_revision=revision)
    assert (first.rewritten, first.failed, first.already_current, first.record_written) == (3, 1, 2, False)
    counts = json.loads(c.crds[NAME]["metadata"]["annotations"][CHECKPOINT_ANNOTATION])["counts"]
    assert (counts["listed"], counts["rewritten"], counts["already_current"]) == (4, 3, 1)  # the two clean pages
    c.hooks.clear()
    # the rerun's own barrier revision is later than everything run 1 wrote: obj-00003a is written (unchanged)
    second = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=2, workers=1), barrier_revision=c._rv)
    assert second.ok and (second.skipped_by_checkpoint, second.rewritten, second.unchanged) == (4, 1, 1)
    record = json.loads(c.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION])
    assert (record["listed"], record["rewritten"], record["unchanged"], record["alreadyCurrent"]) == (6, 4, 1, 1)
    assert validate_record(get_crd(c, NAME)).ok


def run(c, **kw):
    kw = dict(dict(drain_window=0, confirm_passes=0), **kw)  # the drain and the proof have tests of their own
    options = RunOptions(restore=RestoreOptions(page_size=2, workers=2), **kw)
    return run_migration(c, [get_crd(c, NAME)], options, {c.base_url: c}, ProgressFile(None, "t", False, print))


def test_run_reads_the_revision_after_the_barrier_and_skips_what_is_written_later():
    c = cluster(old=3)
    order = []

    def writer(method, path, q, body):  # a controller creating objects right after the revision is read
        if method == "GET" and q == {"limit": "1"} and "revision" not in order:
            order.append("revision")
            answer = c._route(method, path, q, body, None)
            add_current(c, ["new-1", "new-2"])
            return answer
        if method == "GET" and path.startswith("/apis/" + G + "/v") and path.count("/") == 3:
            order.append("discovery")
        return None
    c.hooks.append(writer)
    res = run(c)
    entry_ = res.crds[0]
    assert order[-1] == "revision" and "discovery" in order  # read once the barrier has passed
    assert (entry_["listed"], entry_["rewritten"], entry_["already_current"]) == (5, 3, 2)
    assert res.totals["already_current"] == 2 and entry_["record_written"]
    assert "already current 2" in c.events[-1]["message"]


def test_run_without_skip_current_writes_every_object():
    c = cluster(old=3)
    add_current(c, ["new-1"])
    entry_ = run(c, skip_current=False).crds[0]
    assert (entry_["rewritten"], entry_["unchanged"], entry_["already_current"], entry_["barrier_revision"]) == (
        3, 1, 0, None)

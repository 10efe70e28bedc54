# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""managedFields entries at a version other than the storage version: detection, the patch, the pass."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.managed_fields import (
    StaleFields, plan_patch, stale_entries)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.object_write import TEST_RETRIES
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import RECORD_ANNOTATION, validate_record
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import (
    RestoreOptions, fix_managed_fields, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.selection import get_crd
from tests.unit.crdops_mf_fakes import MfCluster, entry

NAME = "crontabs.stable.example.com"
G = "stable.example.com"
WEBHOOK = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://x"}}}
TEST_RV = {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}


def test_stale_entries_only_this_group_at_another_version():
    mf = [entry("a", G + "/v1"), entry("b", G + "/v2"), entry("c", "other.example.com/v1"), entry("d", "v1"),
          "junk", entry("e", G + "/v0", "Update", "status")]
    s = stale_entries(mf, G, "v2")
    assert s == StaleFields((0, 5), 6, frozenset())
    assert stale_entries([entry("b", G + "/v2")], G, "v2") is None
    assert stale_entries(None, G, "v2") is None and stale_entries({"x": 1}, G, "v2") is None


def test_update_entry_whose_rewrite_would_duplicate_a_manager_identity_is_dropped():
    # an Update manager is keyed with its apiVersion: rewriting v1 -> v2 would merge two entries, losing one set
    mf = [entry("kubectl-edit", G + "/v1", "Update"), entry("kubectl-edit", G + "/v2", "Update"),
          entry("argocd", G + "/v1", "Apply")]
    s = stale_entries(mf, G, "v2")
    assert s.indices == (0, 2) and s.collide == frozenset([0])
    plan = plan_patch("7", s, G, "v2", keep_ownership=True)
    assert plan.ops == [TEST_RV, {"op": "replace", "path": "/metadata/managedFields/2/apiVersion", "value": G + "/v2"},
                        {"op": "remove", "path": "/metadata/managedFields/0"}]
    assert (plan.rewritten, plan.dropped) == (1, 1)


def test_patch_conversion_none_rewrites_every_stale_entry_keeping_ownership():
    plan = plan_patch("7", StaleFields((0, 2), 3), G, "v2", keep_ownership=True)
    assert plan.ops == [TEST_RV,
                        {"op": "replace", "path": "/metadata/managedFields/0/apiVersion", "value": G + "/v2"},
                        {"op": "replace", "path": "/metadata/managedFields/2/apiVersion", "value": G + "/v2"}]
    assert (plan.rewritten, plan.dropped) == (2, 0)
    # rewriting all entries is still a rewrite, never the [{}] reset
    assert plan_patch("7", StaleFields((0, 1), 2), G, "v2", True).ops[1]["op"] == "replace"


def test_patch_webhook_removes_in_descending_index_order():
    plan = plan_patch("7", StaleFields((0, 2, 3), 5), G, "v2", keep_ownership=False)
    assert plan.ops == [TEST_RV] + [{"op": "remove", "path": "/metadata/managedFields/%d" % i} for i in (3, 2, 0)]
    assert (plan.rewritten, plan.dropped) == (0, 3)


@pytest.mark.parametrize("keep", [False, True])
def test_patch_dropping_all_entries_sends_a_single_empty_entry(keep):
    stale = StaleFields((0, 1), 2, frozenset([0, 1]) if keep else frozenset())
    plan = plan_patch("7", stale, G, "v2", keep_ownership=keep)
    assert plan.ops == [TEST_RV, {"op": "replace", "path": "/metadata/managedFields", "value": [{}]}]
    assert (plan.rewritten, plan.dropped) == (0, 2)


def cluster(n=9, conversion=None, stale_every=3, **kw):
    c = MfCluster()
    c.add_crd(conversion=conversion, **kw)
    c.add_objects(NAME, n, namespaces=("a", "b"), stored="v1")
    for i, key in enumerate(sorted(c.objects[NAME])):
        if i % stale_every == 0:
            c.set_managed_fields(NAME, key, [entry("team-a", G + "/v1"), entry("team-b", G + "/v1")])
        else:
            c.set_managed_fields(NAME, key, [entry("team-a", G + "/v2")])
    return c


def opts(**kw):
    kw.setdefault("page_size", 4)
    kw.setdefault("workers", 2)
    return RestoreOptions(**kw)


def test_pass_conversion_none_one_write_per_object_rewrites_entries_and_records_counts():
    c = cluster()
    r = migrate_crd(c, get_crd(c, NAME), opts())
    assert (r.listed, r.rewritten, r.unchanged, r.failed) == (9, 9, 0, 0) and r.ok
    assert (r.objects_with_stale_managed_fields, r.managed_fields_rewritten, r.managed_fields_dropped) == (3, 6, 0)
    assert c.object_writes == 9 and len(c.json_patches) == 3  # one write per object: 3 JSON patches, 6 x {}
    for key in c.objects[NAME]:
        assert all(e["apiVersion"] == G + "/v2" for e in c.mf(NAME, key))
        assert c.objects[NAME][key]["stored"] == "v2"
    assert [e["manager"] for e in c.mf(NAME, "a/obj-00000")] == ["team-a", "team-b"]  # ownership kept
    rec = json.loads(get_crd(c, NAME).annotations[RECORD_ANNOTATION])
    assert (rec["managedFieldsRewritten"], rec["managedFieldsDropped"], rec["objectsWithStaleManagedFields"]) == (6, 0, 3)
    assert validate_record(get_crd(c, NAME)).ok


def test_pass_webhook_drops_entries_and_an_objects_only_entries_become_a_reset():
    c = cluster(conversion=WEBHOOK)
    c.set_managed_fields(NAME, "b/obj-00003", [entry("team-a", G + "/v2"), entry("flux", G + "/v1")])
    r = migrate_crd(c, get_crd(c, NAME), opts(probe_conversion=False))
    assert r.ok and (r.objects_with_stale_managed_fields, r.managed_fields_rewritten, r.managed_fields_dropped) == (3, 0, 5)
    assert c.mf(NAME, "a/obj-00000") == [] and [e["manager"] for e in c.mf(NAME, "b/obj-00003")] == ["team-a"]
    reset = [ops for path, ops in c.json_patches if path.endswith("/obj-00000")][0]
    assert reset[1] == {"op": "replace", "path": "/metadata/managedFields", "value": [{}]}


def test_failed_test_rereads_the_metadata_and_retries_with_fresh_entries():
    c = cluster(n=3, stale_every=1)
    bumped = []

    def hook(method, path, q, body):  # another writer touches obj-00001 between the list and our write, once
        if method == "PATCH" and path.endswith("/obj-00001") and not bumped:
            bumped.append(1)
            o = c.objects[NAME]["b/obj-00001"]
            o["rv"] = c.next_rv()
            o["mf"] = o["mf"] + [{"manager": "kubectl", "operation": "Update", "apiVersion": G + "/v1",
                                  "fieldsType": "FieldsV1", "fieldsV1": {}}]
    c.hooks.append(hook)
    r = migrate_crd(c, get_crd(c, NAME), opts())
    assert r.ok and (r.rewritten, r.failed) == (3, 0)
    assert (r.objects_with_stale_managed_fields, r.managed_fields_rewritten) == (3, 7)  # 2 + 3 (fresh) + 2
    gets = [p for m, p, q in c.calls if m == "GET" and p.endswith("/obj-00001")]
    assert gets == ["/apis/%s/v2/namespaces/b/crontabs/obj-00001" % G]
    assert all(e["apiVersion"] == G + "/v2" for e in c.mf(NAME, "b/obj-00001"))


def test_failed_test_every_time_is_a_failure_naming_the_object():
    c = cluster(n=3, stale_every=1)

    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith("/obj-00002"):
            c.objects[NAME]["a/obj-00002"]["rv"] = c.next_rv()
    c.hooks.append(hook)
    r = migrate_crd(c, get_crd(c, NAME), opts())
    assert (r.rewritten, r.failed) == (2, 1) and not r.ok and not r.record_written
    assert len([p for p, _ops in c.json_patches if p.endswith("/obj-00002")]) == TEST_RETRIES + 1
    assert "obj-00002" in r.first_failures[0]["error"] and "changed between every read" in r.first_failures[0]["error"]


def test_check_mode_counts_what_it_would_rewrite_and_writes_nothing():
    c = cluster()
    r = migrate_crd(c, get_crd(c, NAME), opts(check_mode=True))
    assert c.writes() == [] and r.listed == 9 and r.rewritten == 0
    assert (r.objects_with_stale_managed_fields, r.managed_fields_rewritten, r.managed_fields_dropped) == (3, 6, 0)
    w = migrate_crd(c, get_crd(c, NAME), opts(check_mode=True, probe_conversion=False))
    assert w.managed_fields_rewritten == 6


def test_managed_fields_only_pass_writes_only_objects_with_stale_entries_and_no_record():
    c = cluster(stored=("v2",))
    for o in c.objects[NAME].values():
        o["stored"] = "v2"
    r = fix_managed_fields(c, get_crd(c, NAME), opts())
    assert r.managed_fields_only and r.complete and r.ok
    assert (r.listed, r.rewritten, r.unchanged, r.objects_with_stale_managed_fields, r.managed_fields_rewritten) == (
        9, 3, 6, 3, 6)
    assert c.object_writes == 3 and not r.record_written and c.crd_writes == 0
    again = fix_managed_fields(c, get_crd(c, NAME), opts())
    assert (again.rewritten, again.unchanged, again.objects_with_stale_managed_fields) == (0, 9, 0) and c.object_writes == 3


def test_managed_fields_only_check_mode_counts_and_writes_nothing():
    c = cluster(conversion=WEBHOOK)
    r = fix_managed_fields(c, get_crd(c, NAME), opts(check_mode=True))
    assert c.writes() == [] and c.dry_runs() == []
    assert (r.rewritten, r.unchanged, r.objects_with_stale_managed_fields, r.managed_fields_dropped) == (0, 0, 3, 6)


def test_a_422_of_validation_or_policy_is_not_taken_for_a_failed_test():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.object_write import is_test_failure
    from tests.unit.crdops_fakes import status

    assert is_test_failure(status(422, "the server rejected our request due to an error in our request", "Invalid"))
    assert is_test_failure(status(409, "the object has been modified", "Conflict"))
    assert not is_test_failure(status(422, 'Widget.x "a" is invalid: spec.size: Invalid value', "Invalid"))
    c = cluster(n=3, stale_every=1)
    c.hooks.append(lambda m, p, q, b: status(422, "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: no",
                                             "Invalid") if m == "PATCH" and p.endswith("/obj-00001") else None)
    r = migrate_crd(c, get_crd(c, NAME), opts())
    assert r.failed == 1 and len([m for m, p, q in c.calls if m == "PATCH" and p.endswith("/obj-00001")]) == 1
    assert "denied request: no" in r.first_failures[0]["message"]

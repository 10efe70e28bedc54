# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""managedFields entries at a version other than the storage version: detection, the patch, the pass."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import ANY_NODE
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.field_mapping import FieldMapping
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import (
    DROPPED, KEPT_UNMAPPABLE, REWRITTEN, UNTOUCHED, ManagedFieldsPolicy, plan_patch, removed_for, stale_entries)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.object_write import TEST_RETRIES
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION, validate_record
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import (
    RestoreOptions, fix_managed_fields, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_mf_fakes import MfCluster, entry

NAME = "crontabs.stable.example.com"
G = "stable.example.com"
WEBHOOK = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://x"}}}
TEST_RV = {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}


def test_stale_entries_only_this_group_at_another_version():
    mf = [entry("a", G + "/v1"), entry("b", G + "/v2"), entry("c", "other.example.com/v1"), entry("d", "v1"),
          "junk", entry("e", G + "/v0", "Update", "status")]
    s = stale_entries(mf, G, "v2")
    assert (s.indices, s.total, s.collide) == ((0, 5), 6, frozenset())
    assert [(f.position, f.action, f.manager, f.version, f.subresource) for f in s.fixes] == [
        (0, REWRITTEN, "a", "v1", ""), (5, REWRITTEN, "e", "v0", "status")]
    assert stale_entries([entry("b", G + "/v2")], G, "v2") is None
    assert stale_entries(None, G, "v2") is None and stale_entries({"x": 1}, G, "v2") is None


def test_update_entry_whose_rewrite_would_duplicate_a_manager_identity_is_dropped():
    # an Update manager is keyed with its apiVersion: rewriting v1 -> v2 would merge two entries, losing one set
    mf = [entry("kubectl-edit", G + "/v1", "Update"), entry("kubectl-edit", G + "/v2", "Update"),
          entry("argocd", G + "/v1", "Apply")]
    s = stale_entries(mf, G, "v2")
    assert s.indices == (0, 2) and s.collide == frozenset([0])
    assert s.fixes[0].action == DROPPED and s.fixes[0].dropped_paths == (".spec.kubectl-edit",)
    plan = plan_patch("7", s)
    assert plan.ops == [TEST_RV, {"op": "replace", "path": "/metadata/managedFields/2/apiVersion", "value": G + "/v2"},
                        {"op": "remove", "path": "/metadata/managedFields/0"}]
    assert (plan.rewritten, plan.dropped) == (1, 1)


def test_patch_conversion_none_rewrites_every_stale_entry_keeping_ownership():
    s = stale_entries([entry("a", G + "/v1"), entry("b", G + "/v2"), entry("c", G + "/v1")], G, "v2")
    plan = plan_patch("7", s)
    assert plan.ops == [TEST_RV,
                        {"op": "replace", "path": "/metadata/managedFields/0/apiVersion", "value": G + "/v2"},
                        {"op": "replace", "path": "/metadata/managedFields/2/apiVersion", "value": G + "/v2"}]
    assert (plan.rewritten, plan.dropped) == (2, 0)


def test_removed_versions_pick_the_entries_and_a_version_kept_served_is_untouched():
    mf = [entry("argo", G + "/v1"), entry("flux", G + "/v0"), entry("kubectl", G + "/v2")]
    policy = ManagedFieldsPolicy(G, "v2", "None", removed_for(NAME, ("%s/v0" % NAME, "other.example.com/v1")))
    s = policy.classify(mf)
    assert s.indices == (1,) and [(f.manager, f.action) for f in s.fixes] == [("argo", UNTOUCHED), ("flux", REWRITTEN)]
    assert plan_patch("7", s).ops[1:] == [
        {"op": "replace", "path": "/metadata/managedFields/1/apiVersion", "value": G + "/v2"}]
    assert removed_for(NAME, None) is None and removed_for(NAME, ("v0",)) == frozenset(["v0"])
    assert removed_for(NAME, ()) == frozenset()


def test_webhook_without_removed_versions_leaves_every_entry_untouched():
    s = ManagedFieldsPolicy(G, "v2", "Webhook").classify([entry("argo", G + "/v1"), entry("flux", G + "/v1")])
    assert s.indices == () and [f.action for f in s.kept] == [UNTOUCHED, UNTOUCHED]


def test_webhook_entry_with_nothing_mappable_is_kept_never_stripped():
    nothing = FieldMapping("v1", "v2", ANY_NODE, "exact", {(("f", "spec"), ("f", "argo")): None})
    policy = ManagedFieldsPolicy(G, "v2", "Webhook", frozenset(["v1"]), lambda v: nothing)
    s = policy.classify([entry("argo", G + "/v1")])
    assert s.indices == () and s.fixes[0].action == KEPT_UNMAPPABLE
    assert s.fixes[0].dropped_paths == (".spec.argo",) and "no owned path maps" in s.fixes[0].note


def test_storage_version_in_removed_versions_is_refused_naming_it():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError

    c = cluster(n=1)
    with pytest.raises(BadInputError, match="v2, the storage version"):
        migrate_crd(c, get_crd(c, NAME), opts(removed_versions=("v2",)))
    assert c.writes() == []


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


def test_pass_webhook_without_removed_versions_touches_no_entry_and_reports_them():
    c = cluster(conversion=WEBHOOK)
    r = migrate_crd(c, get_crd(c, NAME), opts(probe_conversion=False))
    assert r.ok and (r.objects_with_stale_managed_fields, r.managed_fields_rewritten, r.managed_fields_dropped) == (0, 0, 0)
    assert c.json_patches == [] and [e["manager"] for e in c.mf(NAME, "a/obj-00000")] == ["team-a", "team-b"]
    d = r.to_dict()
    assert d["managed_fields_untouched"] == 6 and d["managed_fields_translated"] == 0
    assert [(m["manager"], m["untouched"], m["objects"]) for m in d["managed_fields_managers"]] == [
        ("team-a", 3, 3), ("team-b", 3, 3)]


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
    c = cluster()
    r = fix_managed_fields(c, get_crd(c, NAME), opts(check_mode=True))
    assert c.writes() == [] and c.dry_runs() == []
    assert (r.rewritten, r.unchanged, r.objects_with_stale_managed_fields, r.managed_fields_rewritten) == (0, 0, 3, 6)


def test_managed_fields_only_pass_keeps_a_served_version_untouched_on_every_rerun():
    c = cluster(stored=("v2",))
    for o in c.objects[NAME].values():
        o["stored"] = "v2"
    for _run in range(2):
        r = fix_managed_fields(c, get_crd(c, NAME), opts(removed_versions=("v0",)))
        assert r.ok and (r.rewritten, r.unchanged, r.objects_with_stale_managed_fields) == (0, 9, 0)
        assert r.to_dict()["managed_fields_untouched"] == 6
    assert c.object_writes == 0 and c.mf(NAME, "a/obj-00000")[0]["apiVersion"] == G + "/v1"


def test_a_422_of_validation_or_policy_is_not_taken_for_a_failed_test():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.object_write import is_test_failure
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


def applied(manager, version, spec_fields, time="2026-12-01T10:00:00Z"):
    e = entry(manager, G + "/" + version)
    e["fieldsV1"] = {"f:spec": dict(("f:" + f, {}) for f in spec_fields)}
    e["time"] = time
    return e


def test_pass_webhook_translates_removed_version_entries_and_keeps_what_maps_nothing(monkeypatch):
    """Through the mapping source: the CRD read, made-up objects sent to the (here in-process) webhook."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership import webhook_review
    from tests.controlplane.webhook import convert_object

    sent = []

    def convert(self, objects, desired):  # the test webhook's conversion, its v1alpha1 -> v1beta1 as v1 -> v2
        sent.append(len(objects))
        assert desired == G + "/v2" and all(o["apiVersion"] == G + "/v1" for o in objects)
        return [dict(convert_object(dict(o, apiVersion=G + "/v1alpha1"), G + "/v1beta1"), apiVersion=desired)
                for o in objects]

    monkeypatch.setattr(webhook_review.WebhookCaller, "convert", convert)
    c = MfCluster()
    c.add_crd(conversion=WEBHOOK, stored=("v1", "v2"),
              versions=(("v0", True, False), ("v1", True, False), ("v2", True, True)))
    c.add_objects(NAME, 3, namespaces=("a",), stored="v1")
    keys = sorted(c.objects[NAME])
    c.set_managed_fields(NAME, keys[0], [applied("flux", "v1", ["size", "color"]), applied("argo", "v0", ["size"])])
    c.set_managed_fields(NAME, keys[1], [applied("flux", "v1", ["endpoint"])])  # a split field: nothing maps
    c.set_managed_fields(NAME, keys[2], [applied("kubectl", "v2", ["size"])])
    c.set_spec(NAME, keys[0], {"replicas": 1, "color": "red"})  # as read at v2: where the translated entry points
    r = migrate_crd(c, get_crd(c, NAME), opts(probe_conversion=False, removed_versions=(NAME + "/v1",)))
    assert r.ok and r.rewritten == 3 and sent  # the mapping was learnt by asking the webhook
    first = c.mf(NAME, keys[0])
    assert first[0] == dict(applied("flux", "v2", ["color"]), fieldsV1={"f:spec": {"f:replicas": {}, "f:color": {}}})
    assert first[1] == applied("argo", "v0", ["size"])  # v0 stays served: untouched
    assert c.mf(NAME, keys[1]) == [applied("flux", "v1", ["endpoint"])]  # kept, never stripped
    d = r.to_dict()
    assert (d["managed_fields_translated"], d["managed_fields_unmappable"], d["managed_fields_untouched"]) == (1, 1, 1)
    assert d["versions_not_removable"] == ["v1"]
    assert d["unmappable_entries"][0]["examples"] == [keys[1]] and d["unmappable_entries"][0]["manager"] == "flux"
    flux = [m for m in d["managed_fields_managers"] if m["manager"] == "flux"][0]
    assert (flux["translated"], flux["kept_unmappable"], flux["paths_dropped"]) == (1, 1, [])
    assert d["field_mappings"][0]["from_version"] == "v1" and d["field_mappings"][0]["method"] == "exact"


def test_with_removed_versions_a_version_no_longer_served_is_fixed_too():
    policy = ManagedFieldsPolicy(G, "v2", "None", frozenset(["v1"]), served=frozenset(["v0", "v2"]))
    s = policy.classify([entry("old", G + "/v-gone"), entry("kept", G + "/v0"), entry("next", G + "/v1")])
    assert [(f.manager, f.action) for f in s.fixes] == [("old", REWRITTEN), ("kept", UNTOUCHED), ("next", REWRITTEN)]


def weighed_pass_cluster():
    """Four objects stored at v1 under a webhook, each with an applier's entry at v1 for `spec: {size, weight}`;
    as read at v2 the first three have `mass.value` (they set `unit`), the fourth `legacyWeight` (it did not)."""
    c = MfCluster()
    c.add_crd(conversion=WEBHOOK, stored=("v1", "v2"))
    c.add_objects(NAME, 4, namespaces=("a",), stored="v1")
    keys = sorted(c.objects[NAME])
    for i, key in enumerate(keys):
        c.set_managed_fields(NAME, key, [dict(applied("deployer", "v1", ["size", "weight"]))])
        c.set_spec(NAME, key, {"replicas": 1, "legacyWeight": 9} if i == 3 else
                   {"replicas": 1, "mass": {"value": 9, "unit": "kg"}})
    return c, keys


def weight_policy():
    """The exact mapping of the test webhook's conversion (tests/controlplane/webhook.py) from v1 to v2, learnt from
    made-up objects that set `unit`: `weight -> mass.value`, true only for objects that set it."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import parse_schema
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact
    from tests.controlplane.webhook import convert_object, widget_schemas

    schemas = widget_schemas(presence_dependent=True)
    learnt = learn_exact(lambda objs: [convert_object(dict(o, apiVersion=G + "/v1alpha1"), G + "/v1beta1")
                                       for o in objs],
                         parse_schema(schemas["v1alpha1"]), parse_schema(schemas["v1beta1"]), "v1", "v2")
    return ManagedFieldsPolicy(G, "v2", "Webhook", frozenset(["v1"]), lambda v: learnt, frozenset(["v1", "v2"]))


def test_pass_translates_an_entry_only_where_its_object_has_every_path_it_would_own():
    c, keys = weighed_pass_cluster()
    r = migrate_crd(c, get_crd(c, NAME), opts(probe_conversion=False, removed_versions=(NAME + "/v1",)),
                    policy=(weight_policy(), None))
    assert r.ok and r.rewritten == 4
    for key in keys[:3]:
        (translated,) = c.mf(NAME, key)
        assert translated["apiVersion"] == G + "/v2"
        assert translated["fieldsV1"] == {"f:spec": {"f:replicas": {}, "f:mass": {"f:value": {}}}}
    # the fourth object has legacyWeight, not mass.value: its entry stays as the apiserver left it
    assert c.mf(NAME, keys[3]) == [applied("deployer", "v1", ["size", "weight"])]
    d = r.to_dict()
    assert (d["managed_fields_translated"], d["managed_fields_not_in_object"]) == (3, 1)
    assert d["entries_not_in_object"] == [dict(version="v1", manager="deployer", operation="Apply", subresource=None,
                                               objects=1, examples=[keys[3]], paths_missing=[".spec.mass.value"])]
    assert d["versions_not_removable"] == ["v1"]
    # the listing brought the objects whole, so no object was read on its own
    lists = [a for m, p, a in c.accepts if p.endswith("/crontabs")]
    assert lists and all("as=PartialObjectMetadata" not in a for a in lists), lists
    assert not [p for m, p, q in c.calls if m == "GET" and p.startswith("/apis/%s/" % G) and "/crontabs/" in p]


def test_the_reread_after_a_failed_test_is_whole_and_holds_the_translation_against_it():
    c, keys = weighed_pass_cluster()
    moved = []

    def hook(method, path, q, body):  # between the list and the write, another client drops the third's unit
        if method == "PATCH" and path.endswith("/" + keys[2].split("/")[1]) and not moved:
            moved.append(1)
            o = c.objects[NAME][keys[2]]
            o["rv"] = c.next_rv()
            o["spec"] = {"replicas": 1, "legacyWeight": 9}
    c.hooks.append(hook)
    r = migrate_crd(c, get_crd(c, NAME), opts(probe_conversion=False, removed_versions=(NAME + "/v1",)),
                    policy=(weight_policy(), None))
    assert r.ok and moved
    assert c.mf(NAME, keys[2]) == [applied("deployer", "v1", ["size", "weight"])]  # the fresh read decided
    d = r.to_dict()
    assert (d["managed_fields_translated"], d["managed_fields_not_in_object"]) == (2, 2)  # counted once each
    assert sorted(d["entries_not_in_object"][0]["examples"]) == [keys[2], keys[3]]  # workers finish in any order
    rereads = [a for m, p, a in c.accepts if p.endswith("/" + keys[2].split("/")[1])]
    assert rereads and all("as=PartialObjectMetadata" not in a for a in rereads), rereads

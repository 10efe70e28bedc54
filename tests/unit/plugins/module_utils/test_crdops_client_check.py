# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.client_check import (
    Sampler, check_crd, post_outcome, stale_entries)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.fieldsv1 import (
    apply_configuration, extract_owned)
from tests.unit.plugins.module_utils.clientcheck_fake import GROUP, ClientCheckFake, entry

OBJ = {
    "apiVersion": "g/v1", "kind": "K",
    "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "7", "uid": "u",
                 "labels": {"app": "x", "team": "y"}, "managedFields": [{"manager": "m"}]},
    "spec": {"size": 3, "color": "blue", "nested": {"a": 1, "b": 2},
             "ports": [{"name": "http", "port": 80, "proto": "TCP"}, {"name": "dns", "port": 53}],
             "tags": ["a", "b", "c"], "atomic": [1, 2]},
}


def test_extract_only_the_owned_paths():
    fields = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
              "f:spec": {".": {}, "f:size": {}, "f:nested": {"f:b": {}}}}
    assert extract_owned(OBJ, fields) == {"metadata": {"labels": {"app": "x"}},
                                          "spec": {"size": 3, "nested": {"b": 2}}}


def test_extract_list_map_set_and_index_items_keep_keys_and_order():
    fields = {"f:spec": {"f:ports": {'k:{"name":"dns"}': {".": {}, "f:port": {}},
                                     'k:{"name":"http"}': {"f:proto": {}}},
                         "f:tags": {'v:"c"': {}, 'v:"a"': {}, 'v:"zz"': {}},
                         "f:atomic": {"i:1": {}}}}
    assert extract_owned(OBJ, fields)["spec"] == {
        "ports": [{"name": "http", "proto": "TCP"}, {"name": "dns", "port": 53}],  # object order, keys sent
        "tags": ["a", "c"],  # "zz" is no longer in the object: skipped
        "atomic": [2]}


def test_member_map_is_taken_whole_and_missing_fields_skipped():
    assert extract_owned(OBJ, {"f:spec": {"f:nested": {}, "f:gone": {}, "f:color": {".": {}}}}) == {
        "spec": {"nested": {"a": 1, "b": 2}, "color": "blue"}}


def test_apply_configuration_adds_identity_and_never_server_fields():
    config = apply_configuration(OBJ, {"f:spec": {"f:size": {}}}, "g/v2", "K")
    assert config == {"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "a", "namespace": "ns"},
                      "spec": {"size": 3}}
    cluster_scoped = dict(OBJ, metadata={"name": "c", "managedFields": []})
    assert apply_configuration(cluster_scoped, {}, "g/v2", "K")["metadata"] == {"name": "c"}


def _fake():
    fake = ClientCheckFake()
    size = {"f:spec": {"f:size": {}}}
    color = {"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:color": {}}}
    fake.add("a", "ok-1", {"size": 1, "color": "red"}, [entry("argocd", "v2", size), entry("flux", "v2", color)],
             labels={"team": "t"})
    fake.add("a", "stale-1", {"size": 2}, [entry("argocd", "v1alpha1", size)])
    fake.add("b", "update-only", {"size": 3}, [entry("kubectl-edit", "v2", size, operation="Update")])
    fake.add("b", "served-old", {"size": 4}, [entry("flux", "v1", size)])
    return fake


def test_check_crd_applies_each_manager_fields_dry_run_and_names_the_failure():
    fake = _fake()
    crd = Crd.from_api(fake.crd)
    result = check_crd(fake, crd, sample=10, check_all_below=50)
    assert (result.listed, result.checked_objects, result.applies, result.probes) == (4, 4, 4, 1)
    assert result.stale_objects == 1 and result.stale_examples == ["a/stale-1"]
    assert sorted(result.managers) == ["argocd", "flux"]
    assert not result.ok
    [failure] = result.failures
    assert (failure.obj, failure.manager, failure.operation, failure.status) == ("a/stale-1", "argocd", "Apply", 500)
    assert "request to convert CR to an invalid group/version: %s/v1alpha1" % GROUP in failure.message
    assert "a/stale-1" in result.summary() and "HTTP 500" in result.summary()
    for _path, query, body in fake.applies:
        assert query == {"dryRun": "All", "fieldManager": query["fieldManager"]}  # never force, always dry-run
        assert "managedFields" not in body["metadata"] and "resourceVersion" not in body["metadata"]
    by_manager = {(p.split("/")[-1], q["fieldManager"]): (p, b) for p, q, b in fake.applies}
    path, body = by_manager[("ok-1", "flux")]
    # flux's own fields, one value it owns changed (spec first): no force, so only its owner may do that
    assert body == {"apiVersion": GROUP + "/v2", "kind": "Crontab", "metadata": {"name": "ok-1", "namespace": "a",
                    "labels": {"team": "t"}}, "spec": {"color": "red-crdops"}}
    # v1 is defined but not served: applied at the storage version; probe for the Update-only object
    assert by_manager[("served-old", "flux")][0] == "/apis/%s/v2/namespaces/b/crontabs/served-old" % GROUP
    probe = by_manager[("update-only", "crdops-client-check")][1]
    assert probe["metadata"] == {"name": "update-only", "namespace": "b"}
    assert not [c for c in fake.calls if c[0] not in ("GET", "PATCH")]  # nothing but reads and dry-runs


def test_apply_entry_at_a_served_version_is_applied_there():
    fake = ClientCheckFake(versions=(("v1", True, False), ("v2", True, True)))
    fake.add("a", "x", {"size": 1}, [entry("argocd", "v1", {"f:spec": {"f:size": {}}})])
    result = check_crd(fake, Crd.from_api(fake.crd))
    assert result.ok and result.applies == 1 and result.rivals == 1
    for path, _query, body in fake.applies:  # the owner's change and the new manager's: both at v1
        assert path == "/apis/%s/v1/namespaces/a/crontabs/x" % GROUP and body["apiVersion"] == GROUP + "/v1"


def test_status_subresource_entry_goes_to_status():
    fake = ClientCheckFake()
    fake.add("a", "x", {"size": 1}, [entry("ctrl", "v2", {"f:spec": {"f:size": {}}}, subresource="status")])
    check_crd(fake, Crd.from_api(fake.crd))
    assert fake.applies[0][0].endswith("/crontabs/x/status")


def test_object_deleted_after_listing_counts_gone():
    fake = _fake()
    fake.deleted_before_get.add(("a", "ok-1"))
    result = check_crd(fake, Crd.from_api(fake.crd))
    assert result.gone == 1 and result.applies == 2  # stale-1 and served-old; ok-1 gone


def test_sampler_prefers_stale_then_new_managers_then_first():
    s = Sampler(sample=3, check_all_below=2)
    metas = [{"name": "o%d" % i, "managedFields": [{"manager": "a", "operation": "Apply", "apiVersion": "g/v2"}]}
             for i in range(10)]
    metas[7]["managedFields"] = [{"manager": "b", "operation": "Apply", "apiVersion": "g/v2"}]
    for i, m in enumerate(metas):
        s.offer(m, is_stale=(i == 9))
    assert [m["name"] for m in s.chosen()] == ["o9", "o0", "o7"]
    small = Sampler(sample=1, check_all_below=5)
    for m in metas[:5]:
        small.offer(m, False)
    assert len(small.chosen()) == 5  # every object of a small CRD


def test_stale_entries_only_for_undefined_versions_of_this_group():
    crd = Crd.from_api(ClientCheckFake().crd)
    meta = {"managedFields": [{"apiVersion": GROUP + "/v1"}, {"apiVersion": GROUP + "/v0"},
                              {"apiVersion": "other.io/v0"}, {"apiVersion": "v1"}]}
    assert [e["apiVersion"] for e in stale_entries(meta, crd)] == [GROUP + "/v0"]


def test_outcome_event_is_a_warning_naming_the_object():
    fake = _fake()
    crd = Crd.from_api(fake.crd)
    assert post_outcome(fake, crd, check_crd(fake, crd)) is None
    [event] = fake.events
    assert event["type"] == "Warning" and event["reason"] == "ClientCheckFailed" and "a/stale-1" in event["message"]


def test_only_a_few_alike_stale_objects_are_sent_a_dry_run_all_are_counted():
    fake = ClientCheckFake()
    for i in range(6):
        fake.add("a", "s-%d" % i, {"size": i}, [entry("argocd", "v1alpha1", {"f:spec": {"f:size": {}}})])
    fake.add("a", "t-0", {"size": 9}, [entry("flux", "v1alpha1", {"f:spec": {"f:size": {}}})])  # a new kind
    result = check_crd(fake, Crd.from_api(fake.crd))
    assert (result.stale_objects, result.stale_not_applied, result.checked_objects) == (7, 3, 4)
    assert [f.obj for f in result.failures] == ["a/s-0", "a/s-1", "a/s-2", "a/t-0"]
    assert result.to_dict()["stale_not_applied"] == 3 and not result.ok


def test_each_apply_manager_changes_a_value_it_owns_and_a_new_manager_conflicts_naming_it():
    fake = _fake()
    result = check_crd(fake, Crd.from_api(fake.crd))
    sent = [(p.split("/")[-1], q["fieldManager"], b.get("spec"), (b["metadata"].get("labels"))) for p, q, b in fake.applies]
    assert ("ok-1", "argocd", {"size": 2}, None) in sent and ("ok-1", "flux", {"color": "red-crdops"}, {"team": "t"}) in sent
    # the new manager sends only the changed value (and the identity)
    assert ("ok-1", "crdops-client-check-rival", {"size": 2}, None) in sent
    assert ("ok-1", "crdops-client-check-rival", {"color": "red-crdops"}, None) in sent
    tallies = {(t["manager"], t["operation"]): t for t in result.to_dict()["by_manager"]}
    assert tallies[("argocd", "Apply")] == {"manager": "argocd", "operation": "Apply", "objects": 2, "changed": 1,
                                            "unchanged_only": 0, "conflicts_named": 1, "failed": 1}
    assert tallies[("flux", "Apply")]["changed"] == 2 and tallies[("flux", "Apply")]["conflicts_named"] == 2
    assert result.rivals == 3 and result.patches == 1
    # the Update manager: a dry-run merge patch under its name, changing its value
    [(path, query, patch)] = fake.patches
    assert path.endswith("/crontabs/update-only") and query == {"dryRun": "All", "fieldManager": "kubectl-edit"}
    assert patch == {"spec": {"size": 4}} and tallies[("kubectl-edit", "Update")]["changed"] == 1


def test_lost_ownership_fails_naming_the_manager_and_the_path():
    # the owner's change conflicts with before-first-apply (what an object stripped of managedFields shows),
    # and elsewhere nobody is credited: a new manager's change goes through
    fake = ClientCheckFake()
    size = {"f:spec": {"f:size": {}}}
    fake.add("a", "stripped", {"size": 1}, [entry("flux", "v2", size), entry("before-first-apply", "v2", size, "Update")])
    fake.add("a", "unowned", {"size": 2}, [entry("argocd", "v2", size)])
    fake.ownership_ignored.add(("a", "unowned"))
    result = check_crd(fake, Crd.from_api(fake.crd))
    failures = {(f.obj, f.manager, f.operation): f for f in result.failures}
    flux = failures[("a/stripped", "flux", "Apply")]
    assert flux.status == 409 and 'conflict with "before-first-apply": .spec.size' in flux.message
    argo = failures[("a/unowned", "argocd", "ownership")]
    assert "a new manager changing .spec.size without force succeeded" in argo.message and "argocd" in argo.message
    assert not result.ok and len(result.failures) == 2


def test_a_value_the_schema_refuses_is_skipped_for_another_owned_value():
    fake = ClientCheckFake()
    fake.add("a", "x", {"size": 1, "color": "red"}, [entry("argocd", "v2", {"f:spec": {"f:size": {}, "f:color": {}}})])
    fake.schema_refuses.append(2)  # size 1 -> 2 is refused; color is changed instead
    result = check_crd(fake, Crd.from_api(fake.crd))
    assert result.ok and [t.changed for t in result.by_manager.values()] == [1]
    assert [b["spec"] for p, q, b in fake.applies if q["fieldManager"] == "crdops-client-check-rival"] == [
        {"color": "red-crdops"}]

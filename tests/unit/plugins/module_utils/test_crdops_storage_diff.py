# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""storage_diff / field_paths: the raw value from etcd against the API's view of the same object.

The real proof (defaults persisted, fields pruned, on gateway-api CRDs) is
tests/integration/test_storage_diff.py; here: path notation, skips and races a real server does not
produce on cue.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import RawValue
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.field_paths import diff_values
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.storage_diff import (
    NO_ETCD_REASON, diff_crd, object_ref, storage_diff_of)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import ApiResponse

from tests.unit.crdops_fakes import make_crd

PREFIX = "/registry/stable.example.com/crontabs/"


# --- paths ------------------------------------------------------------------------------------------

def test_a_defaulted_status_reads_as_the_fields_it_brings_and_a_list_is_one_path():
    stored = {"apiVersion": "g/v1beta1", "spec": {"a": 1}}
    served = {"apiVersion": "g/v1", "spec": {"a": 1},
              "status": {"conditions": [{"type": "Accepted"}, {"type": "Programmed"}], "phase": "Pending"}}
    assert diff_values(stored, served) == ({".status.conditions", ".status.phase"}, set(), set())


def test_fields_pruned_inside_list_items_use_brackets_without_index():
    stored = {"spec": {"listeners": [{"port": 80, "legacy": {"x": 1}}, {"port": 81, "legacy": {"x": 2}}]}}
    served = {"spec": {"listeners": [{"port": 80}, {"port": 81}]}}
    assert diff_values(stored, served) == (set(), {".spec.listeners[].legacy.x"}, set())


def test_changed_values_type_changes_and_list_lengths():
    stored = {"spec": {"n": 1, "flag": 1, "ports": [1, 2], "f": 1}}
    served = {"spec": {"n": 2, "flag": True, "ports": [1], "f": 1.0}}
    assert diff_values(stored, served) == (set(), set(), {".spec.n", ".spec.flag", ".spec.ports"})


def test_server_fields_are_ignored_and_odd_keys_are_quoted():
    stored = {"apiVersion": "g/v1",
              "metadata": {"name": "a", "generation": 1, "managedFields": [{"m": 1}], "annotations": {"example.com/owner": "x"}}}
    served = {"apiVersion": "g/v2",
              "metadata": {"name": "a", "generation": 2, "resourceVersion": "9", "creationTimestamp": "t", "annotations": {}}}
    assert diff_values(stored, served) == (set(), {'.metadata.annotations["example.com/owner"]'}, set())


def test_an_empty_map_added_is_reported_as_itself():
    assert diff_values({}, {"status": {}}) == ({".status"}, set(), set())


# --- the comparison, with a fake etcd and a fake API ---------------------------------------------------

class FakeSampler:
    def __init__(self, values, rereads=None):
        self.values = values
        self.rereads = dict(rereads or {})  # key -> list of RawValue returned by successive get()
        self.gets = []

    def count(self, prefix):
        return len(self.values) + 5  # keys beyond the sample exist

    def sample(self, prefix, limit):
        return 77, self.values[:limit]

    def get(self, key):
        self.gets.append(key)
        queue = self.rereads.get(key) or []
        return queue.pop(0) if queue else None


class FakeApi:
    """GET and the dry-run PATCH of a path answer the same view unless ``patch`` overrides it."""
    cluster_label = "test-cluster"

    def __init__(self, views, patch=None):
        self.views = views  # path -> (status, body)
        self.patch = patch or {}  # path -> (status, body) for PATCH only
        self.paths = []
        self.calls = []

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        self.paths.append(path)
        self.calls.append((method, path, tuple(query or ()), body))
        missing = (404, {"kind": "Status", "reason": "NotFound", "details": {"name": "?"}})
        status, obj = (self.patch.get(path) if method == "PATCH" and path in self.patch else self.views.get(path, missing))
        return ApiResponse(status, {}, json.dumps(obj).encode())


def raw(name, version, rv, **fields):
    obj = dict({"apiVersion": "stable.example.com/%s" % version, "kind": "CronTab",
                "metadata": {"name": name, "namespace": "default"}}, **fields)
    return RawValue(key=PREFIX + "default/" + name, mod_revision=rv, value=json.dumps(obj).encode())


def view(name, version, rv, **fields):
    obj = dict({"apiVersion": "stable.example.com/%s" % version, "kind": "CronTab",
                "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)}}, **fields)
    return 200, obj


def path(name, version="v2"):
    return "/apis/stable.example.com/%s/namespaces/default/crontabs/%s" % (version, name)


def crd(**kw):
    return Crd.from_api(make_crd(**kw))


def test_none_conversion_compares_at_the_storage_version_and_counts_per_object():
    values = [raw("a", "v1", 10, spec={"x": 1, "old": 1}), raw("b", "v2", 11, spec={"x": 1}),
              raw("c", "v1", 12, spec={"x": 1})]
    api = FakeApi({path("a"): view("a", "v2", 10, spec={"x": 1}, status={"ok": False}),
                   path("b"): view("b", "v2", 11, spec={"x": 1}, status={"ok": False}),
                   path("c"): view("c", "v2", 12, spec={"x": 1})})
    d = diff_crd(api, FakeSampler(values), crd(), "/registry", sample=20).as_dict()
    assert (d["keys"], d["sampled"], d["compared"], d["would_change"], d["at_other_version"]) == (8, 3, 3, 2, 2)
    assert d["added"] == {".status.ok": 2}
    assert d["removed"] == {".spec.old": 1}
    assert d["changed"] == {}
    assert d["examples"] == {".status.ok": ["default/a", "default/b"], ".spec.old": ["default/a"]}
    assert d["checked"] is True and d["revision"] == 77 and d["skipped"] == {}
    # and the CRD once, to judge the removal by its schema (none here: a loss)
    assert [p for p in api.paths if "/customresourcedefinitions/" not in p] == [path("a"), path("b"), path("c")]


def test_the_sample_size_bounds_the_reads():
    values = [raw(n, "v2", 10 + i) for i, n in enumerate("abcde")]
    api = FakeApi({path(n): view(n, "v2", 10 + i) for i, n in enumerate("abcde")})
    d = diff_crd(api, FakeSampler(values), crd(), "/registry", sample=2)
    assert (d.sampled, d.compared, d.would_change) == (2, 2, 0)


def test_an_object_written_between_the_reads_is_read_again_from_etcd():
    values = [raw("a", "v1", 10, spec={"old": 1})]
    again = raw("a", "v2", 15, spec={"new": 1})
    api = FakeApi({path("a"): view("a", "v2", 15, spec={"new": 1}, status={"s": 1})})
    sampler = FakeSampler(values, rereads={values[0].key: [again]})
    d = diff_crd(api, sampler, crd(), "/registry")
    assert sampler.gets == [values[0].key]
    assert (d.compared, d.added, d.removed, d.at_other_version) == (1, {".status.s": 1}, {}, 0)


def test_an_object_that_keeps_changing_is_skipped_not_guessed():
    values = [raw("a", "v1", 10)]
    api = FakeApi({path("a"): view("a", "v2", 99)})
    sampler = FakeSampler(values, rereads={values[0].key: [raw("a", "v1", 20), raw("a", "v1", 30)]})
    d = diff_crd(api, sampler, crd(), "/registry")
    assert (d.compared, d.skipped) == (0, {"changed_meanwhile": 1})


def test_deleted_encrypted_and_undecodable_values_are_counted_as_skipped():
    values = [raw("gone", "v2", 10),
              RawValue(PREFIX + "default/enc", 11, b"k8s:enc:aescbc:v1:key1:xxxx"),
              RawValue(PREFIX + "default/junk", 12, b"not json")]
    api = FakeApi({path("gone"): (404, {"kind": "Status", "reason": "NotFound", "details": {"name": "gone"}})})
    d = diff_crd(api, FakeSampler(values), crd(), "/registry")
    assert (d.sampled, d.compared, d.skipped) == (3, 0, {"gone": 1, "encrypted": 1, "not_json": 1})


def test_a_404_that_does_not_name_the_object_is_an_error_naming_cluster_crd_and_object():
    api = FakeApi({path("a"): (404, {"kind": "Status", "message": "404 page not found"})})
    with pytest.raises(CrdOpsError) as err:
        diff_crd(api, FakeSampler([raw("a", "v2", 10)]), crd(), "/registry")
    text = str(err.value)
    assert "cluster test-cluster" in text and "CRD crontabs.stable.example.com" in text and "default/a" in text


def _webhook_crd():
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}
    return crd(versions=(("v0", False, False), ("v1", True, False), ("v2", True, True)), conversion=hook)


def test_webhook_objects_at_another_served_version_are_compared_at_their_own_version():
    values = [raw("a", "v1", 10, spec={"oldName": 1, "gone": 2})]
    api = FakeApi({path("a", "v1"): view("a", "v1", 10, spec={"oldName": 1})})
    d = diff_crd(api, FakeSampler(values), _webhook_crd(), "/registry", converter=lambda *a: pytest.fail("asked"))
    assert [p for p in api.paths if "/customresourcedefinitions/" not in p] == [path("a", "v1")]
    assert (d.compared, d.compared_at_stored_version, d.removed) == (1, 1, {".spec.gone": 1})


def test_objects_at_a_version_not_served_are_converted_back_by_the_webhook_and_compared():
    """The storage version's view (the dry-run) goes back to v0 through the webhook: v0's `x` is `y` at v2, and
    `lost` is not kept by the storage version; the webhook's `status: {}` is not a difference."""
    asked = []

    def webhook(c, objects, desired):
        asked.append((desired, objects))
        return [dict(o, apiVersion=desired, spec={"x": o["spec"]["y"]}, status={}) for o in objects]

    values = [raw("b", "v0", 11, spec={"x": 1, "lost": 2})]
    api = FakeApi({path("b"): view("b", "v2", 11, spec={"y": 1})})
    d = diff_crd(api, FakeSampler(values), _webhook_crd(), "/registry", converter=webhook)
    assert [(m, p, q) for m, p, q, _b in api.calls if "/customresourcedefinitions/" not in p] == [
        ("PATCH", path("b"), (("dryRun", "All"),))]
    assert [a[0] for a in asked] == ["stable.example.com/v0"]
    assert (d.compared, d.compared_by_conversion_review, d.skipped) == (1, 1, {})
    assert (d.removed, d.added, d.changed) == ({".spec.lost": 1}, {}, {})
    assert d.unverified is None


def _with_v0_schema(crd_obj, spec_props):
    v0 = crd_obj["spec"]["versions"][0]
    v0["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": spec_props}}}}
    return crd_obj


def test_a_zero_value_the_webhook_leaves_out_is_normalised_and_a_true_one_or_an_undeclared_field_is_lost():
    """cert-manager's `isCA: false` (Go `omitempty`) comes back from the webhook without `isCA`: the same value when
    read, so not a loss; `isCA: true` dropped would be, and so is `extra: 0`, a field v0's schema does not declare."""
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}
    crd_obj = _with_v0_schema(make_crd(versions=(("v0", False, False), ("v1", True, False), ("v2", True, True)),
                                       conversion=hook), {"isCA": {"type": "boolean"}, "csr": {"type": "string"}})

    def omitempty(c, objects, desired):
        return [dict(o, apiVersion=desired, spec={"csr": o["spec"]["csr"]}) for o in objects]

    values = [raw("a", "v0", 11, spec={"csr": "x", "isCA": False}), raw("b", "v0", 12, spec={"csr": "y", "isCA": True}),
              raw("c", "v0", 13, spec={"csr": "z", "extra": 0})]
    objects = (("a", 11, "x"), ("b", 12, "y"), ("c", 13, "z"))
    api = FakeApi({path(n): view(n, "v2", rv, spec={"csr": c}) for n, rv, c in objects}
                  | {"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com":
                     (200, crd_obj)})
    d = diff_crd(api, FakeSampler(values), Crd.from_api(crd_obj), "/registry", converter=omitempty)
    assert d.normalised == {".spec.isCA": 1}
    assert d.removed == {".spec.isCA": 1, ".spec.extra": 1}
    assert d.would_change == 3


def test_a_zero_value_with_a_schema_default_is_lost_and_so_is_every_removal_when_the_crd_is_gone():
    """A default makes absent read as the default, not as the zero value; with the CRD deleted meanwhile there is
    no schema to judge by."""
    crd_obj = _with_v0_schema(make_crd(versions=(("v0", True, False), ("v2", True, True))),
                              {"paused": {"type": "boolean", "default": True}, "n": {"type": "integer"}})
    values = [raw("a", "v0", 11, spec={"paused": False, "n": 0})]
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com"
    api = FakeApi({path("a"): view("a", "v2", 11, spec={}), crd_path: (200, crd_obj)})
    d = diff_crd(api, FakeSampler(values), Crd.from_api(crd_obj), "/registry")
    assert (d.removed, d.normalised) == ({".spec.paused": 1}, {".spec.n": 1})
    gone = FakeApi({path("a"): view("a", "v2", 11, spec={})})
    d = diff_crd(gone, FakeSampler(values), Crd.from_api(crd_obj), "/registry")
    assert (d.removed, d.normalised) == ({".spec.paused": 1, ".spec.n": 1}, {})


def test_zero_values_per_occurrence_in_list_items():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.normalised import is_zero, split_removed
    schema = {"properties": {"items": {"type": "array", "items": {"properties": {"on": {"type": "boolean"}}}}}}
    stored = {"items": [{"on": False}, {"on": True}]}
    assert split_removed(stored, {"items": [{}, {}]}, schema) == ({".items[].on"}, {".items[].on"})
    assert [is_zero(v) for v in (False, 0, 0.0, "", [], {}, True, 1, "0", [0], None)] == [True] * 6 + [False] * 5


def test_a_webhook_that_cannot_be_asked_leaves_the_objects_unverified_and_says_why():
    def down(c, objects, desired):
        raise CrdOpsError("the conversion webhook https://127.0.0.1:1/convert could not be reached: refused")

    values = [raw("b", "v0", 11, spec={"x": 1}), raw("c", "v0", 12, spec={"x": 2})]
    api = FakeApi({path("b"): view("b", "v2", 11, spec={"y": 1}), path("c"): view("c", "v2", 12, spec={"y": 2})})
    d = diff_crd(api, FakeSampler(values), _webhook_crd(), "/registry", converter=down)
    assert d.compared == 0 and d.skipped == {"webhook_version_not_served": 2}
    assert "v0 is not served" in d.unverified and "could not be reached" in d.unverified


def test_cluster_scoped_keys_and_namespaced_keys_name_the_object():
    assert object_ref(crd(), PREFIX, PREFIX + "ns1/a") == ("ns1", "a")
    assert object_ref(crd(scope="Cluster"), PREFIX, PREFIX + "a") == (None, "a")


def test_without_etcd_the_result_says_it_was_not_checked():
    assert storage_diff_of(FakeApi({}), None, crd(), "/registry", 20) == {"checked": False, "reason": NO_ETCD_REASON}
    assert "no etcd_url" in NO_ETCD_REASON
    off = storage_diff_of(FakeApi({}), FakeSampler([]), crd(), "/registry", 0)
    assert off["checked"] is False and "diff_sample" in off["reason"]


def test_a_storage_version_that_is_not_served_cannot_be_compared():
    c = crd(versions=(("v1", True, False), ("v2", False, True)))
    out = storage_diff_of(FakeApi({}), FakeSampler([raw("a", "v2", 1)]), c, "/registry", 20)
    assert out == {"checked": False, "reason": "the storage version v2 is not served: the API cannot show the objects at it"}


def test_the_view_is_the_dry_run_of_the_no_op_write_at_the_storage_version():
    api = FakeApi({}, patch={path("a"): view("a", "v2", 10, spec={"mode": "Auto"})})
    d = diff_crd(api, FakeSampler([raw("a", "v1", 10, spec={})]), crd(), "/registry")
    assert api.calls == [("PATCH", path("a"), (("dryRun", "All"),), b"{}")]
    assert (d.view, d.added) == ("dry-run", {".spec.mode": 1})


def test_without_patch_permission_it_falls_back_to_get_and_says_so():
    denied = (403, {"kind": "Status", "reason": "Forbidden", "message": 'crontabs "a" is forbidden: User "audit" cannot patch'})
    api = FakeApi({path("a"): view("a", "v2", 10), path("b"): view("b", "v2", 11)}, patch={path("a"): denied})
    d = diff_crd(api, FakeSampler([raw("a", "v1", 10), raw("b", "v1", 11)]), crd(), "/registry")
    assert [call[0] for call in api.calls] == ["PATCH", "GET", "GET"]  # asks once, then reads
    assert (d.view, d.compared, d.as_dict()["view"]) == ("get", 2, "get")


def test_an_admission_rejection_of_the_dry_run_skips_that_object():
    denied = (400, {"kind": "Status", "message": 'admission webhook "deny.example.com" denied the request: no'})
    api = FakeApi({}, patch={path("a"): denied, path("b"): view("b", "v2", 11)})
    d = diff_crd(api, FakeSampler([raw("a", "v1", 10), raw("b", "v1", 11)]), crd(), "/registry")
    assert (d.view, d.compared, d.skipped) == ("dry-run", 1, {"dry_run_rejected": 1})


def test_the_default_converter_asks_a_service_webhook_through_the_apiservers_service_proxy():
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "service": {"name": "cert-manager-webhook", "namespace": "cert-manager", "path": "/convert"},
        "caBundle": "Q0E="}}}
    c = crd(versions=(("v0", False, False), ("v2", True, True)), conversion=hook)
    sent = []

    class Proxy(FakeApi):
        def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
            if "/proxy" not in path:
                return super().request(method, path, query=query, body=body)
            review = json.loads(body)
            sent.append((path, review))
            req = review["request"]
            back = [dict(o, apiVersion=req["desiredAPIVersion"], spec={"x": o["spec"]["y"]}) for o in req["objects"]]
            return ApiResponse(200, {}, json.dumps({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                                                    "response": {"uid": req["uid"], "result": {"status": "Success"},
                                                                 "convertedObjects": back}}).encode())

    api = Proxy({path("b"): view("b", "v2", 11, spec={"y": 1})})
    d = diff_crd(api, FakeSampler([raw("b", "v0", 11, spec={"x": 1})]), c, "/registry")
    assert [p for p, _r in sent] == ["/api/v1/namespaces/cert-manager/services/https:cert-manager-webhook:443"
                                     "/proxy/convert"]
    assert sent[0][1]["request"]["desiredAPIVersion"] == "stable.example.com/v0"
    assert (d.compared_by_conversion_review, d.removed, d.unverified) == (1, {}, None)


def test_an_empty_object_the_webhook_drops_is_lost_when_its_members_have_defaults_and_normalised_when_not():
    """Only the empty maps the webhook adds are left out of the comparison: an `opts: {}` the stored value has and
    the webhook drops is a removal. v0 serves `opts: {}` as `opts: {mode: fast}`, so dropping it is a loss; `plain: {}`
    has no defaults below it, so dropping it is normalised; the webhook's own `status: {}` is still no difference."""
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}
    crd_obj = _with_v0_schema(make_crd(versions=(("v0", False, False), ("v1", True, False), ("v2", True, True)),
                                       conversion=hook), {
        "opts": {"type": "object", "properties": {"mode": {"type": "string", "default": "fast"}}},
        "plain": {"type": "object", "properties": {"name": {"type": "string"}}}, "csr": {"type": "string"}})

    def drops_empty(c, objects, desired):
        return [dict(o, apiVersion=desired, spec={"csr": o["spec"]["csr"]}, status={}) for o in objects]

    values = [raw("a", "v0", 11, spec={"csr": "x", "opts": {}, "plain": {}})]
    api = FakeApi({path("a"): view("a", "v2", 11, spec={"csr": "x"}),
                   "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com":
                   (200, crd_obj)})
    d = diff_crd(api, FakeSampler(values), Crd.from_api(crd_obj), "/registry", converter=drops_empty)
    assert (d.removed, d.normalised, d.added) == ({".spec.opts": 1}, {".spec.plain": 1}, {})

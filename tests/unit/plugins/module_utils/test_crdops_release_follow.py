"""The live CRD follows the applied release: what the previous release declared and the applied one dropped."""
from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.follow import (
    FollowError, dropped_paths, follow_release, owners, plan_removal)
from tests.unit.crdops_fakes import resp, status

WEBHOOK = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1", "v1beta1"],
                                              "clientConfig": {"service": {"name": "wh", "namespace": "cm",
                                                                           "path": "/convert"}}}}


def crd(conversion=None, labels=None, annotations=None, versions=("v1",)):
    doc = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "certs.example.com", "labels": dict(labels or {}),
                        "annotations": dict(annotations or {})},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "certs", "kind": "Cert"},
                    "versions": [{"name": v, "served": True, "storage": v == versions[-1]} for v in versions]}}
    if conversion is not None:
        doc["spec"]["conversion"] = copy.deepcopy(conversion)
    return doc


def test_a_struct_the_release_dropped_is_one_path():
    assert dropped_paths(crd(WEBHOOK), crd()) == [("spec", "conversion")]


def test_nothing_dropped_when_both_releases_declare_the_same_fields():
    assert dropped_paths(crd(WEBHOOK, versions=("v1alpha2", "v1")), crd(WEBHOOK)) == []


def test_a_field_inside_a_kept_struct():
    url = copy.deepcopy(WEBHOOK)
    url["webhook"]["clientConfig"] = {"url": "https://wh.example.com/convert"}
    assert dropped_paths(crd(WEBHOOK), crd(url)) == [("spec", "conversion", "webhook", "clientConfig", "service")]


def test_labels_and_annotations_go_key_by_key_never_the_map():
    previous = crd(labels={"app": "cm", "helm.sh/chart": "cm-1"}, annotations={"a": "1"})
    applied = crd(labels={"app": "cm"})
    assert dropped_paths(previous, applied) == [("metadata", "annotations", "a"),
                                                ("metadata", "labels", "helm.sh/chart")]


def live_with(conversion, managed):
    live = crd(conversion)
    live["metadata"]["resourceVersion"] = "41"
    live["metadata"]["managedFields"] = managed
    return live


INJECTED = copy.deepcopy(WEBHOOK)
INJECTED["webhook"]["clientConfig"]["caBundle"] = "Q0E="
MANAGED = [{"manager": "kubectl-create", "operation": "Update",
            "fieldsV1": {"f:spec": {"f:conversion": {".": {}, "f:strategy": {}, "f:webhook": {}}}}},
           {"manager": "cainjector", "operation": "Update",
            "fieldsV1": {"f:spec": {"f:conversion": {"f:webhook": {"f:clientConfig": {"f:caBundle": {}}}}}}},
           {"manager": "crdops-migration", "operation": "Apply", "fieldsV1": {"f:spec": {"f:versions": {}}}}]


def test_the_plan_names_owners_and_what_another_tool_wrote_inside():
    (item,) = plan_removal(live_with(INJECTED, MANAGED), crd(WEBHOOK), crd())
    assert item["path"] == "spec.conversion" and item["pointer"] == "/spec/conversion"
    assert item["owners"] == ["cainjector (Update)", "kubectl-create (Update)"]
    assert item["injected"] == ["spec.conversion.webhook.clientConfig.caBundle"]


def test_a_field_no_release_declared_stays_while_its_struct_is_declared():
    assert plan_removal(live_with(INJECTED, MANAGED), crd(WEBHOOK), crd(WEBHOOK)) == []


def test_owners_of_a_key_with_a_slash():
    managed = [{"manager": "helm", "fieldsV1": {"f:metadata": {"f:labels": {"f:helm.sh/chart": {}}}}}]
    assert owners(managed, ("metadata", "labels", "helm.sh/chart")) == ["helm"]
    assert owners(managed, ("metadata", "labels", "app")) == []


class Script:
    """A transport answering from a list; records every request."""

    cluster_label = "c1"

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        self.calls.append((method, path, dict(query or []), json.loads(body) if body else None, content_type))
        return self.answers.pop(0)


def test_one_json_patch_tests_the_resource_version_then_removes():
    after = crd()
    after["metadata"]["resourceVersion"] = "42"
    t = Script(resp(200, live_with(INJECTED, MANAGED)), resp(200, after), resp(200, after))
    res = follow_release(t, crd(WEBHOOK), crd(), field_manager="crdops-migration")
    assert res.changed and res.resource_version_after == "42"
    assert t.calls[1][2] == {"fieldManager": "crdops-migration", "dryRun": "All"} and t.calls[1][3] == t.calls[2][3]
    method, path, query, ops, ctype = t.calls[2]
    assert (method, ctype, query) == ("PATCH", "application/json-patch+json", {"fieldManager": "crdops-migration"})
    assert ops == [{"op": "test", "path": "/metadata/resourceVersion", "value": "41"},
                   {"op": "remove", "path": "/spec/conversion"}]
    assert "removed spec.conversion with spec.conversion.webhook.clientConfig.caBundle" in res.summary()


def test_check_mode_sends_only_the_dry_run():
    t = Script(resp(200, live_with(INJECTED, MANAGED)), resp(200, crd()))
    res = follow_release(t, crd(WEBHOOK), crd(), field_manager="m", check_mode=True)
    assert not res.changed and "would remove spec.conversion" in res.summary()
    assert [(c[0], c[2].get("dryRun")) for c in t.calls] == [("GET", None), ("PATCH", "All")]


def test_what_the_apiserver_defaults_back_is_not_removed_again():
    """After a removal spec.conversion reads {strategy: None} (defaulted): a rerun's dry-run changes nothing."""
    live = live_with({"strategy": "None"}, [])
    t = Script(resp(200, live), resp(200, live))
    res = follow_release(t, crd(WEBHOOK), crd(), field_manager="m")
    assert not res.changed and res.removed == [] and len(t.calls) == 2
    assert "nothing the previous release declared is left over" in res.summary()


def test_a_writer_in_between_means_read_again():
    failed_test = status(422, "the server rejected our request due to an error in our request: "
                              "testing value /metadata/resourceVersion failed: test failed")
    t = Script(resp(200, live_with(INJECTED, MANAGED)), failed_test, resp(200, live_with(INJECTED, MANAGED)),
               resp(200, crd()), resp(200, crd()))
    assert follow_release(t, crd(WEBHOOK), crd(), field_manager="m").attempts == 2


def test_a_refused_removal_fails_naming_the_field():
    refused = status(422, 'CustomResourceDefinition.apiextensions.k8s.io "certs.example.com" is invalid: '
                          'spec.conversion.strategy: Required value', reason="Invalid")
    t = Script(resp(200, live_with(INJECTED, MANAGED)), refused)
    with pytest.raises(FollowError) as err:
        follow_release(t, crd(WEBHOOK), crd(), field_manager="m")
    assert "spec.conversion" in str(err.value) and "certs.example.com" in str(err.value)
    assert "Required value" in str(err.value)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""storage_forecast: the re-store's losses forecast from release N's schema and webhook before the flip.

The real proofs are tests/integration/test_storage_diff.py (a strict schema: the role stops in discover, nothing
written) and tests/integration/test_cert_manager.py (cert-manager's own webhook: `isCA: false` normalised); here the
pruning rules and the webhook's failure, which a real server does not produce on cue.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.storage_forecast import (
    forecast_crd, forecast_of, prune)

from tests.unit.crdops_fakes import make_crd
from tests.unit.plugins.module_utils.test_crdops_storage_diff import FakeApi, FakeSampler, raw

STRICT = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "size": {"type": "integer"}, "flag": {"type": "boolean"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "template": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {"spec": {
        "type": "object"}}}}}}}
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def test_pruning_keeps_declared_fields_maps_unknown_under_preserve_and_an_embedded_objects_header():
    obj = {"apiVersion": "g/v2", "kind": "K", "metadata": {"name": "a", "labels": {"x": "y"}},
           "spec": {"size": 1, "legacy": "x", "labels": {"a": "b"}, "free": {"any": {"thing": 1}},
                    "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "odd": 1}},
           "status": {"x": 1}}
    assert prune(obj, STRICT, root=True) == {
        "apiVersion": "g/v2", "kind": "K", "metadata": {"name": "a", "labels": {"x": "y"}},
        "spec": {"size": 1, "labels": {"a": "b"}, "free": {"any": {"thing": 1}},
                 "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}}


def _crds(conversion=None, caBundle=None):
    live = make_crd(versions=(("v1", True, True),), stored=("v1",))
    live["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": OPEN}
    release = make_crd(versions=(("v1", True, False), ("v2", True, True)), conversion=conversion)
    release["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": OPEN}
    release["spec"]["versions"][1]["schema"] = {"openAPIV3Schema": STRICT}
    return live, release


def test_conversion_none_forecasts_what_release_ns_schema_prunes_and_zero_values_are_not_counted():
    live, release = _crds()
    values = [raw("a", "v1", 10, spec={"size": 1, "legacy": "x"}), raw("b", "v1", 11, spec={"size": 2})]
    f = forecast_crd(FakeApi({}), FakeSampler(values), Crd.from_api(live), release, "/registry", 20)
    assert (f.storage_version, f.sampled, f.compared) == ("v2", 2, 2)
    assert f.removed == {".spec.legacy": 1} and f.examples == {".spec.legacy": ["default/a"]}


def test_the_webhook_round_trip_names_a_normalised_zero_value_and_the_live_ca_bundle_is_used():
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                               "clientConfig": {"url": "https://hook.example/convert"}}}
    live, release = _crds(conversion=hook)
    live["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://hook.example/convert", "caBundle": "Q0E="}}}
    release["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"isCA": {"type": "boolean"}, "size": {"type": "integer"}}}}}}
    asked = []

    def omitempty(crd, objects, desired):  # Go's omitempty: `isCA: false` is left out
        asked.append((crd.conversion_ca_bundle, desired))
        return [dict(o, apiVersion=desired, spec={k: v for k, v in o["spec"].items() if v is not False})
                for o in objects]

    values = [raw("a", "v1", 10, spec={"size": 1, "isCA": False})]
    f = forecast_crd(FakeApi({}), FakeSampler(values), Crd.from_api(live), release, "/registry", 20,
                     converter=omitempty)
    assert (f.removed, f.normalised) == ({}, {".spec.isCA": 1})
    assert asked == [("Q0E=", "stable.example.com/v2"), ("Q0E=", "stable.example.com/v1")]


def test_a_webhook_that_cannot_be_asked_leaves_the_forecast_unverified_not_failed():
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"]}}
    live, release = _crds(conversion=hook)

    def down(crd, objects, desired):
        raise CrdOpsError("the conversion webhook could not be reached: refused")

    values = [raw("a", "v1", 10, spec={"size": 1}), raw("b", "v1", 11, spec={"size": 2})]
    f = forecast_crd(FakeApi({}), FakeSampler(values), Crd.from_api(live), release, "/registry", 20, converter=down)
    assert f.compared == 0 and f.skipped == {"webhook": 2} and "could not be reached" in f.unverified


def test_only_a_release_that_moves_the_storage_version_is_forecast():
    live, release = _crds()
    same = make_crd(versions=(("v1", True, True),), stored=("v1",))
    assert forecast_of(FakeApi({}), None, Crd.from_api(live), [same], "/registry", 20) is None
    assert forecast_of(FakeApi({}), None, Crd.from_api(live), [], "/registry", 20) is None
    assert forecast_of(FakeApi({}), None, Crd.from_api(live), [release], "/registry", 20)["checked"] is False


def test_an_empty_object_release_ns_webhook_drops_is_lost_where_release_ns_schema_defaults_its_members():
    """Release N's v1 schema serves `opts: {}` as `opts: {mode: fast}`: a webhook that drops it changes the object.
    The stored `opts: {}` is compared as it is (only empty maps the webhook adds are left out)."""
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                               "clientConfig": {"url": "https://hook.example/convert"}}}
    live, release = _crds(conversion=hook)
    release["spec"]["versions"][0]["schema"] = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"size": {"type": "integer"}, "plain": {"type": "object"}, "opts": {
            "type": "object", "properties": {"mode": {"type": "string", "default": "fast"}}}}}}}}

    def drops_empty(crd, objects, desired):  # a webhook that leaves out empty objects, and adds `status: {}`
        return [dict(o, apiVersion=desired, status={}, spec={k: v for k, v in o["spec"].items() if v != {}})
                for o in objects]

    values = [raw("a", "v1", 10, spec={"size": 1, "opts": {}, "plain": {}})]
    f = forecast_crd(FakeApi({}), FakeSampler(values), Crd.from_api(live), release, "/registry", 20,
                     converter=drops_empty)
    assert (f.removed, f.normalised) == ({".spec.opts": 1}, {".spec.plain": 1})


def test_empty_metadata_maps_a_webhook_drops_are_no_difference():
    """The apiserver owns metadata's shape: `annotations: {}` and none are one ObjectMeta, so a webhook built on
    ObjectMeta (`omitempty`) leaving it out is neither lost nor normalised."""
    hook = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                               "clientConfig": {"url": "https://hook.example/convert"}}}
    live, release = _crds(conversion=hook)

    def typed_meta(crd, objects, desired):
        return [dict(o, apiVersion=desired, metadata={k: v for k, v in o["metadata"].items() if v != {}})
                for o in objects]

    value = raw("a", "v1", 10, metadata={"name": "a", "namespace": "default", "annotations": {}}, spec={"size": 1})
    f = forecast_crd(FakeApi({}), FakeSampler([value]), Crd.from_api(live), release, "/registry", 20,
                     converter=typed_meta)
    assert (f.compared, f.removed, f.normalised) == (1, {}, {})

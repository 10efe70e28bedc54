# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A ConversionReview sent to a CRD's webhook (a url: one for real: tests/integration/test_cert_manager.py)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.conversion_review import (
    ConversionReviewError, converted_objects, review_body, webhook_converter)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.crd import Crd
from tests.unit.crdops_fakes import make_crd, resp, status

SERVICE = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1beta1", "v1"], "clientConfig": {
    "service": {"name": "cert-manager-webhook", "namespace": "cert-manager", "path": "/convert"}}}}


class Proxy:
    cluster_label = "c1"

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        self.calls.append((method, path, json.loads(body)))
        return self.answer(json.loads(body)) if callable(self.answer) else self.answer


def crd():
    return Crd.from_api(make_crd(conversion=SERVICE))


def test_a_service_webhook_is_asked_through_the_apiservers_service_proxy():
    def webhook(review):
        req = review["request"]
        return resp(200, {"apiVersion": review["apiVersion"], "kind": "ConversionReview", "response": {
            "uid": req["uid"], "result": {"status": "Success"},
            "convertedObjects": [dict(o, apiVersion=req["desiredAPIVersion"]) for o in req["objects"]]}})

    t = Proxy(webhook)
    out = webhook_converter(t)(crd(), [{"apiVersion": "stable.example.com/v2", "kind": "Crontab"}],
                               "stable.example.com/v1")
    assert out == [{"apiVersion": "stable.example.com/v1", "kind": "Crontab"}]
    (method, path, sent) = t.calls[0]
    assert (method, path) == ("POST", "/api/v1/namespaces/cert-manager/services/https:cert-manager-webhook:443"
                                      "/proxy/convert")
    assert sent["apiVersion"] == "apiextensions.k8s.io/v1" and sent["kind"] == "ConversionReview"


def test_no_permission_for_the_proxy_is_an_error_naming_the_service_and_the_crd():
    t = Proxy(status(403, 'services "https:cert-manager-webhook:443" is forbidden: cannot create resource '
                          '"services/proxy"', "Forbidden"))
    with pytest.raises(ConversionReviewError) as err:
        webhook_converter(t)(crd(), [{}], "stable.example.com/v1")
    text = str(err.value)
    assert "cert-manager/cert-manager-webhook" in text and "HTTP 403" in text and "crontabs.stable.example.com" in text


@pytest.mark.parametrize("response, words", [
    ({"uid": "u", "result": {"status": "Failure", "message": "no kind"}}, "refused: no kind"),
    ({"uid": "other", "result": {"status": "Success"}, "convertedObjects": [{}]}, "another request"),
    ({"uid": "u", "result": {"status": "Success"}, "convertedObjects": []}, "returned 0 objects for 1"),
])
def test_an_answer_the_apiserver_would_reject_is_rejected(response, words):
    with pytest.raises(ConversionReviewError) as err:
        converted_objects({"response": response}, "u", 1, crd())
    assert words in str(err.value)


def test_the_review_version_follows_what_the_crd_accepts():
    v1beta1_only = make_crd(conversion={"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1beta1"]}})
    assert review_body(Crd.from_api(v1beta1_only), [], "g/v1", "u")["apiVersion"] == "apiextensions.k8s.io/v1beta1"

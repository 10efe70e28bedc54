# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SelfSubjectAccessReviews: one per check, the apiserver's answer kept, what it did not grant in one line each."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.access import (
    REVIEWS, AccessCheck, missing, review_all)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError, PermissionDenied
from tests.unit.crdops_fakes import FakeCluster, resp, status

CRDS = {"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions"}


def answering(cluster, decide):
    """Answer every review with decide(resourceAttributes) -> status dict; the bodies sent are kept."""
    sent = []

    def hook(method, path, query, body):
        if method == "POST" and path == REVIEWS:
            review = json.loads(body)
            sent.append(review)
            return resp(201, dict(review, status=decide(review["spec"]["resourceAttributes"])))
        return None

    cluster.hooks.append(hook)
    return sent


def test_one_review_per_check_and_what_was_not_granted():
    cluster = FakeCluster()
    checks = [dict(CRDS, verb="get"), dict(CRDS, verb="patch", subresource="status"),
              {"group": "coordination.k8s.io", "resource": "leases", "verb": "create", "namespace": "ops"},
              {"group": "example.com", "resource": "widgets", "verb": "list"}, dict(CRDS, verb="get")]
    answers = {"get": {"allowed": True}, "patch": {"allowed": False, "reason": "no RBAC policy matched"},
               "create": {"allowed": False, "evaluationError": "webhook authorizer unreachable"},
               "list": {"allowed": False}}
    sent = answering(cluster, lambda attrs: answers[attrs["verb"]])

    got = review_all(cluster, [AccessCheck.from_dict(c, i) for i, c in enumerate(checks)])

    assert [r["spec"]["resourceAttributes"] for r in sent] == checks[:4]   # the repeated check asked once
    assert all(r["kind"] == "SelfSubjectAccessReview" and r["apiVersion"] == "authorization.k8s.io/v1" for r in sent)
    assert [a.allowed for a in got] == [True, False, False, False]
    assert missing(got) == [
        "patch customresourcedefinitions/status.apiextensions.k8s.io (no RBAC policy matched)",
        "create leases.coordination.k8s.io in namespace ops (webhook authorizer unreachable)",
        "list widgets.example.com (denied)"]
    assert got[1].to_dict() == dict(checks[1], allowed=False, reason="no RBAC policy matched", evaluation_error="",
                                    check="patch customresourcedefinitions/status.apiextensions.k8s.io")


def test_a_review_the_apiserver_does_not_answer_fails_naming_the_cluster_and_check():
    cluster = FakeCluster()
    cluster.hooks.append(lambda method, path, query, body:
                         status(403, "selfsubjectaccessreviews.authorization.k8s.io is forbidden", "Forbidden")
                         if path == REVIEWS else None)
    with pytest.raises(PermissionDenied) as exc:
        review_all(cluster, [AccessCheck.from_dict(dict(CRDS, verb="list"))])
    text = str(exc.value)
    assert "list customresourcedefinitions.apiextensions.k8s.io" in text and "test-cluster" in text, text
    assert "is forbidden" in text, text


@pytest.mark.parametrize("check, message", [
    ("get", "checks[2]: expected a dictionary of resourceAttributes, got 'get'"),
    ({"verb": "get", "resources": "x"}, "checks[2]: unknown key resources (known: verb, group, resource, subresource, "
                                        "namespace, name, version)"),
    ({"group": "example.com"}, "checks[2]: verb and resource must be set"),
])
def test_a_bad_check_is_refused_before_anything_is_asked(check, message):
    with pytest.raises(BadInputError) as exc:
        AccessCheck.from_dict(check, 2)
    assert str(exc.value) == message

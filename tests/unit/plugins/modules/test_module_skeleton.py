# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one skeleton of the six modules (_crdops_glue.execute): checks before connecting, one failure path.

Every failure, whatever raised it, is a result with ``error.kind``, the cluster and CRD where known, and no
secret; the transport is closed on every path."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils import _crdops_glue
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ConnectionFailed, OutcomeError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import Selection
from ansible_collections.crdops.migration.plugins.modules import (
    crd_client_check, crd_storage_info, crd_storage_migrate, crd_storage_repair, crd_storage_verify,
    crd_stored_versions_trim)
from tests.unit.crdops_fakes import status
from tests.unit.plugins.modules.runner import NAME, connected_fake, run

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + NAME
TOKEN = "tok-SUPERSECRET-987"

# each module with the least it needs besides a selection
MODULES = {
    crd_storage_info: {},
    crd_storage_migrate: {},
    crd_stored_versions_trim: {},
    crd_storage_verify: {"etcd_url": "http://127.0.0.1:1"},
    crd_storage_repair: {"wait_timeout": 0},
    crd_client_check: {},
}
ALL = pytest.mark.parametrize("module", list(MODULES), ids=lambda m: m.__name__.rsplit(".", 1)[-1])


@pytest.fixture
def cluster(monkeypatch):
    return connected_fake(monkeypatch, objects=4)


def on_crd_get(answer):
    def hook(method, path, query, body):
        if method == "GET" and path == CRD_PATH:
            if isinstance(answer, Exception):
                raise answer
            return answer
        return None
    return hook


@ALL
def test_selection_is_checked_once_and_before_connecting(cluster, capsys, module, monkeypatch):
    out = run(module, dict(MODULES[module]), capsys)
    assert out["_rc"] == 1 and out["msg"].startswith("select CRDs with one of") and out["error"]["kind"] == "bad_input"
    out = run(module, dict(MODULES[module], names=[NAME], all=True), capsys)
    assert out["_rc"] == 1 and "mutually exclusive" in out["msg"] and out["error"]["kind"] == "bad_input"
    assert cluster.connects == 0 and cluster.calls == []
    checks = []
    validate = Selection.validate
    monkeypatch.setattr(Selection, "validate", lambda self: checks.append(self) or validate(self))
    run(module, dict(MODULES[module], names=[NAME]), capsys)
    assert len(checks) == 1 and cluster.connects == 1


@ALL
@pytest.mark.parametrize("answer,kind", [
    (status(401, "Unauthorized", "Unauthorized"), "connection"),
    (status(403, 'customresourcedefinitions "%s" is forbidden' % NAME, "Forbidden"), "permission"),
    (status(404, "not found", "NotFound"), "selection"),
    (status(500, "etcdserver: leader changed", "InternalError"), "api"),
])
def test_every_engine_failure_has_its_kind_cluster_and_crd(cluster, capsys, module, answer, kind):
    cluster.hooks.append(on_crd_get(answer))
    out = run(module, dict(MODULES[module], names=[NAME]), capsys)
    assert out["_rc"] == 1 and out["failed"] and out["changed"] is False
    assert out["error"]["kind"] == kind and out["error"]["cluster"] == "test-cluster" and out["error"]["crd"] == NAME
    assert out["error"]["msg"] == out["msg"] and out["msg"].startswith("[cluster test-cluster, CRD %s]" % NAME)
    assert out["cluster"] == "test-cluster" and getattr(cluster, "closed", False)


@ALL
def test_a_connection_that_cannot_be_made_is_a_connection_failure(capsys, module, monkeypatch):
    def refuse(options, **kw):
        raise ConnectionFailed("cannot load kubeconfig", cluster=options.cluster_label())
    monkeypatch.setattr(_crdops_glue, "connect", refuse)
    out = run(module, dict(MODULES[module], names=[NAME], context="prod-eu-1"), capsys)
    assert out["_rc"] == 1 and out["msg"] == "[cluster prod-eu-1] cannot load kubeconfig"
    assert out["error"]["kind"] == "connection" and out["error"]["cluster"] == "prod-eu-1"


@ALL
def test_a_foreign_exception_is_scrubbed_and_carries_no_traceback(cluster, capsys, module):
    cluster.hooks.append(on_crd_get(RuntimeError("exec plugin said: token=%s" % TOKEN)))
    out = run(module, dict(MODULES[module], names=[NAME]), capsys)
    assert out["_rc"] == 1 and out["error"]["kind"] == "unexpected" and "RuntimeError" in out["msg"]
    assert TOKEN not in json.dumps(out) and "exception" not in out and getattr(cluster, "closed", False)


def test_an_outcome_failure_keeps_its_words_and_the_partial_result(cluster):
    class Outcome(_crdops_glue.Job):
        RESULT = dict(crds=[])

        def run(self, transport, crds):
            self.result["crds"] = [c.name for c in crds]

        def finish(self):
            raise OutcomeError("etcd_mismatch", "cluster %s: 1 of 4 keys differ" % self.result["cluster"])

    out = _crdops_glue.execute(Outcome({"names": [NAME]}))
    assert out["failed"] and out["msg"] == "cluster test-cluster: 1 of 4 keys differ" and out["crds"] == [NAME]
    assert out["error"]["kind"] == "etcd_mismatch" and "exception" not in out and cluster.closed


def test_a_failed_check_closes_what_the_job_opened_and_never_connects(cluster):
    closed = []

    class Checked(_crdops_glue.Job):
        def prepare(self):
            raise OutcomeError("bad_input", "page_size must be > 0, got 0")

        def close(self):
            closed.append(True)

    out = _crdops_glue.execute(Checked({"names": [NAME]}))
    assert out["error"]["kind"] == "bad_input" and closed == [True] and cluster.connects == 0


def test_a_foreign_exception_before_connecting_is_unexpected_too(cluster):
    class Broken(_crdops_glue.Job):
        WHAT = "the broken task"

        def prepare(self):
            raise ValueError("password: %s" % TOKEN)

    out = _crdops_glue.execute(Broken({"names": [NAME]}))
    assert out["failed"] and out["error"]["kind"] == "unexpected" and out["msg"].startswith("the broken task failed")
    assert TOKEN not in json.dumps(out) and cluster.connects == 0


@ALL
def test_a_kubeconfig_of_the_wrong_type_is_bad_input(cluster, capsys, module):
    out = run(module, dict(MODULES[module], names=[NAME], kubeconfig=["a", "b"]), capsys)
    assert out["_rc"] == 1 and out["msg"] == "kubeconfig must be a path (string) or a kubeconfig dict, got list"
    assert out["error"]["kind"] == "bad_input" and cluster.connects == 0


@pytest.mark.parametrize("module,args,words", [
    (crd_storage_migrate, {"names": [NAME], "workers": "many"}, "workers"),
    (crd_storage_verify, {"names": [NAME]}, "etcd_url"),
    (crd_storage_info, {"names": [NAME], "no_such_option": 1}, "no_such_option"),
])
def test_ansible_argument_errors_are_bad_input_too(cluster, capsys, module, args, words):
    out = run(module, args, capsys)
    assert out["_rc"] == 1 and words in out["msg"] and out["error"]["kind"] == "bad_input"
    assert out["error"]["msg"] == out["msg"] and cluster.connects == 0


def test_without_the_kubernetes_library_nothing_runs(cluster, capsys, monkeypatch):
    monkeypatch.setattr(_crdops_glue._connection, "HAS_KUBERNETES", False)
    out = run(crd_storage_info, {"names": [NAME]}, capsys)
    assert out["_rc"] == 1 and "kubernetes" in out["msg"] and out["error"]["kind"] == "missing_library"
    assert cluster.connects == 0


def test_secrets_never_in_output(cluster, capsys):
    kubeconfig = {"apiVersion": "v1", "users": [{"name": "u", "user": {"token": TOKEN}}], "clusters": [],
                  "contexts": []}
    cluster.hooks.append(lambda m, p, q, b: status(403, "forbidden", "Forbidden"))
    out = run(crd_storage_info, {"names": [NAME], "kubeconfig": kubeconfig, "api_key": TOKEN + "x"}, capsys)
    assert out["_rc"] == 1 and out["error"]["kind"] == "permission"
    text = json.dumps(out)
    assert TOKEN not in text and "forbidden" in text
    assert "invocation" in out and "kubeconfig" in out["invocation"]["module_args"]  # masked, not absent
    assert cluster.seen["options"].kubeconfig["users"][0]["user"]["token"] == TOKEN


def test_env_fallback_auth(cluster, capsys, monkeypatch):
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "from-env")
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "no")
    monkeypatch.setenv("K8S_AUTH_IMPERSONATE_GROUPS", "a,b")
    run(crd_storage_info, {"names": [NAME], "count_objects": False}, capsys)
    o = cluster.seen["options"]
    assert o.context == "from-env" and o.validate_certs is False and o.impersonate_groups == ("a", "b")


def test_auth_aliases(cluster, capsys):
    run(crd_storage_info, {"names": [NAME], "verify_ssl": False, "ssl_ca_cert": "/ca", "cert_file": "/c",
                           "key_file": "/k"}, capsys)
    o = cluster.seen["options"]
    assert (o.validate_certs, o.ca_cert, o.client_cert, o.client_key) == (False, "/ca", "/c", "/k")


def test_exec_env_names_are_not_secrets_only_their_values():
    kubeconfig = {"current-context": "prod-eu-1", "users": [{"name": "prod-eu-1", "user": {"exec": {
        "command": "aws-iam-authenticator", "args": ["token", "-i", "prod-eu-1"],
        "env": [{"name": "prod", "value": "s3cr3t-env-value"}, {"name": "AWS_PROFILE", "value": "prod-eu"}]},
        "token": TOKEN}}]}
    values = _crdops_glue.kubeconfig_secret_values(kubeconfig)
    assert values == {"s3cr3t-env-value", "prod-eu", TOKEN}

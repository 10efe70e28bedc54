# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.crdops.migration.plugins.module_utils import _crdops_glue
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.modules import (
    crd_storage_info, crd_storage_migrate, crd_stored_versions_trim)
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"
TOKEN = "tok-SUPERSECRET-987"


@pytest.fixture
def cluster(monkeypatch):
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, 12, namespaces=("a", "b"))
    seen = {}

    def fake_connect(options, **kw):
        seen["options"] = options
        seen["kw"] = kw
        return c
    monkeypatch.setattr(_crdops_glue, "connect", fake_connect)
    c.seen = seen
    return c


def run(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as ei:
            module.main()
    out = json.loads(capsys.readouterr().out)
    out["_rc"] = ei.value.code
    return out


def test_info(cluster, capsys):
    out = run(crd_storage_info, {"names": [NAME], "context": "prod"}, capsys)
    assert out["_rc"] == 0 and out["changed"] is False
    crd = out["crds"][0]
    assert crd["name"] == NAME and crd["object_count"] == 12 and crd["needs_migration"]
    assert crd["stored_versions"] == ["v1", "v2"] and crd["migration_record"]["valid"] is False
    assert cluster.writes() == []
    assert cluster.seen["options"].context == "prod"


def test_migrate_then_trim_with_diff(cluster, capsys):
    out = run(crd_storage_migrate, {"names": [NAME], "page_size": 5, "workers": 2}, capsys)
    assert out["_rc"] == 0 and out["changed"] is True, out
    assert out["totals"]["rewritten"] == 12 and out["crds"][0]["record_written"]
    assert cluster.seen["kw"]["pool_size"] >= 2
    again = run(crd_storage_migrate, {"names": [NAME]}, capsys)
    assert again["changed"] is False and "valid migration record" in again["crds"][0]["skipped"]
    trim = run(crd_stored_versions_trim, {"names": [NAME], "_ansible_diff": True}, capsys)
    assert trim["_rc"] == 0 and trim["changed"] is True
    assert trim["diff"][0]["after"] == {"storedVersions": ["v2"]}
    assert cluster.crds[NAME]["status"]["storedVersions"] == ["v2"]
    trim2 = run(crd_stored_versions_trim, {"names": [NAME]}, capsys)
    assert trim2["changed"] is False


def test_migrate_check_mode_writes_nothing(cluster, capsys):
    out = run(crd_storage_migrate, {"names": [NAME], "_ansible_check_mode": True}, capsys)
    assert out["_rc"] == 0 and out["crds"][0]["listed"] == 12 and cluster.writes() == []


@pytest.mark.parametrize("args,words", [
    ({"page_size": 0}, ["page_size must be > 0"]),
    ({"workers": 0}, ["workers must be > 0"]),
    ({"workers": -3}, ["workers must be > 0"]),
    ({"max_qps": 0}, ["max_qps must be > 0"]),
    ({"max_failures": -1}, ["max_failures"]),
])
def test_migrate_bad_input_fails_before_any_request(cluster, capsys, args, words):
    args = dict(args, names=[NAME])
    out = run(crd_storage_migrate, args, capsys)
    assert out["_rc"] == 1 and out["failed"]
    for w in words:
        assert w in out["msg"]
    assert cluster.calls == []


@pytest.mark.parametrize("module", [crd_storage_info, crd_storage_migrate, crd_stored_versions_trim])
def test_selection_required_and_exclusive(cluster, capsys, module):
    out = run(module, {}, capsys)
    assert out["_rc"] == 1 and "select CRDs" in out["msg"]
    out = run(module, {"names": [NAME], "all": True}, capsys)
    assert out["_rc"] == 1 and "mutually exclusive" in out["msg"]
    assert cluster.calls == []


def test_unknown_crd_names_cluster(cluster, capsys):
    out = run(crd_storage_info, {"names": ["nope.example.com"]}, capsys)
    assert out["_rc"] == 1 and "nope.example.com" in out["msg"] and "test-cluster" in out["msg"]


def test_migrate_failure_result_has_per_crd_counts(cluster, capsys):
    cluster.hooks.append(lambda m, p, q, b: status(400, 'admission webhook "v.x" denied the request: frozen',
                                                   "BadRequest") if m == "PATCH" and p.endswith("/obj-00003") else None)
    out = run(crd_storage_migrate, {"names": [NAME], "page_size": 5}, capsys)
    assert out["_rc"] == 1 and out["failed"]
    assert "test-cluster" in out["msg"] and NAME in out["msg"] and "obj-00003" in out["msg"]
    assert "denied the request: frozen" in out["msg"]
    assert out["crds"][0]["failed"] == 1 and out["crds"][0]["rewritten"] == 11
    assert RECORD_ANNOTATION not in cluster.crds[NAME]["metadata"]["annotations"]


def test_migrate_conversion_abort_fails(cluster, capsys):
    cluster.hooks.append(lambda m, p, q, b: status(500, "conversion webhook for x failed: down", "InternalError")
                         if m == "PATCH" and "/obj-" in p else None)
    out = run(crd_storage_migrate, {"names": [NAME], "workers": 1}, capsys)
    assert out["_rc"] == 1 and "conversion webhook" in out["msg"] and out["crds"][0]["complete"] is False


def test_trim_refusal_without_record(cluster, capsys):
    out = run(crd_stored_versions_trim, {"names": [NAME]}, capsys)
    assert out["_rc"] == 1 and "missing" in out["msg"] and cluster.writes() == []
    out = run(crd_stored_versions_trim, {"names": [NAME], "versions": ["v2"], "force": True}, capsys)
    assert out["_rc"] == 1 and "refusing to drop the storage version" in out["msg"]


def test_trim_check_mode(cluster, capsys):
    cluster.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION] = json.dumps(
        {"storageVersion": "v2", "generation": 2, "failed": 0})
    out = run(crd_stored_versions_trim, {"names": [NAME], "_ansible_check_mode": True}, capsys)
    assert out["changed"] is True and out["crds"][0]["stored_versions_after"] == ["v2"] and cluster.writes() == []


def test_secrets_never_in_output(cluster, capsys):
    kubeconfig = {"apiVersion": "v1", "users": [{"name": "u", "user": {"token": TOKEN}}], "clusters": [],
                  "contexts": []}
    cluster.hooks.append(lambda m, p, q, b: status(403, "forbidden", "Forbidden"))
    out = run(crd_storage_info, {"names": [NAME], "kubeconfig": kubeconfig, "api_key": TOKEN + "x"}, capsys)
    assert out["_rc"] == 1
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


def test_progress_file(cluster, capsys, tmp_path):
    pf = tmp_path / "progress.json"
    out = run(crd_storage_migrate, {"names": [NAME], "page_size": 5, "progress_file": str(pf)}, capsys)
    assert out["_rc"] == 0
    data = json.loads(pf.read_text())
    assert data["cluster"] == "test-cluster" and data["current"]["done"] == 12 and data["crds_done"] == 1


def test_exec_env_names_are_not_secrets_only_their_values():
    kubeconfig = {"current-context": "prod-eu-1", "users": [{"name": "prod-eu-1", "user": {"exec": {
        "command": "aws-iam-authenticator", "args": ["token", "-i", "prod-eu-1"],
        "env": [{"name": "prod", "value": "s3cr3t-env-value"}, {"name": "AWS_PROFILE", "value": "prod-eu"}]},
        "token": TOKEN}}]}
    values = _crdops_glue.kubeconfig_secret_values(kubeconfig)
    assert values == {"s3cr3t-env-value", "prod-eu", TOKEN}


def test_connect_timeout_default_and_passed_to_the_engine(cluster, capsys):
    out = run(crd_storage_info, {"names": [NAME]}, capsys)
    assert out["_rc"] == 0 and cluster.seen["kw"]["connect_timeout"] == 10.0
    out = run(crd_storage_info, {"names": [NAME], "connect_timeout": 2.5}, capsys)
    assert cluster.seen["kw"]["connect_timeout"] == 2.5
    out = run(crd_storage_info, {"names": [NAME], "connect_timeout": 0}, capsys)
    assert out["_rc"] == 1 and "connect_timeout must be > 0" in out["msg"]

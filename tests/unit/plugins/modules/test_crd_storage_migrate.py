# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_storage_migrate as Ansible runs it (as a module), against the fake apiserver of the engine tests."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.modules import crd_storage_migrate
from tests.unit.crdops_fakes import status
from tests.unit.plugins.modules.runner import NAME, connected_fake, run


@pytest.fixture
def cluster(monkeypatch):
    return connected_fake(monkeypatch)


def test_migrate_then_rerun_skips(cluster, capsys):
    out = run(crd_storage_migrate, {"names": [NAME], "page_size": 5, "workers": 2}, capsys)
    assert out["_rc"] == 0 and out["changed"] is True, out
    assert out["totals"]["rewritten"] == 12 and out["crds"][0]["record_written"] and "error" not in out
    assert cluster.seen["kw"]["pool_size"] == 4  # workers + 2
    again = run(crd_storage_migrate, {"names": [NAME]}, capsys)
    assert again["changed"] is False and "valid migration record" in again["crds"][0]["skipped"]


def test_migrate_check_mode_writes_nothing(cluster, capsys):
    out = run(crd_storage_migrate, {"names": [NAME]}, capsys, check_mode=True)
    assert out["_rc"] == 0 and out["crds"][0]["listed"] == 12 and cluster.writes() == []


@pytest.mark.parametrize("args,msg", [
    ({"page_size": 0}, "page_size must be > 0, got 0"),
    ({"workers": 0}, "workers must be > 0, got 0"),
    ({"workers": -3}, "workers must be > 0, got -3"),
    ({"max_qps": 0}, "max_qps must be > 0, got 0.0"),
    ({"max_failures": -1}, "max_failures must be >= 0, got -1"),
    ({"retry_deadline": -1}, "retry_deadline must be >= 0, got -1.0"),
    ({"preflight_sample": -1}, "preflight_sample must be >= 0, got -1"),
    ({"connect_timeout": 0}, "connect_timeout must be > 0, got 0.0"),
    ({"sample_only": True}, "sample_only plans from a sample: it needs check mode"),
])
def test_migrate_bad_input_fails_before_connecting(cluster, capsys, args, msg):
    out = run(crd_storage_migrate, dict(args, names=[NAME]), capsys)
    assert out["_rc"] == 1 and out["failed"] and out["msg"] == msg
    assert out["error"]["kind"] == "bad_input" and out["error"]["msg"] == msg
    assert out["crds"] == [] and cluster.connects == 0 and cluster.calls == []


def test_preflight_sample_zero_sends_no_dry_run(cluster, capsys):
    out = run(crd_storage_migrate, {"names": [NAME], "preflight_sample": 0}, capsys, check_mode=True)
    assert out["_rc"] == 0 and cluster.dry_runs() == []
    out = run(crd_storage_migrate, {"names": [NAME], "preflight_sample": 3}, capsys, check_mode=True)
    assert out["_rc"] == 0 and len(cluster.dry_runs()) == 3


def test_heartbeat(cluster, capsys, tmp_path):
    beat = tmp_path / "beat"
    out = run(crd_storage_migrate, {"names": [NAME], "heartbeat_file": str(beat)}, capsys)
    assert out["_rc"] == 1 and out["msg"].startswith("not started: heartbeat file %s is gone" % beat)
    assert out["error"]["kind"] == "stopped" and cluster.connects == 0
    beat.touch()
    out = run(crd_storage_migrate, {"names": [NAME], "heartbeat_file": str(beat), "heartbeat_timeout": 0}, capsys)
    assert out["_rc"] == 1 and out["msg"] == "heartbeat_timeout must be > 0, got 0.0" and cluster.connects == 0


def test_migrate_failure_result_has_per_crd_counts(cluster, capsys):
    cluster.hooks.append(lambda m, p, q, b: status(400, 'admission webhook "v.x" denied the request: frozen',
                                                   "BadRequest") if m == "PATCH" and p.endswith("/obj-00003") else None)
    out = run(crd_storage_migrate, {"names": [NAME], "page_size": 5}, capsys)
    assert out["_rc"] == 1 and out["failed"] and out["error"]["kind"] == "incomplete"
    assert "test-cluster" in out["msg"] and NAME in out["msg"] and "obj-00003" in out["msg"]
    assert "denied the request: frozen" in out["msg"] and out["error"]["msg"] == out["msg"]
    assert out["crds"][0]["failed"] == 1 and out["crds"][0]["rewritten"] == 11 and out["totals"]["rewritten"] == 11
    assert RECORD_ANNOTATION not in cluster.crds[NAME]["metadata"]["annotations"]


def test_migrate_conversion_abort_fails(cluster, capsys):
    cluster.hooks.append(lambda m, p, q, b: status(500, "conversion webhook for x failed: down", "InternalError")
                         if m == "PATCH" and "/obj-" in p else None)
    out = run(crd_storage_migrate, {"names": [NAME], "workers": 1}, capsys)
    assert out["_rc"] == 1 and "conversion webhook" in out["msg"] and out["crds"][0]["complete"] is False
    assert out["error"]["kind"] == "conversion_webhook" and out["error"]["cluster"] == "test-cluster"


def test_progress_file(cluster, capsys, tmp_path):
    pf = tmp_path / "progress.json"
    out = run(crd_storage_migrate, {"names": [NAME], "page_size": 5, "progress_file": str(pf)}, capsys)
    assert out["_rc"] == 0
    data = json.loads(pf.read_text())
    assert data["cluster"] == "test-cluster" and data["current"]["done"] == 12 and data["crds_done"] == 1


@pytest.mark.parametrize("pace,limit", [(None, 1), ("gentle", 1), ("max", 3)])
def test_pace_is_gentle_by_default_and_max_on_request(cluster, capsys, pace, limit):
    args = {"names": [NAME], "page_size": 5, "workers": 3}
    if pace:
        args["pace"] = pace
    out = run(crd_storage_migrate, args, capsys)
    got = out["crds"][0]["pace"]
    assert out["_rc"] == 0 and got["mode"] == (pace or "gentle") and got["workers"] == 3
    assert got["min_limit"] == limit  # gentle starts at one write in flight; max stays at workers

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_storage_migrate plans the HA barrier before the first write: result, warning, fail closed."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.modules import crd_storage_migrate
from tests.unit.plugins.modules import runner

NAME = runner.NAME
TWO = [("apiserver-a", 4.0), ("apiserver-b", 9.0)]


@pytest.fixture
def cluster(monkeypatch):
    return runner.connected_fake(monkeypatch)


def run(args, capsys, check_mode=False):
    return runner.run(crd_storage_migrate, dict(args, names=[NAME]), capsys, check_mode)


def test_single_apiserver_needs_no_endpoints(cluster, capsys):
    out = run({}, capsys)
    assert out["_rc"] == 0 and out["barrier"]["mode"] == "single" and out["barrier"]["apiservers_alive"] == 1
    assert out["crds"][0]["barrier"]["mode"] == "single" and out["totals"]["rewritten"] == 12
    assert "warnings" not in out


def test_two_apiservers_without_endpoints_fail_closed_before_any_write(cluster, capsys):
    cluster.identity_leases = TWO
    out = run({}, capsys)
    assert out["_rc"] == 1 and "2 apiservers are alive" in out["msg"] and "cluster test-cluster" in out["msg"]
    assert out["barrier"]["mode"] == "refused" and out["barrier"]["apiservers_alive"] == 2
    assert out["crds"] == [] and cluster.writes(include_events=True) == []
    assert not [c for c in cluster.calls if c[1].startswith("/apis/stable.example.com/")]  # no object listed


def test_check_mode_reports_the_refusal_a_real_run_would_hit(cluster, capsys):
    cluster.identity_leases = TWO
    out = run({}, capsys, check_mode=True)
    assert out["_rc"] == 0 and out["barrier"]["mode"] == "refused"
    assert "2 apiservers are alive" in out["barrier"]["refusal"] and "cluster test-cluster" in out["barrier"]["refusal"]
    assert "a real run would stop here" in json.dumps(out["warnings"])
    assert out["crds"][0]["listed"] == 12 and cluster.writes(include_events=True) == []


def test_two_apiservers_with_both_endpoints_pass(cluster, capsys):
    cluster.identity_leases = TWO
    out = run({"apiserver_endpoints": ["https://10.0.0.11:6443", "https://10.0.0.12:6443"]}, capsys)
    assert out["_rc"] == 0 and out["barrier"]["mode"] == "endpoints"
    assert set(out["crds"][0]["barrier"]["endpoints"]) == {
        "https://fake.invalid", "https://10.0.0.11:6443", "https://10.0.0.12:6443"}


def test_settle_fallback_warns_and_says_so_in_the_result(cluster, capsys):
    cluster.identity_leases = TWO
    out = run({"barrier_fallback": "settle", "barrier_fallback_settle": 0}, capsys)
    assert out["_rc"] == 0 and out["barrier"]["mode"] == "settle-fallback"
    assert out["crds"][0]["barrier"]["mode"] == "settle-fallback" and out["crds"][0]["barrier"]["polls"] == 10
    assert "barrier.mode settle-fallback" in json.dumps(out["warnings"]) and out["barrier"]["warning"]


def test_no_barrier_when_no_crd_needs_a_pass(cluster, capsys):
    cluster.identity_leases = TWO
    cluster.crds[NAME]["status"]["storedVersions"] = ["v2"]
    out = run({}, capsys)
    assert out["_rc"] == 0 and out["barrier"] is None and out["crds"][0]["skipped"]

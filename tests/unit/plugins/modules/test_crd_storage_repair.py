# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_storage_repair as Ansible runs it, against the fake apiserver of the engine tests."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.modules import crd_storage_repair
from tests.unit.crdops_fakes import status
from tests.unit.plugins.module_utils.test_crdops_repair import NAME, broken
from tests.unit.plugins.modules import runner


@pytest.fixture
def cluster(monkeypatch):
    return runner.connect_to(monkeypatch, broken())


def run(args, capsys, check_mode=False):
    return runner.run(crd_storage_repair, args, capsys, check_mode)


def test_check_mode_plan_then_repair_then_nothing_to_do(cluster, capsys):
    args = {"names": [NAME], "page_size": 2, "workers": 2, "wait_timeout": 0}
    plan = run(args, capsys, check_mode=True)
    assert plan["_rc"] == 0 and plan["changed"] is True and plan["repaired"] == [NAME]
    assert plan["crds"][0]["missing_versions"] == ["v1"] and cluster.writes() == []
    done = run(args, capsys)
    assert done["_rc"] == 0 and done["changed"] is True and done["cluster"] == "test-cluster"
    assert done["crds"][0]["versions_after"] == ["v2"] and cluster.stored_versions_on_disk(NAME) == ["v2"]
    again = run(args, capsys)
    assert again["_rc"] == 0 and again["changed"] is False and again["repaired"] == []


def test_failure_names_cluster_and_crd_and_returns_what_was_done(cluster, capsys):
    cluster.hooks.append(lambda m, p, q, b: status(422, 'admission webhook "w" denied the request: no', "Invalid")
                         if m == "PATCH" and b == b"{}" else None)
    out = run({"names": [NAME], "page_size": 2, "wait_timeout": 0}, capsys)
    assert out["_rc"] == 1 and "test-cluster" in out["msg"] and NAME in out["msg"]
    assert out["error"]["kind"] == "repair" and out["changed"] is True
    assert out["crds"][0]["added_versions"] == ["v1"] and "admission webhook" in out["msg"]


def test_bad_options_are_refused_before_connecting(cluster, capsys):
    out = run({"names": [NAME], "wait_timeout": -1}, capsys)
    assert out["_rc"] == 1 and "wait_timeout" in out["msg"] and cluster.calls == []


def test_the_pace_of_the_re_store_is_an_option(cluster, capsys):
    done = run({"names": [NAME], "page_size": 2, "workers": 2, "wait_timeout": 0, "pace": "max"}, capsys)
    assert done["_rc"] == 0 and done["crds"][0]["restore"]["pace"]["mode"] == "max"
    assert done["crds"][0]["restore"]["pace"]["final_limit"] == 2
    bad = run({"names": [NAME], "pace": "fast"}, capsys)
    assert bad["_rc"] == 1 and "pace" in bad["msg"]

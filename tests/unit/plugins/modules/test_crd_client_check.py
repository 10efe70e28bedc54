# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.modules import crd_client_check
from tests.unit.plugins.module_utils.clientcheck_fake import GROUP, NAME, ClientCheckFake, entry
from tests.unit.plugins.modules import runner


@pytest.fixture
def fake(monkeypatch):
    f = ClientCheckFake()
    f.add("a", "good", {"size": 1}, [entry("argocd", "v2", {"f:spec": {"f:size": {}}})])
    return runner.connect_to(monkeypatch, f)


def run(args, capsys, check_mode=False):
    return runner.run(crd_client_check, args, capsys, check_mode)


def test_passes_and_posts_a_normal_event(fake, capsys):
    out = run({"names": [NAME]}, capsys)
    assert out["_rc"] == 0 and out["ok"] is True and out["changed"] is False
    assert out["crds"][0]["applies"] == 1 and out["failed_checks"] == 0 and out["stale_objects"] == 0
    assert [e["reason"] for e in fake.events] == ["ClientCheckPassed"]
    assert fake.seen["kw"]["retry_deadline"] == 5.0  # a broken object's HTTP 500 is not retried for minutes


def test_fails_naming_cluster_crd_object_manager_and_message(fake, capsys):
    fake.add("b", "broken", {"size": 2}, [entry("flux", "v1alpha1", {"f:spec": {"f:size": {}}})])
    out = run({"names": [NAME]}, capsys)
    assert out["_rc"] == 1 and out["ok"] is False and out["failed_checks"] == 1 and out["stale_objects"] == 1
    for text in ("test-cluster", NAME, "b/broken", "flux", "HTTP 500",
                 "request to convert CR to an invalid group/version: %s/v1alpha1" % GROUP):
        assert text in out["msg"], (text, out["msg"])
    assert out["crds"][0]["failures"][0]["object"] == "b/broken"


def test_check_mode_runs_the_dry_runs_and_writes_nothing(fake, capsys):
    fake.add("b", "broken", {"size": 2}, [entry("flux", "v1alpha1", {"f:spec": {"f:size": {}}})])
    out = run({"names": [NAME], "fail_on_error": False}, capsys, check_mode=True)
    # good: argocd changes its value, then a new manager's change conflicts; broken: one apply (HTTP 500)
    assert out["_rc"] == 0 and out["ok"] is False and len(fake.applies) == 3
    assert fake.events == [] and all(q.get("dryRun") == "All" for m, path, q in fake.calls if m == "PATCH")


def test_bad_input(fake, capsys):
    out = run({"names": [NAME], "sample": 0}, capsys)
    assert out["_rc"] == 1 and out["msg"] == "sample must be > 0, got 0" and out["error"]["kind"] == "bad_input" and fake.calls == []

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller-side action of crd_storage_migrate: where it runs the pass, what it prints, how a stop reads."""
from __future__ import annotations


import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import argument_spec, validate_args
from ansible_collections.crdops.migration.plugins.modules.crd_storage_migrate import OPTIONS
from tests.unit.plugins.modules.actions import WHERE_IT_RUNS, action_module, import_actions


(action,) = import_actions("crd_storage_migrate")

NAME = "crontabs.stable.example.com"


def make(args=None, **kw):
    return action_module(action, args or {"names": [NAME], "kubeconfig": "/nonexistent"}, **kw)


@pytest.mark.parametrize("kw,why", WHERE_IT_RUNS + [
    ({"args": {"names": [NAME], "run_on_controller": "never"}}, "run_on_controller=never"),
])
def test_the_pass_runs_on_the_controller_only_where_the_task_would_anyway(kw, why):
    assert make(**kw).not_on_controller() == why


def test_controller_run_prints_progress_lines_and_a_stop_reads_as_such(monkeypatch):
    lines = []
    monkeypatch.setattr(action.display, "display", lambda msg, *a, **k: lines.append(msg))

    def fake_migrate(params, check_mode, warn, stop=None, follower=None):
        follower.totals[NAME] = 3000
        for done in range(1, 3001):
            follower.update({"crds_total": 1, "crds_done": 0, "current": {"crd": NAME, "done": done, "objects_per_s": 100.0}})
        stop.request("stopped by signal SIGTERM")
        return dict(changed=True, cluster="c1", crds=[dict(name=NAME, rewritten=2990, unchanged=10, gone=0)],
                    failed=True, msg="cluster c1: 1 CRD(s) not fully migrated: [CRD %s] pass stopped" % NAME)

    monkeypatch.setattr(action, "migrate", fake_migrate)
    params, _no_log, errors = validate_args(argument_spec(OPTIONS), {"names": [NAME], "progress_interval": 0.001})
    assert errors == []
    res = make().run_here(params, "cluster-a")
    assert res["failed"] and res["msg"].startswith(
        "cluster c1: stopped by signal SIGTERM: no write was started after it; the writes in flight finished, "
        "the resume checkpoint is kept and nothing was trimmed. Run again to resume. cluster c1: 1 CRD(s)")
    assert lines and lines[-1].startswith("cluster-a | CRD 1/1 %s: 3000/3000 objects (100.0%%)" % NAME), lines[-1:]


def test_bad_args_fail_before_anything_runs_and_secrets_are_masked():
    params, no_log, errors = validate_args(argument_spec(OPTIONS), {"names": [NAME], "api_key": "s3cr3t-token",
                                                                    "workers": "many"})
    assert "s3cr3t-token" in no_log and any("workers" in e for e in errors)
    res = action.redact(dict(msg="token s3cr3t-token"), no_log)
    assert "s3cr3t-token" not in res["msg"]


def test_bad_args_on_the_controller_are_a_bad_input_failure_with_the_secret_masked(monkeypatch):
    monkeypatch.setattr(action, "migrate", lambda *a, **k: pytest.fail("the pass must not start"))
    res = make(args={"names": [NAME], "api_key": "s3cr3t-token", "workers": "many"}).run(task_vars={})
    assert res["failed"] and res["error"]["kind"] == "bad_input" and "workers" in res["msg"]
    assert "s3cr3t-token" not in str(res)


def test_a_stopped_run_fails_as_stopped_even_when_the_pass_said_nothing(monkeypatch):
    def fake_migrate(params, check_mode, warn, stop=None, follower=None):
        stop.request("stopped - time_limit of 1 s reached")
        return dict(changed=False, cluster="c1", crds=[])

    monkeypatch.setattr(action, "migrate", fake_migrate)
    params, _no_log, _errors = validate_args(argument_spec(OPTIONS), {"names": [NAME], "progress_interval": 0})
    res = make().run_here(params, "cluster-a")
    assert res["failed"] and res["error"]["kind"] == "stopped" and res["error"]["msg"] == res["msg"]
    assert res["msg"].startswith("cluster c1: stopped - time_limit of 1 s reached: no write was started after it")

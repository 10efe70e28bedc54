# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The read-only modules' controller-side actions: where the job runs, and that it answers what the module answers."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.modules import crd_storage_info
from tests.unit.plugins.modules.actions import WHERE_IT_RUNS, import_actions
from tests.unit.plugins.modules.actions import action_module as make
from tests.unit.plugins.modules.runner import NAME, connected_fake, run

info_action, trim_action = import_actions("crd_storage_info", "crd_stored_versions_trim")


@pytest.mark.parametrize("kw,why", WHERE_IT_RUNS)
def test_the_job_runs_in_the_worker_only_where_the_module_would_run_on_the_controller(kw, why):
    assert make(info_action, {"names": [NAME]}, **kw).not_on_controller() == why


def test_in_the_worker_info_answers_exactly_what_the_module_answers(monkeypatch, capsys):
    cluster = connected_fake(monkeypatch)
    module_out = run(crd_storage_info, {"names": [NAME], "context": "prod"}, capsys)
    action = make(info_action, {"names": [NAME], "context": "prod"})
    params = action_params(action)
    here = action.run_here(params)
    # warnings: the module helpers keep a process-wide list, which other tests of this session leave warnings in
    for key in ("_rc", "_stderr", "invocation", "warnings"):
        module_out.pop(key, None)
    assert here == module_out and here["crds"][0]["object_count"] == 12
    assert cluster.seen["options"].context == "prod" and cluster.writes() == []


def test_check_mode_and_diff_reach_the_job_and_a_bad_option_fails_naming_it(monkeypatch):
    cluster = connected_fake(monkeypatch)
    cluster.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION] = json.dumps(
        {"storageVersion": "v2", "generation": 2, "failed": 0, "proof": "confirming-pass",
         "crdUid": "u-" + NAME})
    planned = make(trim_action, {"names": [NAME]}, check_mode=True)
    res = planned.run_here(action_params(planned))
    assert res["changed"] is True and res["crds"][0]["stored_versions_after"] == ["v2"] and cluster.writes() == []
    trim = make(trim_action, {"names": [NAME]})
    trim._play_context.diff = True
    res = trim.run_here(action_params(trim))
    assert res["diff"][0]["after"] == {"storedVersions": ["v2"]} and cluster.crds[NAME]["status"]["storedVersions"] == ["v2"]
    bad = make(info_action, {"names": [NAME], "diff_sample": -1})
    res = bad.run_here(action_params(bad))
    assert res["failed"] and res["msg"] == "diff_sample must be >= 0, got -1" and cluster.connects == 2


def test_an_unknown_option_is_refused_like_the_module_does(monkeypatch):
    connected_fake(monkeypatch)
    action = make(info_action, {"names": [NAME], "nonsense": 1})
    monkeypatch.setattr(info_action.JobAction, "_execute_module", lambda *a, **k: pytest.fail("ran the module"))
    monkeypatch.setattr("ansible.plugins.action.ActionBase.run", lambda self, tmp=None, task_vars=None: {})
    res = action.run(task_vars={})
    assert res["failed"] and "nonsense" in res["msg"]


def action_params(action):
    from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import argument_spec, validate_args
    params, _no_log, errors = validate_args(argument_spec(action.OPTIONS), action._task.args)
    assert errors == []
    return params

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The read-only modules' controller-side actions: where the job runs, and that it answers what the module answers."""
from __future__ import annotations

import json
from unittest.mock import MagicMock

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.modules import crd_storage_info
from tests.unit.plugins.modules.runner import NAME, connected_fake, run


def _import_actions():
    """Importing controller code marks the process as the controller (ansible-core 2.19), and then a module's
    warnings go to Display instead of its result; the module tests of this session must not see that."""
    try:
        from ansible.module_utils import _internal
    except ImportError:  # ansible-core < 2.19
        _internal = None
    was = getattr(_internal, "is_controller", False)
    from ansible_collections.crdops.migration.plugins.action import crd_storage_info as info_action
    from ansible_collections.crdops.migration.plugins.action import crd_stored_versions_trim as trim_action
    if _internal is not None:
        _internal.is_controller = was
    return info_action, trim_action


info_action, trim_action = _import_actions()


def make(module, args, transport="local", async_val=0, become=False, check_mode=False, environment=None):
    task = MagicMock()
    task.environment = environment
    task.args = dict(args)
    task.async_val = async_val
    task.action = "crdops.migration.x"
    connection = MagicMock()
    connection.transport = transport
    play_context = MagicMock()
    play_context.become = become
    play_context.check_mode = check_mode
    play_context.diff = False
    return module.ActionModule(task, connection, play_context, MagicMock(), MagicMock(), MagicMock())


@pytest.mark.parametrize("kw,why", [
    ({}, None),
    ({"transport": "ssh"}, "connection ssh"),
    ({"async_val": 60}, "async"),
    ({"become": True}, "become"),
    ({"environment": [{"K8S_AUTH_CONTEXT": "x"}]}, "task environment"),
])
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
        {"storageVersion": "v2", "generation": 2, "failed": 0})
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

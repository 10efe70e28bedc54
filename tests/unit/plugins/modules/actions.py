# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The modules' controller-side action plugins, imported without marking the test process as the controller,
and built for a task as ansible-playbook's worker builds them (task, connection and play context mocked)."""
from __future__ import annotations

import importlib
from unittest.mock import MagicMock

ACTIONS = "ansible_collections.crdops.migration.plugins.action."

# (task settings for action_module, why the job does not run in the worker): a job runs in ansible-playbook's worker
# only where the module would run on the controller anyway
WHERE_IT_RUNS = [
    ({}, None),
    ({"transport": "ssh"}, "connection ssh"),
    ({"async_val": 60}, "async"),
    ({"become": True}, "become"),
    ({"environment": [{"K8S_AUTH_CONTEXT": "x"}]}, "task environment"),
]


def import_actions(*names):
    """The action plugins ``plugins/action/<name>.py``, in the order named.

    Importing controller code marks the process as the controller (ansible-core 2.19), and then a module's
    warnings go to Display instead of its result; the module tests of this session must not see that."""
    try:
        from ansible.module_utils import _internal
    except ImportError:  # ansible-core < 2.19
        _internal = None
    was = getattr(_internal, "is_controller", False)
    plugins = tuple(importlib.import_module(ACTIONS + name) for name in names)
    if _internal is not None:
        _internal.is_controller = was
    return plugins


def action_module(plugin, args, transport="local", async_val=0, become=False, check_mode=False, environment=None):
    """``plugin``'s ActionModule for a task with ``args`` over a connection of type ``transport``."""
    task = MagicMock()
    task.environment = environment
    task.args = dict(args)
    task.async_val = async_val
    task.action = "crdops.migration.x"
    task.check_mode = check_mode
    connection = MagicMock()
    connection.transport = transport
    play_context = MagicMock()
    play_context.become = become
    play_context.check_mode = check_mode
    play_context.diff = False
    return plugin.ActionModule(task, connection, play_context, MagicMock(), MagicMock(), MagicMock())

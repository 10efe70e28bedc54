# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stdout callback that prints the crd_upgrade runbook, not every task of it."""
from __future__ import annotations

DOCUMENTATION = r"""
name: runbook
type: stdout
short_description: The crd_upgrade run as a runbook on the console - the plan, progress, changes and errors
version_added: 1.0.0
description:
  - Prints what the role says (its plan, counts, proofs and summaries), every task that changed something, every
    failure with its task and error, the re-store's progress lines and the recap; tasks that only read or
    decide stay quiet, so a cluster takes a screen, not a few hundred task headers.
  - One line per message, prefixed with the cluster (the inventory host) and the step, so the lines of
    clusters that run side by side in one wave still read apart. A task that runs once for the play (the fleet
    report's summary) is prefixed C(fleet) instead of the host it happened to run on.
  - Failures print as the default callback prints them (the task header and the whole error). C(-v) prints
    every task as the default callback does; below C(-v) the options O(display_ok_hosts) and
    O(display_skipped_hosts) (and C(display_included_hosts) where ansible-core has it) are off whatever they
    are set to.
  - Set it as the stdout callback, for example C(ANSIBLE_STDOUT_CALLBACK=crdops.migration.runbook) or
    C(stdout_callback = crdops.migration.runbook) in the C([defaults]) section of C(ansible.cfg). AWX and
    ansible-runner install their own stdout callback and show every task as structured events instead.
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
requirements:
  - set as stdout callback in the configuration
"""

from ansible import constants as C
from ansible.playbook.task_include import TaskInclude
from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# A role task name reads "<role> : <phase> | <step>"; the role prefix adds nothing on the console.
_ROLE_PREFIX = " : "
_QUIET_BY_DEFAULT = ("display_ok_hosts", "display_skipped_hosts", "display_included_hosts")


def _task_of(result):
    """The task of a callback result (ansible-core 2.19+ names it `task`, older versions `_task`)."""
    return getattr(result, "task", None) or result._task


def _payload_of(result):
    """The result dictionary (ansible-core 2.19+: `result`, older: `_result`)."""
    payload = getattr(result, "result", None)
    return payload if isinstance(payload, dict) else result._result


def _step_name(task):
    name = task.get_name().strip()
    return name.split(_ROLE_PREFIX, 1)[1] if _ROLE_PREFIX in name else name


def _message_lines(task, payload):
    """What a debug task of the role says, as lines; None when the result is not such a message."""
    if task.action not in C._ACTION_DEBUG or "msg" not in payload:
        return None
    msg = payload["msg"]
    lines = [str(line) for line in msg] if isinstance(msg, list) else str(msg).splitlines()
    return lines or [""]


class CallbackModule(DefaultCallback):
    """The default callback with ok, skipped and include results silent and the role's messages one line each."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "crdops.migration.runbook"

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        if self._display.verbosity < 1:
            # the default callback prints a task's header only when it prints one of its results: with ok,
            # skipped and include results silent, the headers of tasks that only read or decide go too
            for option in _QUIET_BY_DEFAULT:
                self._plugin_options[option] = False

    def _verbose(self):
        return self._display.verbosity >= 1

    def v2_runner_on_ok(self, result):
        task, payload = _task_of(result), _payload_of(result)
        if self._verbose():
            return super().v2_runner_on_ok(result)
        if isinstance(task, TaskInclude) or (task.loop and "results" in payload):
            return None  # an include says nothing; a loop's items have been shown one by one
        lines = _message_lines(task, payload)
        if lines is None and not payload.get("changed"):
            # a quiet task's result is not shown, its warnings and deprecations are (the default callback,
            # told not to show ok results, drops them with the result)
            return self._warnings_of(result)
        return self._say(result, lines if lines is not None else ["changed"])

    def v2_runner_item_on_ok(self, result):
        task, payload = _task_of(result), _payload_of(result)
        if self._verbose():
            return super().v2_runner_item_on_ok(result)
        lines = _message_lines(task, payload)
        if lines is None:
            if payload.get("changed"):
                return self._say(result, [f"changed (item={self._get_item_label(payload)})"])
            return self._warnings_of(result)
        return self._say(result, lines)

    def v2_playbook_on_include(self, included_file):
        # ansible-core before 2.19 has no display_included_hosts option: the include lines are silenced here
        if self._verbose():
            super().v2_playbook_on_include(included_file)

    def _say(self, result, lines):
        """One line per message line, prefixed with the cluster and the step; changed results in its colour."""
        payload = _payload_of(result)
        self._warnings_of(result)
        color = C.COLOR_CHANGED if payload.get("changed") else C.COLOR_OK
        task = _task_of(result)
        # a run_once task (the fleet report) speaks for every host of the play, not for the one it ran on
        who = "fleet" if getattr(task, "run_once", False) else self.host_label(result)
        prefix = f"{who} | {_step_name(task)}"
        if len(lines) == 1:
            self._display.display(f"{prefix}: {lines[0]}", color=color)
            return
        self._display.display(f"{prefix}:", color=color)
        for line in lines:
            self._display.display(f"    {line}", color=color)

    def _warnings_of(self, result):
        # the default callback's helper changed name and argument in ansible-core 2.19
        if hasattr(self, "_handle_warnings_and_exception"):
            self._handle_warnings_and_exception(result)
        else:
            self._handle_warnings(_payload_of(result))

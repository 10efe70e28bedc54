# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark callback (not shipped): every host's every task, its start and end, one JSON line each.

profile_tasks times a task from its start to the next task's start over all hosts of a batch; a fleet needs
the time per host (a worker picks a host's task up when a fork is free), so `v2_runner_on_start` marks the
start and the result callbacks the end. Written to $CRDOPS_TASK_TIMING (a file path), appended to.
Each line also has `cpu_start` / `cpu_end`: ansible-playbook's CPU-seconds so far, its own and its reaped children's
(workers and the module processes below them); with one host and one fork, the difference from one task's start to
the next one's is what that task cost the controller.
"""
from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: crdops_task_timing
    type: aggregate
    short_description: per host and task start/end times for benchmarks/fleet200.py
    description: Appends one JSON line per finished host task to the file named by CRDOPS_TASK_TIMING.
    requirements: [enable in ANSIBLE_CALLBACKS_ENABLED]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "crdops_task_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._path = os.environ.get("CRDOPS_TASK_TIMING", "")
        self._started: dict[tuple[str, str], float] = {}
        self._play = ""
        self._lines: list[str] = []

    def v2_playbook_on_play_start(self, play) -> None:
        self._play = play.get_name()

    @staticmethod
    def _cpu() -> float:
        t = os.times()
        return round(t.user + t.system + t.children_user + t.children_system, 3)

    def v2_runner_on_start(self, host, task) -> None:
        self._started[(host.get_name(), task._uuid)] = (time.time(), self._cpu())

    def _end(self, result, status: str) -> None:
        host, task = result._host.get_name(), result._task
        started = self._started.pop((host, task._uuid), None)
        if started is None:
            return
        start, cpu_start = started
        self._lines.append(json.dumps({"host": host, "task": task.get_name(), "action": task.action,
                                       "play": self._play, "start": start, "end": time.time(), "status": status,
                                       "cpu_start": cpu_start, "cpu_end": self._cpu()}))
        if len(self._lines) >= 500:
            self._flush()

    def _flush(self) -> None:
        if self._path and self._lines:
            with open(self._path, "a", encoding="utf-8") as fh:
                fh.write("\n".join(self._lines) + "\n")
        self._lines = []

    def v2_runner_on_ok(self, result) -> None:
        self._end(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._end(result, "failed")

    def v2_runner_on_skipped(self, result) -> None:
        self._end(result, "skipped")

    def v2_runner_on_unreachable(self, result) -> None:
        self._end(result, "unreachable")

    def v2_playbook_on_stats(self, stats) -> None:
        self._flush()

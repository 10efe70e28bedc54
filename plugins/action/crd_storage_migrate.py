# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_storage_migrate, supervised: the re-store runs inside ansible-playbook's worker process.

Why here and not as an ``async`` job followed by polls (docs/how-it-works.md, "Following and stopping a
re-store"): an async job is started in a session of its own, so Ctrl-C, an AWX cancel or a kill of
ansible-playbook's process group never reaches it, and following it from a role needs a task loop that
ansible-core nests one level deeper per poll. In the worker, the pass is one task: a flat loop prints the
progress lines through Display, SIGINT/SIGTERM (which ansible-playbook forwards to its workers) and the
loss of ansible-playbook itself (the worker is re-parented) stop the writes within a second or two.

Only for tasks that run on the controller anyway (``ansible_connection: local``, no ``async``, no
``become``, no ``environment``, and the ``kubernetes`` library importable here); anything else runs the module as usual.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.progress import ProgressFollower, run_followed
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.stop import StopSignal, Supervision
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import (
    argument_spec, failure, redact, restated, validate_args)
from ansible_collections.crdops.migration.plugins.modules.crd_storage_migrate import OPTIONS, migrate
from ansible_collections.crdops.migration.plugins.plugin_utils.job_on_controller import why_not_here

display = Display()


def stopped_message(reason, result):
    """What a stopped run did and what to do next, in front of the per-CRD problems."""
    return ("cluster %s: %s: no write was started after it; the writes in flight finished, the resume checkpoint is "
            "kept and nothing was trimmed. Run again to resume. %s" % (
                result.get("cluster") or "?", reason, result.get("msg") or "")).strip()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True

    def not_on_controller(self):
        """Why this task must run as a module (None when the pass can run here)."""
        return why_not_here(self._task, self._connection, self._play_context)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        why = self.not_on_controller()
        if why is not None:
            display.vvv("crd_storage_migrate runs as a module (%s)" % why)
            wrap_async = self._task.async_val and not self._connection.has_native_async
            result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        params, no_log, errors = validate_args(argument_spec(OPTIONS), self._task.args)
        if errors:
            return merge_hash(result, redact(failure(BadInputError("; ".join(errors)), changed=False), no_log))
        label = (task_vars or {}).get("inventory_hostname") or "localhost"
        return merge_hash(result, redact(self.run_here(params, label), no_log))

    def run_here(self, params, label):
        """The pass in this process, followed by progress lines and stopped by signals or a vanished parent."""
        warnings = []
        stop = StopSignal()
        follower = ProgressFollower()

        def emit(line):
            display.display("%s | %s" % (label, line))

        with Supervision(stop, watch_parent=True, time_limit=params["time_limit"]):
            res = run_followed(
                lambda: migrate(params, bool(self._play_context.check_mode), warnings.append, stop=stop,
                                follower=follower),
                follower, emit, float(params["progress_interval"] or 0))
        if stop.is_set():
            res = restated(res, stopped_message(stop.reason, res), "stopped")
        if warnings:
            res["warnings"] = warnings
        return res

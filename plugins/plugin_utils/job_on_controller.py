# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A crdops module's job run inside ansible-playbook's worker when the task runs on the controller anyway.

Why: a module task on the controller costs a Python process of its own (AnsiballZ: the payload written,
unpacked, imported) and, in it, the import of the ``kubernetes`` library, about 0.5 CPU-s before the first
request. The role runs such a task about ten times per cluster, so on a fleet that start-up is most of the
controller's time. The worker already is a Python process on the controller with the collection importable:
the same job (``_crdops_glue.Job``, the same skeleton ``execute``) runs there on the same validated options.

Only where the module would run on the controller anyway (``ansible_connection: local``, no ``async``, no
``become``, no task ``environment`` (K8S_AUTH_* set there reach a module, not this process), and the
``kubernetes`` library importable here); anything else runs the module as usual. The result goes through a
JSON round trip, so the task registers the same types the module would return.
"""

from __future__ import annotations

import json

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube import connection as _connection
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import (
    argument_spec, execute, failure, redact, validate_args)

display = Display()


def why_not_here(task, connection, play_context):
    """Why this task must run as a module (None when its job can run in this worker)."""
    if task.args.get("run_on_controller", "auto") == "never":
        return "run_on_controller=never"
    if task.async_val:
        return "async"
    if getattr(connection, "transport", None) != "local":
        return "connection %s" % getattr(connection, "transport", "?")
    if play_context.become:
        return "become"
    if any(task.environment or []):
        return "task environment"
    if not _connection.HAS_KUBERNETES:
        return "no kubernetes library on the controller"
    return None


class JobAction(ActionBase):
    """Subclasses set ``OPTIONS`` (the module's options) and ``JOB`` (its ``Job`` class)."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = True
    OPTIONS: dict = {}
    JOB = None

    def not_on_controller(self):
        return why_not_here(self._task, self._connection, self._play_context)

    def run(self, tmp=None, task_vars=None):
        result = super(JobAction, self).run(tmp, task_vars)
        del tmp
        why = self.not_on_controller()
        if why is not None:
            display.vvv("%s runs as a module (%s)" % (self._task.action, why))
            wrap_async = self._task.async_val and not self._connection.has_native_async
            result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        spec = argument_spec(self.OPTIONS, selection=self.JOB.SELECTS_CRDS)
        params, no_log, errors = validate_args(spec, self._task.args)
        if errors:
            return merge_hash(result, redact(failure(BadInputError("; ".join(errors)), changed=False), no_log))
        return merge_hash(result, redact(self.run_here(params), no_log))

    def run_here(self, params):
        warnings = []
        job = self.JOB(params, bool(self._play_context.check_mode), warnings.append,
                       diff=bool(getattr(self._play_context, "diff", False)))
        res = json.loads(json.dumps(execute(job), default=str))
        if warnings:
            res["warnings"] = warnings
        return res

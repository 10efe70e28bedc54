# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_release_apply on the controller: its job runs in ansible-playbook's worker, no module process (plugin_utils/job_on_controller.py)."""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.modules.crd_release_apply import OPTIONS, ReleaseApply
from ansible_collections.crdops.migration.plugins.plugin_utils.job_on_controller import JobAction


class ActionModule(JobAction):
    OPTIONS = OPTIONS
    JOB = ReleaseApply

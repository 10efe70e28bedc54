# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The crd_upgrade role's data shaping, behind one filter: ``x | crdops.migration.crd_upgrade_step('<step>', ...)``.

Ansible has no private filters: every filter a collection registers is listed by ``ansible-doc -t filter`` and
becomes an API. The role's steps (reading its inputs, plans, messages, the per-CRD result) change with the role,
so they are registered once, under a name that says so; the functions stay in the modules next to this one,
each unit-tested. Documented in crd_upgrade_step.yml.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.crd_upgrade import (
    crd_upgrade_client_records, crd_upgrade_client_summary, crd_upgrade_doubts, crd_upgrade_held_back_entry,
    crd_upgrade_leftovers, crd_upgrade_managed_fields_managers, crd_upgrade_others_saw, crd_upgrade_refusals,
    crd_upgrade_without)
from ansible_collections.crdops.migration.plugins.filter.fleet import (
    crd_upgrade_fleet_report, crd_upgrade_iso_utc, crd_upgrade_report_merge, crd_upgrade_report_prune,
    crd_upgrade_result_lines)
from ansible_collections.crdops.migration.plugins.filter.inputs import crd_upgrade_inputs
from ansible_collections.crdops.migration.plugins.filter.managed_fields import (
    crd_upgrade_removed_versions, crd_upgrade_unmappable)
from ansible_collections.crdops.migration.plugins.filter.phases import (
    crd_upgrade_etcd_mismatches, crd_upgrade_etcd_records, crd_upgrade_flipped, crd_upgrade_follow_names,
    crd_upgrade_plan, crd_upgrade_plan_line, crd_upgrade_report_clusters, crd_upgrade_result_crds, crd_upgrade_still_stored,
    crd_upgrade_storage_removed, crd_upgrade_unrecorded)
from ansible_collections.crdops.migration.plugins.filter.serving import (
    crd_upgrade_keep_served, crd_upgrade_kept_served, crd_upgrade_unserving)
from ansible_collections.crdops.migration.plugins.filter.preflight import (
    crd_upgrade_access_checks, crd_upgrade_rejections)
from ansible_collections.crdops.migration.plugins.filter.storage_diff import (
    storage_diff_lines, storage_diff_pruning, storage_diff_pruning_message)


class AnsibleFilterError(ValueError):
    """A bad value given to a filter (see fleet.py for why not ansible.errors')."""


STEPS = {
    # init
    "inputs": crd_upgrade_inputs,
    # preflight
    "access_checks": crd_upgrade_access_checks,
    "rejections": crd_upgrade_rejections,
    # discover, storage flip, storage diff
    "plan": crd_upgrade_plan,
    "plan_line": crd_upgrade_plan_line,
    "storage_removed": crd_upgrade_storage_removed,
    "still_stored": crd_upgrade_still_stored,
    "flipped": crd_upgrade_flipped,
    "follow_names": crd_upgrade_follow_names,
    "storage_diff_pruning": storage_diff_pruning,
    "storage_diff_lines": storage_diff_lines,
    "storage_diff_pruning_message": storage_diff_pruning_message,
    # restore (managedFields at the versions release N+1 removes)
    "removed_versions": crd_upgrade_removed_versions,
    "unmappable": crd_upgrade_unmappable,
    # verify
    "unrecorded": crd_upgrade_unrecorded,
    "etcd_records": crd_upgrade_etcd_records,
    "etcd_mismatches": crd_upgrade_etcd_mismatches,
    # upgrade to N+1
    "refusals": crd_upgrade_refusals,
    "doubts": crd_upgrade_doubts,
    "leftovers": crd_upgrade_leftovers,
    "held_back_entry": crd_upgrade_held_back_entry,
    "without": crd_upgrade_without,
    # versions release N stops serving
    "unserving": crd_upgrade_unserving,
    "keep_served": crd_upgrade_keep_served,
    "kept_served": crd_upgrade_kept_served,
    "client_summary": crd_upgrade_client_summary,
    "client_records": crd_upgrade_client_records,
    "managed_fields_managers": crd_upgrade_managed_fields_managers,
    "others_saw": crd_upgrade_others_saw,
    # result and report
    "iso_utc": crd_upgrade_iso_utc,
    "result_crds": crd_upgrade_result_crds,
    "result_lines": crd_upgrade_result_lines,
    "report_prune": crd_upgrade_report_prune,
    "report_clusters": crd_upgrade_report_clusters,
    "fleet_report": crd_upgrade_fleet_report,
    "report_merge": crd_upgrade_report_merge,
}


def crd_upgrade_step(value, step, *args, **kwargs):
    """``STEPS[step](value, *args, **kwargs)``."""
    try:
        function = STEPS[step]
    except (KeyError, TypeError):
        raise AnsibleFilterError("crd_upgrade_step: no step %r; the steps are %s"
                                 % (step, ", ".join(sorted(STEPS)))) from None
    return function(value, *args, **kwargs)


class FilterModule:
    def filters(self):
        return {"crd_upgrade_step": crd_upgrade_step}

#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_stored_versions_trim
short_description: Trim a CRD's status.storedVersions, only with proof of a complete migration
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
description:
  - Sets C(status.storedVersions) of each selected CRD to its storage version (or removes only O(versions)).
  - Requires a valid migration record written by M(crdops.migration.crd_storage_migrate) after a complete
    pass with zero failures, at the CRD's current storage version and generation. A missing or stale record
    is refused unless O(force=true). A valid record whose proof is C(none) is refused unless O(accept_unproven=true).
  - Never removes the storage version. The status write carries the C(resourceVersion) that was read, so it
    fails if the CRD changed since ("CRD changed since it was read").
  - Outside check mode, every trim leaves an Event C(StoredVersionsTrimmed) on the CRD and every refusal a Warning
    Event C(StoredVersionsTrimRefused) (C(kubectl describe crd) shows them; they live in namespace C(default)).
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  diff_mode:
    support: full
options:
  versions:
    description:
      - Versions to remove from C(status.storedVersions). Unset means keep only the storage version.
      - Naming the storage version is refused.
    type: list
    elements: str
  force:
    description:
      - Trim even when the migration record is missing or stale. Overrides only the record check, never
        the storage-version and optimistic-lock checks. Dangerous - objects still stored at a removed version
        become unreadable once that version is removed from the CRD.
    type: bool
    default: false
  accept_unproven:
    description:
      - "Trim on a valid record whose proof is C(none) (written with O(crdops.migration.crd_storage_migrate#module:confirm_passes=0),
        or by an earlier run that recorded no proof): no etcd scan and no confirming pass showed that every object is stored at the
        storage version. Refused by default. Set it after checking etcd yourself (M(crdops.migration.crd_storage_verify))."
      - The record's proof is returned as C(proof) in RV(crds[].migration_record).
    type: bool
    default: false
    version_added: 1.0.0
  accept_settle_fallback:
    description:
      - Trim on a valid record whose pass began after the HA barrier's settle fallback
        (O(crdops.migration.crd_storage_migrate#module:barrier_fallback=settle) - not every apiserver reachable, so the
        run waited instead of seeing each one write the new storage version) and whose proof is a confirming pass. An
        apiserver still encoding the older version would have answered C(unchanged) to that pass too (equal bytes).
        Refused by default; a record proven from etcd is taken.
      - The record's barrier mode is returned as C(barrierMode) in RV(crds[].migration_record).
    type: bool
    default: false
    version_added: 1.0.0
seealso:
  - module: crdops.migration.crd_storage_migrate
  - module: crdops.migration.crd_storage_info
'''

EXAMPLES = r'''
- name: Trim storedVersions after a recorded migration
  crdops.migration.crd_stored_versions_trim:
    context: prod-eu-1
    names: [crontabs.stable.example.com]
  diff: true

- name: Only drop v1alpha1
  crdops.migration.crd_stored_versions_trim:
    names: [crontabs.stable.example.com]
    versions: [v1alpha1]
'''

RETURN = r'''
crds:
  description: One entry per selected CRD.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always}
    storage_version: {description: Storage version., type: str, returned: always}
    stored_versions_before: {description: C(status.storedVersions) before., type: list, elements: str, returned: always}
    stored_versions_after: {description: C(status.storedVersions) after (predicted in check mode)., type: list, elements: str, returned: always}
    changed: {description: This CRD was (or in check mode would be) changed., type: bool, returned: always}
    forced: {description: The record check was overridden by O(force)., type: bool, returned: always}
    migration_record: {description: The record with C(valid) and C(reason)., type: dict, returned: always}
    event_error:
      description: Why the C(StoredVersionsTrimmed) Event about this trim could not be posted (null when it was, or none was due).
      type: str
      returned: always
event_errors:
  description:
    - Events about refused trims (C(StoredVersionsTrimRefused)) that could not be posted. An Event is a note for
      C(kubectl describe crd) readers; failing to post one never fails the task.
  returned: always
  type: list
  elements: str
diff:
  description: Per CRD C(before)/C(after) C(storedVersions), when running with C(--diff).
  returned: when diff mode is on and something changed
  type: list
  elements: dict
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import Job, argument_spec, run_module
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.trim import trim_stored_versions

OPTIONS = dict(
    versions=dict(type="list", elements="str"),
    force=dict(type="bool", default=False),
    accept_unproven=dict(type="bool", default=False),
    accept_settle_fallback=dict(type="bool", default=False),
)


class Trim(Job):
    RESULT = dict(crds=[], event_errors=[])
    WHAT = "crd_stored_versions_trim"

    def run(self, transport, crds):
        p = self.params
        for crd in crds:
            res = trim_stored_versions(transport, crd.name, versions=p["versions"], force=p["force"],
                                       check_mode=self.check_mode, event_errors=self.result["event_errors"],
                                       accept_unproven=p["accept_unproven"],
                                       accept_settle_fallback=p["accept_settle_fallback"])
            self.result["crds"].append(res.to_dict())
            if res.changed:
                self.result["changed"] = True
                if self.diff:
                    self.result.setdefault("diff", []).append(res.diff())
                if res.forced:
                    self.warn("CRD %s: storedVersions trimmed without a valid migration record (force=true): %s"
                              % (res.name, res.record.get("reason")))


def main():
    run_module(argument_spec(OPTIONS), Trim)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_storage_info
short_description: Report CRD storage versions, stored versions, object counts and migration records
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
requirements:
  - kubernetes >= 24.2.0 (tested with 37.0.2)
  - PyYAML >= 6.0 (reads target_manifests given as file paths)
  - orjson (optional, faster JSON decoding)
description:
  - Read-only discovery and plan for CustomResourceDefinitions.
  - For each selected CRD reports its versions (served, storage, deprecated), C(status.storedVersions),
    whether a storage migration is needed, the conversion strategy and webhook, the object count,
    the migration record written by M(crdops.migration.crd_storage_migrate) and whether it is valid.
  - Given the manifests of the next release (O(target_manifests)), reports the versions it would remove
    that are still stored (the "skip-a-version trap"), before anything is applied.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  target_manifests:
    description:
      - CRD manifests of the release you intend to apply next. Each item is a path to a YAML file
        (multi-document files allowed) or a CRD as a dictionary.
      - Every document must be a C(CustomResourceDefinition); anything else is an error naming the
        file and document index.
    type: list
    elements: raw
    default: []
  count_objects:
    description:
      - Count the objects of each CRD (one C(LIST limit=1) request per CRD).
    type: bool
    default: true
  managed_fields_sample:
    description:
      - When greater than 0, read the metadata of this many objects per CRD and report managedFields
        entries whose apiVersion is no longer served (kubernetes#111937). A sample, not a full scan.
    type: int
    default: 0
seealso:
  - module: kubernetes.core.k8s_info
  - module: crdops.migration.crd_storage_migrate
  - module: crdops.migration.crd_stored_versions_trim
'''

EXAMPLES = r'''
- name: Which CRDs of cluster.x-k8s.io still store old versions?
  crdops.migration.crd_storage_info:
    kubeconfig: ~/.kube/fleet.yaml
    context: prod-eu-1
    group: cluster.x-k8s.io
  register: info

- name: Would the next release remove a version that is still stored?
  crdops.migration.crd_storage_info:
    names: [crontabs.stable.example.com]
    target_manifests:
      - files/release-2.0/crds.yaml
  register: plan

- name: Stop before the trap
  ansible.builtin.assert:
    that: plan.crds | map(attribute='blocked_removals') | flatten | length == 0
'''

RETURN = r'''
crds:
  description: One entry per selected CRD, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always, sample: crontabs.stable.example.com}
    group: {description: API group., type: str, returned: always, sample: stable.example.com}
    kind: {description: Kind of the custom resources., type: str, returned: always, sample: CronTab}
    scope: {description: C(Namespaced) or C(Cluster)., type: str, returned: always}
    versions:
      description: C(spec.versions) as C(name), C(served), C(storage), C(deprecated).
      type: list
      elements: dict
      returned: always
    storage_version: {description: The version objects are written in., type: str, returned: always, sample: v1beta1}
    stored_versions: {description: C(status.storedVersions)., type: list, elements: str, returned: always, sample: [v1alpha1, v1beta1]}
    needs_migration:
      description: C(stored_versions) is not exactly the list of the storage version.
      type: bool
      returned: always
    conversion:
      description: Conversion C(strategy) and C(webhook) (with C(caBundle) removed).
      type: dict
      returned: always
    object_count: {description: Number of objects (null when not counted or unknown)., type: int, returned: always}
    migration_record:
      description: The migration record annotation with C(valid), C(reason) and C(present).
      type: dict
      returned: always
      sample: {present: true, valid: false, reason: "stale: record is for CRD generation 3, the CRD's generation is 4"}
    checkpoint: {description: Resume checkpoint of an unfinished migration., type: dict, returned: always}
    target_found: {description: O(target_manifests) contains this CRD., type: bool, returned: always}
    target_storage_version: {description: Storage version in the target manifest., type: str, returned: always}
    blocked_removals:
      description: Versions still in C(status.storedVersions) that the target manifest removes; applying it would be refused.
      type: list
      elements: str
      returned: always
      sample: [v1alpha1]
    removed_versions: {description: Versions the target manifest removes from C(spec.versions)., type: list, elements: str, returned: always}
    stale_managed_fields:
      description: Objects (of the sample) with managedFields entries at versions no longer served.
      type: list
      elements: dict
      returned: when O(managed_fields_sample) > 0
cluster:
  description: Secret-free name of the cluster (context, host or kubeconfig).
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import CrdOpsModule, argument_spec
from ansible_collections.crdops.migration.plugins.module_utils._crdops.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.info import describe_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.plan import load_targets
from ansible_collections.crdops.migration.plugins.module_utils._crdops.selection import select_crds


def main():
    m = CrdOpsModule(argument_spec(dict(
        target_manifests=dict(type="list", elements="raw", default=[]),
        count_objects=dict(type="bool", default=True),
        managed_fields_sample=dict(type="int", default=0),
    )), supports_check_mode=True)
    p = m.params
    result = dict(changed=False, crds=[])
    if p["managed_fields_sample"] < 0:
        m.module.fail_json(msg="managed_fields_sample must be >= 0", **result)
    try:
        selection = m.selection()
        selection.validate()
        targets = load_targets(p["target_manifests"])
    except CrdOpsError as exc:
        m.fail(exc, **result)
    transport = m.connect(pool_size=2)
    result["cluster"] = transport.cluster_label
    try:
        for crd in select_crds(transport, selection):
            result["crds"].append(describe_crd(transport, crd, count=p["count_objects"], targets=targets,
                                               managed_fields_sample=p["managed_fields_sample"]))
    except CrdOpsError as exc:
        m.fail(exc.with_context(cluster=transport.cluster_label), **result)
    finally:
        close = getattr(transport, "close", None)
        if callable(close):
            close()
    m.module.exit_json(**result)


if __name__ == "__main__":
    main()

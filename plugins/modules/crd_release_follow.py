#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_release_follow
short_description: Remove from live CRDs the fields the previous release declared and the applied release does not
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
description:
  - Run after applying a CRD release with server-side apply. A forced apply removes a field the release stopped
    declaring only when the applying manager was its only owner; a CRD created by C(kubectl create), Helm or an
    operator keeps its creator as a co-owner, so the field stays (cert-manager v1.7.1 has no C(spec.conversion);
    after the apply the CRDs still said C(strategy=Webhook)).
  - For each CRD in both O(manifests) and O(previous_manifests), removes from the live CRD every path of the
    previous manifest (under C(spec), and label and annotation keys) that the applied manifest does not have,
    whoever owns it. A dropped struct under C(spec) goes whole, with fields other tools wrote inside it (reported
    as C(injected)). Fields no release declared stay, such as the C(caBundle) a CA injector writes while the
    release still declares C(spec.conversion).
  - One JSON patch per CRD, a C(test) of C(metadata.resourceVersion) first, then a C(remove) per path; a CRD
    changed by someone else in between is read again (3 reads at most). A removal the apiserver refuses fails the
    task naming the CRD, the fields and the API's message; nothing is removed from that CRD.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  check_mode:
    details: reads each CRD and returns what would be removed
options:
  manifests:
    description:
      - The CRD manifests of the release that was applied (file paths, globs, or CRDs as dictionaries; documents
        that are not CRDs are skipped).
    type: list
    elements: raw
    required: true
  previous_manifests:
    description:
      - The CRD manifests of the release that was in place before (same forms as O(manifests)). A CRD that is
        not in both is left alone.
    type: list
    elements: raw
    required: true
  field_manager:
    description:
      - Field manager of the patch (as C(server_side_apply.field_manager) of M(kubernetes.core.k8s)). A patch that
        only removes fields gives it no field.
    type: str
    default: crdops-migration
notes:
  - Without O(names) (or another selection), the CRDs of O(manifests) are selected; each must exist.
seealso:
  - module: crdops.migration.crd_storage_info
'''

EXAMPLES = r'''
- name: Apply cert-manager v1.7.1's CRDs
  kubernetes.core.k8s:
    src: cert-manager-v1.7.1.crds.yaml
    apply: true
    server_side_apply: {field_manager: crdops-migration, force_conflicts: true}

- name: Drop what v1.6.1 declared and v1.7.1 does not (spec.conversion)
  crdops.migration.crd_release_follow:
    manifests: [cert-manager-v1.7.1.crds.yaml]
    previous_manifests: [cert-manager-v1.6.1.crds.yaml]
'''

RETURN = r'''
crds:
  description: One entry per CRD in both releases.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always}
    dropped_by_release: {description: Paths the previous manifest has and the applied one does not., type: list, elements: str, returned: always}
    removed:
      description:
        - The paths removed from the live CRD (would be, in check mode), each with C(path), C(pointer) (JSON
          pointer), C(owners) (managers and operations that owned it or something inside it) and C(injected)
          (fields inside it that the previous release did not declare).
      type: list
      elements: dict
      returned: always
    changed: {description: The CRD was patched., type: bool, returned: always}
    attempts: {description: Reads of the CRD (more than one when someone else wrote it in between)., type: int, returned: always}
    resource_version_before: {description: C(metadata.resourceVersion) of the CRD read last., type: str, returned: always}
    resource_version_after: {description: C(metadata.resourceVersion) after the patch (unchanged when none)., type: str, returned: always}
    record:
      description:
        - A removal under C(spec) moves the CRD's generation on. Its migration record (written by
          M(crdops.migration.crd_storage_migrate)) then names the new generation - C(carried to generation <n>) -
          when it was valid just before, the patch moved the generation by one, and the storage version,
          C(status.storedVersions) (the storage version alone) and the record are still as they were; else why not.
        - Null when nothing was removed or there was no valid record to carry.
      type: str
      returned: always
      version_added: 1.0.0
messages:
  description: One line per CRD saying what was removed, or that nothing was left over.
  returned: always
  type: list
  elements: str
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import Job, argument_spec, run_module
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.manifests import read_manifests
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.follow import (
    follow_release, pair_manifests)

OPTIONS = dict(
    manifests=dict(type="list", elements="raw", required=True),
    previous_manifests=dict(type="list", elements="raw", required=True),
    field_manager=dict(type="str", default="crdops-migration"),
)


class Follow(Job):
    RESULT = dict(crds=[], messages=[])
    WHAT = "crd_release_follow"

    def prepare(self):
        p = self.params
        applied = [m.doc for m in read_manifests(p["manifests"], "manifests").crds]
        previous = [m.doc for m in read_manifests(p["previous_manifests"], "previous_manifests").crds]
        self.pairs = pair_manifests(previous, applied)
        if not (p["names"] or p["group"] or p["label_selector"] or p["all"]):
            p["names"] = [doc["metadata"]["name"] for doc in applied]

    def run(self, transport, crds):
        selected = set(c.name for c in crds)
        for previous, applied in self.pairs:
            if applied["metadata"]["name"] not in selected:
                continue
            res = follow_release(transport, previous, applied, field_manager=self.params["field_manager"],
                                 check_mode=self.check_mode)
            self.result["crds"].append(res.to_dict())
            self.result["messages"].append(res.summary())
            self.result["changed"] = self.result["changed"] or bool(res.removed)


def main():
    run_module(argument_spec(OPTIONS), Follow)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_storage_repair
short_description: Make a CRD's objects readable again after a version they are stored at was removed
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
requirements:
  - PyYAML (to read O(previous_manifests) files)
description:
  - Repairs the state in which objects are still stored in etcd at a version the CRD no longer has, for
    example after C(status.storedVersions) was trimmed by hand and the next release was applied. Every LIST
    of the resource then fails with HTTP 500 C(StorageReadError ... corrupt object ... Key /registry/...).
  - "Steps per CRD: add each missing version back to C(spec.versions) (C(served: true), C(storage: false), C(deprecated: true)),
    wait until the resource is readable, re-store every object at the storage version (as
    M(crdops.migration.crd_storage_migrate): empty merge patches, a complete pass with zero failures writes
    the migration record), verify from etcd when O(etcd_url) is given, trim C(status.storedVersions) with
    that record, and remove the added versions again."
  - "Which versions are missing comes from: O(versions) when given; otherwise the C(apiVersion) of every
    key in etcd (O(etcd_url)) and the version the LIST error names (kube-apiserver 1.37 says C(request to
    convert CR from an invalid group/version: <group>/<version>)); otherwise the versions of the CRD in
    O(previous_manifests) that the live CRD lacks. When none of them tells, the module refuses and says
    what to give."
  - "The schema of an added version is taken from O(previous_manifests) when that release has the version,
    else a permissive one (C(type: object), C(x-kubernetes-preserve-unknown-fields: true)) that keeps every field."
  - Both CRD edits carry the C(resourceVersion) that was read (optimistic lock), so they fail instead of
    overwriting a CRD somebody changed meanwhile. The versions added are recorded in the annotation
    C(migration.crdops.io/storage-repair) in the same write; a rerun after an interruption continues from
    there and removes them at the end.
  - For C(conversion.strategy=Webhook) the webhook must convert the added versions; the re-store probes it
    and stops at the first conversion failure. C(None) conversion needs nothing else.
  - Posts Kubernetes Events on the CRD (C(StorageRepairStarted), C(StorageRepairSucceeded),
    C(StorageRepairFailed)), visible with C(kubectl describe crd).
  - A CRD whose objects are all readable (and, with O(etcd_url), all stored at versions the CRD has) is
    reported as C(nothing to repair) and not touched.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._etcd
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  check_mode:
    details: Reports the missing versions, their evidence, the object count when known and the steps; writes nothing (no Event either).
  idempotent:
    details: A repaired (healthy) CRD is reported with C(changed=false).
options:
  versions:
    description:
      - Versions to add back. Unset - determined from etcd, the LIST error and O(previous_manifests).
      - Versions already in C(spec.versions) are refused. With O(etcd_url), etcd must show no object at a
        removed version that this list leaves out.
    type: list
    elements: str
  previous_manifests:
    description:
      - CRD manifests of the previous release (the one that still had the removed version); YAML file paths
        (multi-document), globs or CRD dicts; documents that are not CRDs are skipped. Used for the schema of
        the added version and, when nothing else names it, to find the missing version (versions it has that
        the live CRD lacks).
    type: list
    elements: raw
    default: []
  etcd_url:
    description:
      - Client URL of one etcd member. When given, the keys of each CRD are read before (to find the versions
        objects are stored at, and count them) and after the re-store (every key must be at the storage version
        before the trim).
    type: str
  page_size:
    description: Objects per LIST page (probe and re-store). Must be greater than 0.
    type: int
    default: 500
  workers:
    description: Concurrent no-op writes during the re-store at most. Must be greater than 0.
    type: int
    default: 8
  pace:
    description:
      - V(gentle) adapts the writes in flight (1 to O(workers)) to their latency; V(max) keeps O(workers) writes in flight.
        See the option of the same name of M(crdops.migration.crd_storage_migrate). O(max_qps) caps both.
    type: str
    choices: [gentle, max]
    default: gentle
    version_added: 1.0.0
  max_qps:
    description: Cap on requests per second. Unset - no cap.
    type: float
  retry_deadline:
    description: Seconds one request is retried (429, 5xx, connection errors) before it counts as failed.
    type: float
    default: 120
  wait_timeout:
    description: Seconds to wait, after each CRD edit, until every object can be listed again.
    type: float
    default: 60
  diff_sample:
    description:
      - With O(etcd_url), once the added versions make the objects readable and before the re-store writes any,
        this many stored objects are compared with what the re-store would store (RV(crds[].storage_diff), as
        M(crdops.migration.crd_storage_info) does). Stored fields it would delete for good, or objects it could
        not compare, stop the repair unless O(accept_pruning). V(0) turns the comparison off (reported).
    type: int
    default: 20
    version_added: 1.0.0
  accept_pruning:
    description: Re-store even when the storage diff shows stored fields the re-store deletes for good.
    type: bool
    default: false
    version_added: 1.0.0
  lease_namespace:
    description:
      - Namespace of the pass Lease C(crdops-pass-<crd>) the repair holds from its first CRD edit to its last, the
        Lease of M(crdops.migration.crd_storage_migrate); a repair never interleaves with a re-store or another
        repair of the same CRD.
    type: str
    default: default
    version_added: 1.0.0
  lease_wait:
    description: Seconds to wait for a pass Lease held by another run before failing with its holder.
    type: float
    default: 60
    version_added: 1.0.0
seealso:
  - module: crdops.migration.crd_storage_migrate
  - module: crdops.migration.crd_stored_versions_trim
  - module: crdops.migration.crd_storage_verify
'''

EXAMPLES = r'''
- name: What would the repair do? (writes nothing)
  crdops.migration.crd_storage_repair:
    context: prod-eu-1
    names: [widgets.example.com]
    previous_manifests: [crds/release-n/widgets.yaml]
  check_mode: true

- name: Repair, with the proof from etcd
  crdops.migration.crd_storage_repair:
    context: prod-eu-1
    names: [widgets.example.com]
    previous_manifests: [crds/release-n/widgets.yaml]
    etcd_url: https://10.0.0.5:2379
    etcd_ca_cert: /etc/kubernetes/pki/etcd/ca.crt
    etcd_client_cert: /etc/kubernetes/pki/apiserver-etcd-client.crt
    etcd_client_key: /etc/kubernetes/pki/apiserver-etcd-client.key
'''

RETURN = r'''
crds:
  description: One entry per selected CRD.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always}
    broken: {description: Objects are stored at a version the CRD lacks (or a repair was interrupted)., type: bool, returned: always}
    changed: {description: This CRD was (in check mode - would be) changed., type: bool, returned: always}
    message: {description: "One line - nothing to repair, would repair (the steps), or repaired (what was done).", type: str, returned: always}
    missing_versions: {description: Versions added back (or to add back in check mode)., type: list, elements: str, returned: always}
    evidence:
      description: >-
        Versions the CRD lacks per source - C(list_error) (named by the LIST error), C(etcd) (stored keys),
        C(previous_manifest), C(option) (O(versions)), C(interrupted_repair) (still added by an earlier run).
      type: dict
      returned: always
    schema_sources: {description: "Per added version, where its schema came from.", type: dict, returned: always}
    object_count: {description: "Objects of the CRD (etcd keys, or the LIST count when readable); null when unknown.", type: int, returned: always}
    list_before:
      description: >-
        The LIST probe before the repair - C(readable), C(status), C(reason), C(message), C(named_versions),
        C(unreadable_reported).
      type: dict
      returned: always
    steps: {description: The plan., type: list, elements: str, returned: always}
    done: {description: The steps done., type: list, elements: str, returned: always}
    added_versions: {description: Versions added back by this run., type: list, elements: str, returned: always}
    removed_versions: {description: Versions removed again at the end., type: list, elements: str, returned: always}
    versions_before: {description: C(spec.versions) names before., type: list, elements: str, returned: always}
    versions_after: {description: C(spec.versions) names after., type: list, elements: str, returned: always}
    stored_versions_before: {description: C(status.storedVersions) before., type: list, elements: str, returned: always}
    stored_versions_after: {description: C(status.storedVersions) after., type: list, elements: str, returned: always}
    restore: {description: The re-store pass (the counts of M(crdops.migration.crd_storage_migrate))., type: dict, returned: when a pass ran}
    etcd_before: {description: "etcd scan before (keys, counts per apiVersion).", type: dict, returned: with O(etcd_url)}
    etcd_after:
      description: etcd scan after the re-store; C(verified) is true when every key is at the storage version.
      type: dict
      returned: with O(etcd_url) and a pass
    readable_after: {description: Objects listed after the added versions were removed again., type: int, returned: always}
    warnings: {description: For example that a conversion webhook must convert the added versions., type: list, elements: str, returned: always}
    storage_diff:
      description: The storage diff before the re-store (see O(diff_sample)); C(checked=false) with C(reason) without etcd.
      type: dict
      returned: when a repair ran
    versions_owners:
      description:
        - The managers owning C(spec.versions) before the repair (C(owners_before)), after its edits (C(owners_after_edit))
          and after it gave the list back (C(owners_now)); C(changed) when managedFields were rewritten for that.
      type: dict
      returned: when a repair ran
    lease:
      description: The pass Lease held during the repair (as in M(crdops.migration.crd_storage_migrate)).
      type: dict
      returned: when a repair ran
repaired:
  description: Names of the CRDs repaired (in check mode - that would be).
  returned: always
  type: list
  elements: str
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import (
    ETCD_ARG_SPEC, Job, argument_spec, run_module)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import EtcdSampler
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.repair import (
    RepairOptions, etcd_scanner, repair_crd, storage_differ)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions

OPTIONS = dict(
    versions=dict(type="list", elements="str"),
    previous_manifests=dict(type="list", elements="raw", default=[]),
    page_size=dict(type="int", default=500),
    workers=dict(type="int", default=8),
    pace=dict(type="str", choices=["gentle", "max"], default="gentle"),
    max_qps=dict(type="float"),
    retry_deadline=dict(type="float", default=120),
    wait_timeout=dict(type="float", default=60),
    diff_sample=dict(type="int", default=20),
    accept_pruning=dict(type="bool", default=False),
    lease_namespace=dict(type="str", default="default"),
    lease_wait=dict(type="float", default=60),
    **ETCD_ARG_SPEC
)


class Repair(Job):
    RESULT = dict(crds=[], repaired=[])
    WHAT = "crd_storage_repair"

    def prepare(self):
        p = self.params
        self.options = RepairOptions(
            versions=tuple(p["versions"] or ()), check_mode=self.check_mode, wait_timeout=p["wait_timeout"],
            accept_pruning=p["accept_pruning"], lease_namespace=p["lease_namespace"], lease_wait=p["lease_wait"],
            previous_manifests=tuple(p["previous_manifests"] or ()),  # a path's ~ is expanded where the file is read
            restore=RestoreOptions(page_size=p["page_size"], workers=p["workers"], pace=p["pace"],
                                   check_mode=self.check_mode, preflight_sample=0))
        self.options.validate()
        self.require_etcd_client()

    def run(self, transport, crds):
        reader = self.etcd(EtcdSampler)  # reads every key (the scans) and a sample (the storage diff)
        differ = storage_differ(transport, reader, self.params["etcd_prefix"], self.params["diff_sample"]) \
            if reader else None
        for crd in crds:
            res = repair_crd(transport, crd.name, self.options, etcd_scan=etcd_scanner(reader) if reader else None,
                             storage_diff=differ)
            self.result["crds"].append(res.to_dict())
            if res.changed:
                self.result["changed"] = True
                self.result["repaired"].append(res.name)
            for warning in res.warnings:
                self.warn(warning)

    def partial(self, error=None):
        done = getattr(error, "partial_result", None)  # the CRD the error stopped, as far as it got
        if not done:
            return self.result
        return dict(self.result, crds=self.result["crds"] + [done],
                    changed=self.result["changed"] or bool(done.get("changed")))


def main():
    run_module(argument_spec(OPTIONS), Repair)


if __name__ == "__main__":
    main()

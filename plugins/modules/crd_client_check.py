#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_client_check
short_description: Prove that server-side apply clients still work on the objects of CRDs (dry-run)
version_added: 1.1.0
author:
  - crdops.migration contributors (@crdops)
requirements:
  - kubernetes >= 24.2.0, < 38 (CI tests both ends, 24.2.0 and 37.0.2)
description:
  - For a sample of the objects of each selected CRD, re-applies as each field manager with an C(Apply)
    entry in C(metadata.managedFields) exactly the fields that manager owns, with server-side apply,
    C(dryRun=All) and no force. Objects without C(Apply) entries get a dry-run apply of their bare identity
    by O(probe_manager). Every such request must succeed.
  - An object applied at a version that was later removed from the CRD keeps a managedFields entry at that
    version, and every server-side apply to it (Argo CD, Flux, Helm 4, C(kubectl apply --server-side)) fails
    with HTTP 500 C(request to convert CR to an invalid group/version)
    (U(https://github.com/kubernetes/kubernetes/issues/111937)). GET, LIST and merge patches still work, so
    only an apply shows it. Every object's metadata is also listed and objects with managedFields entries at
    versions the CRD no longer has are counted; any such object fails the check.
  - An C(Apply) entry is applied at its own version while the CRD still serves it (what the manager would send),
    else at the storage version.
  - Never writes an object (C(dryRun=All)), so it runs in check mode too. Outside check mode a Kubernetes Event
    on each CRD records the outcome (O(events)).
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
  sample:
    description:
      - Objects per CRD to check. Objects with entries at removed versions are chosen first, then one object for
        each new combination of manager, operation, apiVersion and subresource, then the first ones listed.
    type: int
    default: 10
  check_all_below:
    description: A CRD with at most this many objects has every object checked, whatever O(sample) says.
    type: int
    default: 50
  page_size:
    description: Objects per page of the metadata-only listing.
    type: int
    default: 500
  probe_manager:
    description: Field manager of the identity-only dry-run apply on objects that have no C(Apply) entry.
    type: str
    default: crdops-client-check
  retry_deadline:
    description:
      - Seconds one request may spend on retries. The HTTP 500 of a broken object is retried like any 500,
        so keep this short.
    type: float
    default: 5
  fail_on_error:
    description: Fail when any CRD does not pass. With V(false) the result still says C(ok=false).
    type: bool
    default: true
  events:
    description:
      - Post a Kubernetes Event on each CRD with the outcome (reason C(ClientCheckPassed) or the warning
        C(ClientCheckFailed)). Never in check mode.
    type: bool
    default: true
seealso:
  - module: crdops.migration.crd_storage_migrate
  - module: crdops.migration.crd_storage_info
notes:
  - Needs C(patch) on the custom resources (a dry-run apply is authorised like a real one), C(list) and C(get)
    on them, C(get)/C(list) on CRDs and, with O(events), C(create) on C(events) in namespace C(default).
'''

EXAMPLES = r'''
- name: Clients can still apply to the widgets after the upgrade
  crdops.migration.crd_client_check:
    context: prod-eu-1
    names: [widgets.example.com]
    sample: 20

- name: Audit a whole API group without failing
  crdops.migration.crd_client_check:
    group: gateway.networking.k8s.io
    fail_on_error: false
  register: clients
'''

RETURN = r'''
crds:
  description: One entry per selected CRD.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always}
    storage_version: {description: The CRD's storage version., type: str, returned: always}
    listed: {description: Objects listed (metadata only)., type: int, returned: always}
    checked_objects: {description: Objects whose managers were checked., type: int, returned: always}
    applies: {description: Dry-run applies of a manager's own fields., type: int, returned: always}
    probes: {description: Identity-only dry-run applies (objects without Apply entries)., type: int, returned: always}
    gone: {description: Sampled objects deleted before they were checked., type: int, returned: always}
    stale_not_applied:
      description:
        - Sampled objects with entries at removed versions that were not sent a dry-run (counted in C(stale_objects)).
          Three such objects, plus one per new combination of entries, already show the API's message.
      type: int
      returned: always
    managers: {description: Field managers whose applies were checked., type: list, elements: str, returned: always}
    failed: {description: Failed dry-run applies (and reads)., type: int, returned: always}
    failures:
      description: Up to 20 failures with C(object), C(manager), C(operation) (C(Apply), C(probe) or C(read)),
        C(api_version), C(status) and the API's C(message).
      type: list
      elements: dict
      returned: always
      sample:
        - object: team-a/widget-001
          manager: argocd-controller
          operation: Apply
          api_version: example.com/v1beta1
          status: 500
          message: "request to convert CR to an invalid group/version: example.com/v1alpha1"
    stale_objects: {description: Objects with managedFields entries at versions the CRD no longer has., type: int, returned: always}
    stale_examples: {description: Up to 20 of them (namespace/name)., type: list, elements: str, returned: always}
    ok: {description: No failure and no stale object., type: bool, returned: always}
ok:
  description: Every selected CRD passed.
  returned: always
  type: bool
failed_checks:
  description: Failed dry-run applies over all CRDs.
  returned: always
  type: int
stale_objects:
  description: Objects with entries at removed versions over all CRDs.
  returned: always
  type: int
cluster:
  description: Secret-free name of the cluster (context, host or kubeconfig).
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import Job, argument_spec, run_module
from ansible_collections.crdops.migration.plugins.module_utils._crdops.client_check import (
    ClientCheckOptions, check_crd, post_outcome)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.errors import OutcomeError

OPTIONS = dict(
    sample=dict(type="int", default=10),
    check_all_below=dict(type="int", default=50),
    page_size=dict(type="int", default=500),
    probe_manager=dict(type="str", default="crdops-client-check"),
    retry_deadline=dict(type="float", default=5.0),
    fail_on_error=dict(type="bool", default=True),
    events=dict(type="bool", default=True),
)


class ClientCheck(Job):
    RESULT = dict(crds=[], ok=False, failed_checks=0, stale_objects=0)
    WHAT = "crd_client_check"

    def prepare(self):
        p = self.params
        self.options = ClientCheckOptions(sample=p["sample"], check_all_below=p["check_all_below"],
                                          page_size=p["page_size"], probe_manager=p["probe_manager"])
        self.options.validate()
        self.checks = []

    def run(self, transport, crds):
        o = self.options
        for crd in crds:
            check = check_crd(transport, crd, sample=o.sample, check_all_below=o.check_all_below,
                              page_size=o.page_size, probe_manager=o.probe_manager)
            self.checks.append(check)
            self.result["crds"].append(check.to_dict())
            if self.params["events"] and not self.check_mode:
                post_outcome(transport, crd, check)

    def finish(self):
        checks, cluster = self.checks, self.result["cluster"]
        bad = [c for c in checks if not c.ok]
        self.result.update(ok=not bad, failed_checks=sum(len(c.failures) for c in checks),
                           stale_objects=sum(c.stale_objects for c in checks))
        if bad and self.params["fail_on_error"]:
            raise OutcomeError("client_check", "cluster %s: server-side apply would fail: %s" % (
                cluster, "; ".join("CRD %s: %s" % (c.name, c.summary()) for c in bad)), cluster=cluster, crd=bad[0].name)


def main():
    run_module(argument_spec(OPTIONS), ClientCheck)


if __name__ == "__main__":
    main()

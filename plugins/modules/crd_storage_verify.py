#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_storage_verify
short_description: Prove from etcd that every object of a CRD is stored at its storage version
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
requirements:
  - urllib3 (a dependency of kubernetes; reads etcd's grpc-gateway)
description:
  - Reads the selected CRDs through the API to learn group, plural and storage version, then reads every
    key of their objects straight from etcd and reports the C(apiVersion) each one is encoded at.
  - The apiserver answers at whatever version it is asked for, so only etcd shows whether objects were
    really re-encoded. For self-managed clusters whose etcd the controller can reach.
  - Read-only; never writes to the cluster or to etcd.
  - Objects encrypted at rest (C(k8s:enc:) prefix) cannot be decoded and are reported as C(<encrypted>).
  - Zero keys never verify a CRD whose objects the API lists - a wrong O(etcd_prefix) would read nothing and pass. The
    module then fails (whatever O(fail_on_mismatch) says) naming the prefix tried and, when it finds the CRD's keys
    under another top-level prefix of etcd (C(/kubernetes.io) on OpenShift), that prefix.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._etcd
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
options:
  etcd_url:
    description: Client URL of one etcd member, for example V(https://10.0.0.5:2379).
    type: str
    required: true
  fail_on_mismatch:
    description: Fail when any key of a selected CRD is not stored at the storage version.
    type: bool
    default: true
seealso:
  - module: crdops.migration.crd_storage_migrate
'''

EXAMPLES = r'''
- name: Prove the migration of the gateway API CRDs from etcd
  crdops.migration.crd_storage_verify:
    context: prod-eu-1
    group: gateway.networking.k8s.io
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
    expected_api_version: {description: "C(<group>/<storage version>).", type: str, returned: always}
    key_count: {description: Number of keys in etcd for this CRD's objects., type: int, returned: always}
    counts: {description: Keys per stored apiVersion., type: dict, returned: always, sample: {"example.com/v1beta1": 500}}
    mismatched: {description: Keys not at the expected apiVersion., type: int, returned: always}
    mismatched_keys: {description: Up to 20 such keys., type: list, elements: str, returned: always}
    verified:
      description:
        - Every key is at the expected apiVersion. False when etcd holds no key of the CRD while the API lists
          objects (see RV(crds[].problem)).
      type: bool
      returned: always
    prefix: {description: The key prefix read (C(<etcd_prefix>/<group>/<plural>/))., type: str, returned: always}
    api_objects:
      description: Objects the API lists, asked only when etcd held no key (null otherwise, or when the API does not say).
      type: int
      returned: always
    problem:
      description:
        - Why the scan proves nothing - no key under the prefix while the API lists objects - naming the prefix tried and
          the top-level prefix where the CRD's keys are (OpenShift stores under C(/kubernetes.io)). The module then fails
          even with O(fail_on_mismatch=false).
      type: str
      returned: always
    revision: {description: etcd revision of the snapshot that was read., type: int, returned: always}
verified:
  description: Every selected CRD verified.
  returned: always
  type: bool
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import (
    ETCD_ARG_SPEC, Job, argument_spec, run_module)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import OutcomeError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import EtcdReader
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.listing import count_objects

OPTIONS = dict(ETCD_ARG_SPEC, etcd_url=dict(type="str", required=True), fail_on_mismatch=dict(type="bool", default=True))


class Verify(Job):
    RESULT = dict(crds=[], verified=False)
    WHAT = "crd_storage_verify"

    def prepare(self):
        self.require_etcd_client()

    def run(self, transport, crds):
        reader = self.etcd(EtcdReader)
        for crd in crds:
            scan = reader.scan(crd.name, crd.group, crd.plural, "%s/%s" % (crd.group, crd.storage_version))
            if scan.total == 0:  # nothing in etcd: only right when the API lists nothing either
                api_objects = count_objects(transport, crd)
                if api_objects != 0:
                    reader.explain_no_keys(scan, crd.group, crd.plural, api_objects)
            self.result["crds"].append(scan.as_dict())

    def finish(self):
        cluster = self.result["cluster"]
        bad = [c for c in self.result["crds"] if not c["verified"]]
        self.result["verified"] = not bad
        blind = [c for c in bad if c["problem"]]
        if blind:  # not a mismatch but a scan that saw nothing: fails even with fail_on_mismatch=false
            first = blind[0]
            raise OutcomeError("etcd_prefix", "cluster %s: CRD %s: %s" % (cluster, first["name"], first["problem"]),
                               cluster=cluster, crd=first["name"])
        if bad and self.params["fail_on_mismatch"]:
            first = bad[0]
            raise OutcomeError("etcd_mismatch", "cluster %s: CRD %s: %d of %d keys in etcd are not stored at %s "
                               "(for example %s)" % (cluster, first["name"], first["mismatched"], first["key_count"],
                                                     first["expected_api_version"],
                                                     ", ".join(first["mismatched_keys"][:3])),
                               cluster=cluster, crd=first["name"])


def main():
    run_module(argument_spec(OPTIONS), Verify)


if __name__ == "__main__":
    main()

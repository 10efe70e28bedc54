#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_access_review
short_description: Ask the apiserver whether this identity may do each of a list of verbs (SelfSubjectAccessReview)
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
description:
  - Sends one C(SelfSubjectAccessReview) per item of O(checks) and returns the apiserver's answer to each, and one line
    per check that is not allowed (RV(missing)).
  - A review is a question, not an object - the apiserver stores nothing - so the module asks it in check mode too,
    and never reports a change.
  - A denial does not fail the task (RV(missing) says what is missing; the caller decides). A review the apiserver
    does not answer (a connection error, an unexpected status) fails it, naming the cluster and the check.
  - The crd_upgrade role's preflight asks exactly the verbs its run will use (docs/rbac.md).
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
options:
  checks:
    description:
      - The C(resourceAttributes) of each review, as in the Kubernetes API - C(verb) and C(resource) are required,
        C(group) (empty for the core group), C(subresource), C(namespace), C(name) and C(version) are optional.
      - A check given twice is asked once.
    type: list
    elements: dict
    required: true
seealso:
  - name: SelfSubjectAccessReview
    description: Checking API access, in the Kubernetes documentation.
    link: https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access
'''

EXAMPLES = r'''
- name: May this identity re-store the objects of a CRD and trim its storedVersions?
  crdops.migration.crd_access_review:
    context: prod-eu-1
    checks:
      - {verb: patch, group: stable.example.com, resource: crontabs}
      - {verb: patch, group: apiextensions.k8s.io, resource: customresourcedefinitions, subresource: status}
      - {verb: create, group: coordination.k8s.io, resource: leases, namespace: default}
  register: access

- name: Every permission is granted
  ansible.builtin.assert:
    that: access.missing | length == 0
    fail_msg: "missing permissions: {{ access.missing | join('; ') }}"
'''

RETURN = r'''
reviews:
  description: The apiserver's answer per check, in the order given (a check given twice, once).
  returned: always
  type: list
  elements: dict
  contains:
    check: {description: "The check in words, for example C(patch customresourcedefinitions/status.apiextensions.k8s.io).", type: str, returned: always}
    verb: {description: "The verb asked about.", type: str, returned: always}
    group: {description: "The API group (empty for the core group).", type: str, returned: always}
    resource: {description: "The resource asked about.", type: str, returned: always}
    subresource: {description: "The subresource, when given.", type: str, returned: when given}
    namespace: {description: "The namespace, when given.", type: str, returned: when given}
    name: {description: "The object's name, when given.", type: str, returned: when given}
    version: {description: "The version, when given.", type: str, returned: when given}
    allowed: {description: "The apiserver allows it.", type: bool, returned: always}
    reason: {description: "The authorizer's reason (often empty for an RBAC denial).", type: str, returned: always}
    evaluation_error: {description: "An error the authorizer met while deciding (the answer may still be a denial).", type: str, returned: always}
missing:
  description:
    - One line per check that is not allowed - C(<verb> <resource>[/<subresource>].<group>[ in namespace <ns>] (<reason>)),
      the reason C(denied) when the apiserver gives none.
  returned: always
  type: list
  elements: str
  sample: ["patch customresourcedefinitions/status.apiextensions.k8s.io (denied)"]
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import Job, argument_spec, run_module
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.access import (
    AccessCheck, missing, review_all)

OPTIONS = dict(
    checks=dict(type="list", elements="dict", required=True),
)


class AccessReview(Job):
    RESULT = dict(reviews=[], missing=[])
    WHAT = "crd_access_review"
    SELECTS_CRDS = False

    def prepare(self):
        self.checks = [AccessCheck.from_dict(c, i) for i, c in enumerate(self.params["checks"])]

    def run(self, transport, crds):
        answers = review_all(transport, self.checks)
        self.result["reviews"] = [a.to_dict() for a in answers]
        self.result["missing"] = missing(answers)


def main():
    run_module(argument_spec(OPTIONS, selection=False), AccessReview)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_release_apply
short_description: Server-side apply the CRD manifests of a release and wait until each is Established
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
description:
  - Applies each CRD of O(manifests), in order, with a server-side apply as O(field_manager) (forced by default, as
    C(server_side_apply.force_conflicts) of M(kubernetes.core.k8s)), then waits until every CRD applied reports the
    condition C(Established) (O(wait), O(wait_timeout)).
  - In check mode the same applies are sent with C(dryRun=All) - the apiserver validates them (the storage version
    rule, C(status.storedVersions), the schema) and stores nothing - and nothing is waited for.
  - A refused apply fails the task naming the CRD and the apiserver's message, unless O(continue_on_error) is set;
    then every manifest is tried and each refusal is returned (RV(crds[].error)). Apply a release with a dry-run first
    to refuse all of it before any of it is applied.
  - The request is the one M(kubernetes.core.k8s) sends for C(apply) with C(server_side_apply); this module sends it
    without a module process when the task runs on the controller (its action plugin), and without API discovery.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  check_mode:
    details: the applies are sent with C(dryRun=All); RV(crds[].action) says what each would do
options:
  manifests:
    description:
      - The release's CRD manifests - file paths, globs (sorted by name) or CRDs as dictionaries; multi-document files
        are read, documents that are not CRDs are skipped (RV(skipped_documents)), a manifest's C(status) is never sent.
    type: list
    elements: raw
    required: true
  field_manager:
    description: The field manager of the apply (as C(server_side_apply.field_manager) of M(kubernetes.core.k8s)).
    type: str
    default: crdops-migration
  force_conflicts:
    description: Take over fields another manager owns (as C(server_side_apply.force_conflicts) of M(kubernetes.core.k8s)).
    type: bool
    default: true
  wait:
    description: After a real apply, wait until every CRD applied reports the condition C(Established) C(True).
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait for C(Established) before the task fails naming the CRDs not established.
    type: int
    default: 120
  continue_on_error:
    description: Try every manifest and return each refusal instead of failing at the first one.
    type: bool
    default: false
  rewrite_helm_releases:
    description:
      - Before the apply, for each CRD the release removes versions of and whose conversion is C(None), move the
        stored manifest of every Helm release that still declares its objects at a removed version - the
        C(apiVersion) line of those documents only - into a new revision, as the C(helm-mapkubeapis) plugin does.
        The revision C(helm upgrade) reads (n) is marked C(superseded) under its resourceVersion, then revision n+1
        is created C(deployed) with a description of what moved, in the release's own storage (Secret or
        ConfigMap, Helm's labels and encoding). Both writes are first sent as a dry-run. Otherwise every later
        C(helm upgrade) of such a release fails with C(unable to build kubernetes objects from current release
        manifest) (helm/helm#7361).
      - This is for charts already moved to the version that stays. C(helm history) lists the new revision, and
        C(helm upgrade) and C(helm rollback) to it work. A rollback to revision n or earlier still declares the
        removed version and fails, as after C(helm-mapkubeapis).
      - A rewrite that fails (forbidden, a resourceVersion conflict, a pending Helm operation) leaves the CRDs its
        release declares out of the apply (RV(held_back)), so the release never declares a version that is gone.
      - Never under a conversion webhook (field names may differ); such releases are listed in
        RV(helm_releases.left). In check mode the rewrite is only planned.
      - Needs C(list) on C(secrets) (or C(configmaps)) in all namespaces, C(get) and C(update) on the release's
        current revision and C(create) in its namespace. Release content is never returned or logged.
    type: bool
    default: false
    version_added: 1.0.0
  helm_release_names:
    description:
      - With O(rewrite_helm_releases), Helm releases (C(namespace/name)) to read in their own namespace (label
        selector C(owner=helm,name=<release>), Secrets then ConfigMaps) when listing Secrets and ConfigMaps in all
        namespaces is forbidden or does not show them. The role passes those its client check found this way.
      - One that cannot be read fails its rewrite, so the CRDs the apply removes versions of are held back
        (RV(held_back)).
    type: list
    elements: str
    default: []
    version_added: 1.0.0
seealso:
  - module: kubernetes.core.k8s
  - module: crdops.migration.crd_release_follow
'''

EXAMPLES = r'''
- name: Would the apiserver accept release 2.0? (dry-run, nothing stored)
  crdops.migration.crd_release_apply:
    context: prod-eu-1
    manifests: [releases/2.0/crds/*.yaml]
    continue_on_error: true
  check_mode: true
  register: dry_run

- name: Apply release 2.0 when it would be accepted whole
  crdops.migration.crd_release_apply:
    context: prod-eu-1
    manifests: [releases/2.0/crds/*.yaml]
  when: dry_run.refused | length == 0
'''

RETURN = r'''
crds:
  description: One entry per CRD manifest, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: "CRD name.", type: str, returned: always}
    action:
      description: C(created), C(configured), C(unchanged) (the apiserver's answer equals the CRD read before, but for
        C(resourceVersion)) or C(refused); in check mode what the apply would do.
      type: str
      returned: always
    changed: {description: "The CRD was (in check mode would be) created or changed.", type: bool, returned: always}
    changes: {description: "Paths that changed (for example C(.spec.versions)), at most six.", type: list, elements: str, returned: always}
    error: {description: "The apiserver's message when it refused the apply (null otherwise).", type: str, returned: always}
    established: {description: "C(true) once waited for; null when not waited for (check mode, O(wait=false), refused).", type: bool, returned: always}
    record:
      description:
        - An apply that changes the spec moves the CRD's generation on. Its migration record (written by
          M(crdops.migration.crd_storage_migrate)) then names the new generation - C(carried to generation <n>) -
          when it was valid just before the apply, the apply moved the generation by one (no other writer's spec
          change in between), and the storage version, C(status.storedVersions) (the storage version alone) and the
          record are still as they were; else why not. A record of another generation proves nothing to
          M(crdops.migration.crd_storage_info)'s O(crdops.migration.crd_storage_info#module:nothing_to_do).
        - Null in check mode, for a CRD created or unchanged, or with no valid record to carry.
      type: str
      returned: always
refused:
  description: "C(<CRD>: <the apiserver's message>) per refused apply."
  returned: always
  type: list
  elements: str
skipped_documents:
  description: Documents of O(manifests) that are not CRDs (file, index, kind).
  returned: always
  type: list
  elements: dict
helm_releases:
  description: With O(rewrite_helm_releases), the Helm releases rewritten (in check mode, to rewrite) and those left.
  returned: when O(rewrite_helm_releases)
  type: dict
  contains:
    checked: {description: The release Secrets could be listed (V(false) - forbidden; C(note) says so)., type: bool, returned: always}
    note: {description: "Why not checked, or Secrets that did not decode.", type: str, returned: always}
    rewritten:
      description:
        - Per release C(release) (namespace/name), C(driver) (C(Secret) or C(ConfigMap)), C(previous_revision)
          (now superseded), C(revision) (the new one, deployed), C(description) (its C(info.description)) and
          C(objects) (kind, namespace, name, apiVersion, to).
      type: list
      elements: dict
      returned: always
    left: {description: "C(<release>: <why>) for each release not rewritten (a conversion webhook).", type: list, elements: str, returned: always}
    failed:
      description: Per rewrite that failed C(release), C(crds) (held back) and C(why).
      type: list
      elements: dict
      returned: always
    words:
      description: One sentence per release rewritten, saying that a rollback to an older revision fails.
      type: list
      elements: str
      returned: always
held_back:
  description:
    - Per CRD left out of the apply because a Helm release that declares it could not be rewritten - C(crd),
      C(removed_versions), C(clients) (one sentence per release, with why) and C(fix) - in the shape of the role's
      held-back entries.
  returned: always
  type: list
  elements: dict
stripped_annotations:
  description:
    - CRD documents that carried this collection's C(migration.crdops.io/*) annotations (file, index, name,
      annotations), which were dropped before the apply.
    - A manifest exported from a live CRD (C(kubectl get crd -o yaml), a backup) carries that CRD's migration record;
      applied elsewhere it would claim a migration that never ran there.
  returned: always
  type: list
  elements: dict
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import Job, argument_spec, run_module
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.helm_move import move_helm_releases
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.manifests import read_manifests
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.apply import apply_release

OPTIONS = dict(
    manifests=dict(type="list", elements="raw", required=True),
    field_manager=dict(type="str", default="crdops-migration"),
    force_conflicts=dict(type="bool", default=True),
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=120),
    continue_on_error=dict(type="bool", default=False),
    rewrite_helm_releases=dict(type="bool", default=False),
    helm_release_names=dict(type="list", elements="str", default=[]),
)


class ReleaseApply(Job):
    RESULT = dict(crds=[], refused=[], skipped_documents=[], stripped_annotations=[], held_back=[])
    WHAT = "crd_release_apply"
    SELECTS_CRDS = False

    def prepare(self):
        p = self.params
        if p["wait_timeout"] < 0:
            raise BadInputError("wait_timeout must be >= 0, got %d" % p["wait_timeout"])
        manifests = read_manifests(p["manifests"], label="manifests")
        self.docs = [m.doc for m in manifests.crds]
        self.result["skipped_documents"] = [s.as_dict() for s in manifests.skipped]
        self.result["stripped_annotations"] = [s.as_dict() for s in manifests.stripped]

    def record(self, applied):
        self.result["crds"].append(applied.to_dict())
        self.result["changed"] = self.result["changed"] or applied.changed
        if applied.error is not None:
            self.result["refused"].append("%s: %s" % (applied.name, applied.error))

    def move_helm(self, transport):
        """Rewrite the Helm releases first; the CRDs a failed rewrite holds back are left out of the apply."""
        moves = move_helm_releases(transport, self.docs, self.check_mode, self.params["helm_release_names"] or [])
        self.result["helm_releases"] = dict(moves.to_dict(), words=moves.words())
        self.result["changed"] = bool(moves.rewritten) and not self.check_mode
        for why in moves.left:
            self.warn("Helm release not rewritten: %s" % why)
        held = moves.held_back()
        self.result["held_back"] = held
        names = set(h["crd"] for h in held)
        return [d for d in self.docs if (d.get("metadata") or {}).get("name") not in names]

    def run(self, transport, crds):
        p = self.params
        docs = self.move_helm(transport) if p["rewrite_helm_releases"] else self.docs
        apply_release(transport, docs, p["field_manager"], force=p["force_conflicts"], dry_run=self.check_mode,
                      wait=p["wait"], timeout=p["wait_timeout"], continue_on_error=p["continue_on_error"],
                      record=self.record)
        for out in self.result["crds"]:
            out["established"] = True if (p["wait"] and not self.check_mode and out["error"] is None) else None


def main():
    run_module(argument_spec(OPTIONS, selection=False), ReleaseApply)


if __name__ == "__main__":
    main()

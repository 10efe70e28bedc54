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
  - PyYAML >= 6.0 (reads target_manifests given as file paths)
  - urllib3 (a dependency of kubernetes; reads etcd's grpc-gateway when O(etcd_url) is given)
  - orjson (optional, faster JSON decoding)
description:
  - Read-only discovery and plan for CustomResourceDefinitions.
  - For each selected CRD reports its versions (served, storage, deprecated), C(status.storedVersions),
    whether a storage migration is needed, the conversion strategy and webhook, the object count,
    the migration record written by M(crdops.migration.crd_storage_migrate) and whether it is valid.
  - Given the manifests of the next release (O(target_manifests)), reports the versions it would remove
    that are still stored (the "skip-a-version trap"), before anything is applied.
  - Given O(release_manifests) and O(release_check), reports per CRD whether that release is already in effect
    (RV(crds[].release_in_effect)) - applying it would change nothing but C(managedFields).
  - Given O(etcd_url), reports per CRD what the re-store would change in the stored bytes beyond
    C(apiVersion) (RV(crds[].storage_diff)) - defaults of the storage version it would persist, and fields
    its schema no longer has that it would delete for good. The API cannot show this, since it applies
    defaults and prunes unknown fields already when it reads from etcd; only the raw values show it.
    Without O(etcd_url), RV(crds[].storage_diff.checked) is V(false) and says why.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._etcd
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
options:
  target_manifests:
    description:
      - CRD manifests of the release you intend to apply next. Each item is a path to a YAML file
        (multi-document files allowed), a glob (its matches sorted by name) or a CRD as a dictionary.
      - Documents that are not a C(CustomResourceDefinition) (the Namespace or Deployment of a release bundle)
        are skipped and listed in RV(skipped_documents).
      - A C(CustomResourceDefinition) that is not C(apiextensions.k8s.io/v1), a file that cannot be read or is
        not YAML, and manifests without any CRD are errors naming the file and document index.
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
  etcd_url:
    description:
      - Client URL of one etcd member, for example V(https://10.0.0.5:2379). When given, a sample of each
        CRD's stored objects is read raw from etcd and compared with what the API returns for the same
        objects at the storage version (RV(crds[].storage_diff)). Nothing is written - the API's view is the
        re-store's own request sent with C(dryRun=All) (so it needs the C(patch) verb on the custom resources;
        without it the comparison falls back to a GET and says so in RV(crds[].storage_diff.view)).
    type: str
    version_added: 1.0.0
  diff_sample:
    description:
      - How many stored objects per CRD (the first keys in etcd's key order) to compare when O(etcd_url)
        is given. V(0) turns the comparison off.
    type: int
    default: 20
    version_added: 1.0.0
  diff_release_manifests:
    description:
      - With O(etcd_url), the CRD manifests of release N (the storage flip) before it is applied. For each
        reported CRD whose storage version release N moves, the same sample of stored values is taken through
        release N's own conversion (its webhook in a C(ConversionReview), nothing written) to its storage version,
        pruned with its schema, and back, so what the re-store would lose is known before the flip
        (RV(crds[].storage_forecast)).
    type: list
    elements: raw
    default: []
    version_added: 1.0.0
  nothing_to_do:
    description:
      - CRD names (those a run of the role C(crd_upgrade) selects) - also decide whether the role has nothing to do for
        them on this cluster (RV(nothing_to_do)), so a rerun on a cluster that is done can skip every phase. Read-only.
        Independent of which CRDs are reported in RV(crds) (V(all) included). Empty - not decided.
      - Nothing to do means, for every CRD named - it exists, C(status.storedVersions) is the storage version alone, a
        migration record of this CRD (its uid) at that storage version and generation with a proof and no failure
        (a record that names no CRD uid counts as missing), no resume checkpoint, no unfinished
        repair; its pass Lease (in O(lease_namespace)) is not held by a run that still renews it; every apiserver of
        O(apiserver_endpoints) serves the CRD at its storage version; every object lists at the storage version and
        no C(managedFields) entry names a version the CRD does not serve (kubernetes#111937). And for the releases -
        every CRD of O(release_manifests) is in O(target_manifests); each O(target_manifests) CRD exists and the
        apiserver answers its forced server-side apply as O(field_manager), sent with C(dryRun=All), with the live
        CRD unchanged; nothing O(release_manifests) (else O(installed_manifests)) declared and O(target_manifests)
        does not is left on the live CRD.
      - Anything else, an error while checking included, is listed in RV(nothing_to_do.blockers). The objects are
        listed only when nothing else is left; their count is then RV(crds[].object_count) of those CRDs.
    type: list
    elements: str
    default: []
    version_added: 1.0.0
  release_manifests:
    description:
      - With O(nothing_to_do) or O(release_check), the CRD manifests of release N (the storage flip), like
        O(target_manifests).
    type: list
    elements: raw
    default: []
    version_added: 1.0.0
  release_check:
    description:
      - For each reported CRD that O(release_manifests) contains, send its forced server-side apply as
        O(field_manager) with C(dryRun=All) and compare the answer with the CRD read just before. Release N is in
        effect (RV(crds[].release_in_effect)) when the two differ in nothing but C(managedFields) and
        C(resourceVersion) and the CRD is Established; RV(crds[].release_changes) names what would change
        otherwise. Nothing is persisted; it needs the C(patch) verb on C(customresourcedefinitions).
      - The role C(crd_upgrade) does not re-apply a release N in effect - its apply would add only its field
        manager's C(managedFields) entry, whose time the drain before the re-store would take for a storage flip.
    type: bool
    default: false
    version_added: 1.0.0
  installed_manifests:
    description:
      - With O(nothing_to_do) and no O(release_manifests), the CRD manifests of the release installed before
        O(target_manifests), like O(target_manifests).
    type: list
    elements: raw
    default: []
    version_added: 1.0.0
  field_manager:
    description:
      - With O(nothing_to_do), the field manager that applies O(target_manifests); with O(release_check), the one that
        applies O(release_manifests) (the role's C(crd_upgrade_field_manager)).
    type: str
    default: crdops-migration
    version_added: 1.0.0
  page_size:
    description:
      - With O(nothing_to_do), objects per C(LIST) page when every object's metadata is read.
    type: int
    default: 500
    version_added: 1.0.0
  lease_namespace:
    description:
      - With O(nothing_to_do), the namespace of the pass Leases C(crdops-pass-<crd>)
        (O(crdops.migration.crd_storage_migrate#module:lease_namespace)). A Lease whose holder still renews it means
        another run is writing that CRD now, which is something left. Needs C(get) on C(leases.coordination.k8s.io)
        there; without it the verdict says it could not check.
    type: str
    default: default
    version_added: 1.0.0
  apiserver_endpoints:
    description:
      - With O(nothing_to_do), every apiserver of an HA control plane as C(https://host:port) URLs, reached with the
        same credentials (the re-store's O(crdops.migration.crd_storage_migrate#module:apiserver_endpoints)). Each is
        asked in its discovery document whether it serves each CRD named at its storage version and stores there
        (C(storageVersionHash)); one that does not, or cannot be asked, is something left.
      - Empty - not checked (the kubeconfig URL may be a load balancer that answers for any member).
    type: list
    elements: str
    default: []
    version_added: 1.0.0
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
    storage_forecast:
      version_added: 1.0.0
      description:
        - With O(diff_release_manifests), for a CRD whose storage version release N moves - what the re-store
          would lose after release N's storage flip, forecast before it from the same sample of stored values -
          through release N's conversion to its storage version, pruned with its schema, and back. Defaults are
          not forecast.
        - C(checked=false) with C(reason) when etcd was not read; C(unverified) says why when release N's
          conversion webhook could not be asked (the storage diff after the flip is then the guard).
      type: dict
      returned: when O(diff_release_manifests) moves the CRD's storage version
      contains:
        checked: {description: The stored values were read and taken through release N., type: bool, returned: always}
        reason: {description: Why not checked., type: str, returned: always}
        storage_version: {description: Release N's storage version., type: str, returned: when checked}
        sampled: {description: Stored values read from etcd., type: int, returned: when checked}
        compared: {description: Values taken through release N and back., type: int, returned: when checked}
        removed: {description: Path -> values the re-store would delete for good., type: dict, returned: when checked}
        normalised:
          description: >-
            Path -> zero values the conversion leaves out that release N's schema serves the same without (no
            default there, none filled into an empty object, no required members).
          type: dict
          returned: when checked
        examples: {description: Path -> up to three objects it was seen in., type: dict, returned: when checked}
        skipped: {description: Reason -> values not compared., type: dict, returned: when checked}
        unverified: {description: Why release N's webhook could not be asked., type: str, returned: when checked}
    storage_diff:
      version_added: 1.0.0
      description:
        - What the re-store at the storage version would change in the sampled stored objects, beyond
          C(apiVersion) and server-set metadata (C(resourceVersion), C(managedFields), C(generation),
          C(creationTimestamp)).
        - Paths read C(.spec.listeners[].port); C([]) is an item of a list, keys that are not plain
          names are quoted (C(.metadata.annotations["example.com/a"])). Counts are objects of the sample.
        - C(checked=false) with C(reason) when etcd was not read (no O(etcd_url), or O(diff_sample=0)).
      type: dict
      returned: always
      sample:
        checked: true
        reason: null
        storage_version: v1
        view: dry-run
        key_count: 3
        sampled: 3
        compared: 3
        would_change: 3
        at_other_version: 3
        compared_at_stored_version: 0
        added: {".status.conditions": 3}
        removed: {}
        normalised: {}
        changed: {}
        skipped: {}
        examples: {".status.conditions": [default/my-gateway, default/prod-web]}
        revision: 812
      contains:
        checked: {description: The stored values were read and compared., type: bool, returned: always}
        reason: {description: Why not checked (null when checked)., type: str, returned: always}
        storage_version: {description: The version the re-store writes., type: str, returned: when checked}
        view:
          description:
            - V(dry-run) - compared with the response of the no-op write sent with C(dryRun=All), which is what the
              re-store stores.
            - V(get) - the credentials may not patch, compared with a GET instead. A GET of an object stored at an older
              version does not show the storage version's defaults, so C(added) can miss some.
          type: str
          returned: when checked
        key_count: {description: "Keys of this resource in etcd (all of them, not only the sample).", type: int, returned: when checked}
        sampled: {description: Keys read for the comparison., type: int, returned: when checked}
        compared: {description: Sampled objects compared (the others are counted in C(skipped))., type: int, returned: when checked}
        would_change:
          description: Compared objects whose stored value the re-store changes beyond C(apiVersion).
          type: int
          returned: when checked
        at_other_version:
          description: Compared objects stored at a version other than the storage version (their C(apiVersion) changes too).
          type: int
          returned: when checked
        compared_at_stored_version:
          description:
            - Of those, objects of a C(Webhook) conversion CRD compared with the API's view at their stored version
              (renames done by the webhook are not reported as changes).
          type: int
          returned: when checked
        added: {description: Path -> objects the re-store adds it to (defaults it persists)., type: dict, returned: when checked}
        removed:
          description: Path -> objects it deletes it from for good (not in the schema, or dropped by the conversion).
          type: dict
          returned: when checked
        normalised:
          description: >-
            Path -> objects where the conversion leaves out a zero value (V(false), V(0), empty) of a field the
            stored version's schema declares, and the apiserver serves the object the same without it (no default
            there, none it fills into an empty object, no required members): not a loss.
          type: dict
          returned: when checked
        changed: {description: Path -> objects whose value at it changes., type: dict, returned: when checked}
        skipped:
          description: >-
            Sampled objects not compared, by cause: C(encrypted), C(not_json), C(gone) (deleted meanwhile),
            C(changed_meanwhile) (written between the two reads, twice), C(webhook_version_not_served),
            C(dry_run_rejected) (admission refused the dry-run; the preflight reports why).
          type: dict
          returned: when checked
        examples: {description: Path -> up to 3 objects (C(namespace/name)) where it was seen., type: dict, returned: when checked}
        revision: {description: etcd revision of the sample read., type: int, returned: when checked}
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
    release_in_effect:
      description:
        - With O(release_check), whether O(release_manifests) is in effect on this CRD - its forced apply as
          O(field_manager) (sent with C(dryRun=All)) would change nothing but C(managedFields). Null when not checked
          (no O(release_check), or O(release_manifests) does not contain this CRD).
      type: bool
      returned: always
      version_added: 1.0.0
    release_changes:
      description:
        - With O(release_check), what applying O(release_manifests) would change on this CRD besides
          C(managedFields) (paths such as C(.spec.versions)), or why it could not be checked. Empty when in effect or
          not checked.
      type: list
      elements: str
      returned: always
      sample: [.spec.versions, .metadata.generation]
      version_added: 1.0.0
    stale_managed_fields:
      description: Objects (of the sample) with managedFields entries at versions no longer served.
      type: list
      elements: dict
      returned: when O(managed_fields_sample) > 0
flow_control:
  version_added: 1.0.0
  description:
    - Where API Priority and Fairness classifies a request like the re-store's, from the FlowSchema UID the apiserver
      names in its answer, compared with the shipped FlowSchema C(crdops-migration) (C(docs/rbac/flowschema.yaml))
      and the suggested C(exempt) one.
    - C(state) is C(shipped), C(exempt), C(other) (another FlowSchema), C(unknown) (the FlowSchemas could not be
      read; C(words) names the permission) or C(off) (no APF header). C(words) is the plan's sentence.
  returned: always
  type: dict
  sample: {state: shipped, flow_schema_uid: 0b5c6a3e-0f6c-4d4e-9a1b-2f3c4d5e6f70, priority_level_uid: null,
           words: "API Priority and Fairness: the shipped FlowSchema crdops-migration is in place (a priority level of its own)"}
nothing_to_do:
  version_added: 1.0.0
  description: With O(nothing_to_do), the verdict (null without it).
  returned: always
  type: dict
  sample: {nothing_to_do: false, objects_listed: 0, why: [],
           blockers: ["widgets.example.com: status.storedVersions is ['v1alpha1', 'v1beta1'], not [v1beta1]"]}
  contains:
    nothing_to_do: {description: Every check passed; no blocker., type: bool, returned: always}
    blockers: {description: Each reason the role has something to do (or could not be sure)., type: list, elements: str, returned: always}
    why: {description: "What was checked, per CRD, when there is nothing to do.", type: list, elements: str, returned: always}
    objects_listed: {description: Objects whose metadata was read., type: int, returned: always}
    summary: {description: "One line - why there is nothing to do, or the first blockers.", type: str, returned: always}
check_mode:
  version_added: 1.0.0
  description:
    - The task ran in check mode (C(--check) or the task or play keyword C(check_mode), which C(ansible_check_mode)
      does not show).
  returned: always
  type: bool
cluster:
  description: Secret-free name of the cluster (context, host or kubeconfig).
  returned: always
  type: str
server_time:
  description:
    - The apiserver's time when the task began (its C(Date) header), RFC 3339. Compare C(managedFields) times
      with it, never with the controller's clock (O(crdops.migration.crd_client_check#module:since) of
      M(crdops.migration.crd_client_check) with O(crdops.migration.crd_client_check#module:check=writers)).
  returned: success
  type: str
  sample: "2026-12-01T15:04:05Z"
skipped_documents:
  description: Documents of O(target_manifests) that are not CRDs, so were not read as release manifests.
  returned: always
  type: list
  elements: dict
  contains:
    file:
      description: The file (or C(target_manifests[<n>]) for a dictionary).
      type: str
      returned: always
    index:
      description: "The document index in the file (C(<n>.items[<m>]) inside a C(kind: List))."
      type: str
      returned: always
    kind:
      description: The document's C(kind).
      type: str
      returned: always
  sample: [{file: crds/release-2.0.yaml, index: "0", kind: Namespace}]
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import (
    ETCD_ARG_SPEC, Job, argument_spec, run_module)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.apiservers import check_endpoint_urls
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import EtcdSampler
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.discover import InfoOptions, describe_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.manifests import read_manifests
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.removal_plan import targets_of
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.in_effect import releases_in_effect
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.nothing_to_do import Peers, Releases, decide
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.flow_control import flow_control
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.storage_diff import storage_diff_of
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.storage_forecast import forecast_of
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.writers import iso, server_clock

OPTIONS = dict(
    target_manifests=dict(type="list", elements="raw", default=[]),
    count_objects=dict(type="bool", default=True),
    managed_fields_sample=dict(type="int", default=0),
    diff_sample=dict(type="int", default=20),
    nothing_to_do=dict(type="list", elements="str", default=[]),
    release_manifests=dict(type="list", elements="raw", default=[]),
    diff_release_manifests=dict(type="list", elements="raw", default=[]),
    release_check=dict(type="bool", default=False),
    installed_manifests=dict(type="list", elements="raw", default=[]),
    field_manager=dict(type="str", default="crdops-migration"),
    page_size=dict(type="int", default=500),
    lease_namespace=dict(type="str", default="default"),
    apiserver_endpoints=dict(type="list", elements="str", default=[]),
    **ETCD_ARG_SPEC
)


class Info(Job):
    RESULT = dict(crds=[], skipped_documents=[], nothing_to_do=None, flow_control=None)
    WHAT = "crd_storage_info"

    def prepare(self):
        p = self.params
        self.options = InfoOptions(count_objects=p["count_objects"], managed_fields_sample=p["managed_fields_sample"],
                                   diff_sample=p["diff_sample"])
        self.options.validate()
        self.require_etcd_client()
        manifests = read_manifests(p["target_manifests"], label="target_manifests")
        self.result["skipped_documents"] = [s.as_dict() for s in manifests.skipped]
        self.targets = targets_of(manifests)
        self.result["check_mode"] = self.check_mode
        self.releases = None
        self.release_docs = []
        self.forecast_docs = read_manifests(p["diff_release_manifests"], label="diff_release_manifests").as_dict()["crds"]
        if p["release_check"]:
            self.release_docs = read_manifests(p["release_manifests"], label="release_manifests").as_dict()["crds"]
        if p["nothing_to_do"]:
            if p["page_size"] < 1:
                raise BadInputError("page_size must be 1 or more, not %d" % p["page_size"])
            check_endpoint_urls(p["apiserver_endpoints"])
            self.releases = Releases(
                release=read_manifests(p["release_manifests"], label="release_manifests").as_dict()["crds"],
                target=manifests.as_dict()["crds"],
                installed=read_manifests(p["installed_manifests"], label="installed_manifests").as_dict()["crds"],
                field_manager=p["field_manager"])

    def run(self, transport, crds):
        p, o = self.params, self.options
        sampler = self.etcd(EtcdSampler)
        self.result["server_time"] = iso(server_clock(transport))
        self.result["flow_control"] = flow_control(transport).to_dict()
        for crd in crds:
            out = describe_crd(transport, crd, count=o.count_objects, targets=self.targets,
                               managed_fields_sample=o.managed_fields_sample)
            out["storage_diff"] = storage_diff_of(transport, sampler, crd, p["etcd_prefix"], o.diff_sample)
            forecast = forecast_of(transport, sampler, crd, self.forecast_docs, p["etcd_prefix"], o.diff_sample)
            if forecast is not None:
                out["storage_forecast"] = forecast
            self.result["crds"].append(out)
        in_effect = releases_in_effect(transport, self.release_docs, [c.name for c in crds], p["field_manager"])
        for out in self.result["crds"]:
            changes = in_effect.get(out["name"])
            out["release_in_effect"] = None if changes is None else not changes
            out["release_changes"] = changes or []
        if self.releases is not None:
            names = p["nothing_to_do"]
            # each apiserver by its own URL, with the same credentials (a member's own view, not a load balancer's)
            peers = Peers(p["lease_namespace"], dict((url, transport.for_endpoint(url))
                                                     for url in p["apiserver_endpoints"]))
            verdict = decide(transport, [c for c in crds if c.name in names], self.releases, p["page_size"],
                             selected=names, peers=peers)
            for out in self.result["crds"]:  # the listing counted them: no LIST limit=1 more
                if out["object_count"] is None and out["name"] in verdict.objects:
                    out["object_count"] = verdict.objects[out["name"]]
            self.result["nothing_to_do"] = verdict.to_dict()


def main():
    run_module(argument_spec(OPTIONS), Info)


if __name__ == "__main__":
    main()

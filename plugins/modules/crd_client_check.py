#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_client_check
short_description: Prove that server-side apply clients still work on the objects of CRDs (dry-run)
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
description:
  - For a sample of the objects of each selected CRD, applies as each field manager with an C(Apply) entry in
    C(metadata.managedFields) the fields that manager owns with one value it owns changed, with server-side
    apply, C(dryRun=All) and no force. That must succeed, and the same change by a manager that owns nothing
    (C(crdops-client-check-rival)) must conflict naming the owner; an unchanged re-apply would succeed even where
    ownership was lost. A value the schema refuses (HTTP 422) is skipped for another one; a manager owning no
    value that can be changed re-applies its fields unchanged (C(unchanged_only)).
  - Each C(Update) manager gets a dry-run JSON merge patch under its name, changing a value it owns where one is
    reachable without a list, which must succeed. Objects without C(Apply) entries also get a dry-run apply of
    their bare identity by O(probe_manager). Every such request must succeed.
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
  - With O(check=writers) it names instead the clients that still use a version the next release removes
    (O(removed_versions)), which break when it goes. A manager whose C(managedFields) entry at such a version
    was written at or after O(since) (a time of the apiserver's clock, as its C(Date) header says; the
    controller's clock is never used) still writes at it. Readers never appear in C(managedFields), so the
    growth of C(apiserver_request_total) for that version, read from C(/metrics) of every apiserver the HA
    barrier finds, over O(metrics_window) seconds in which this task sends nothing at that version, counts the
    requests of other clients; open watches come from C(apiserver_longrunning_requests). Without C(get) on the
    non-resource URL C(/metrics) the result says C(not measured) for that apiserver. Writes nothing.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
options:
  check:
    description:
      - V(apply) proves that the objects' managers can still server-side apply (the default).
      - V(writers) names the clients still using the versions in O(removed_versions).
    type: str
    choices: [apply, writers]
    default: apply
  removed_versions:
    description:
      - O(check=writers) only, and required there. CRD name -> the versions the next release removes from it.
        Versions the CRD no longer defines are ignored; a selected CRD not named here is not checked.
    type: dict
  since:
    description:
      - O(check=writers). An RFC 3339 time of the apiserver's clock (for example the C(server_time) that
        M(crdops.migration.crd_storage_info) returned before the re-store began). Entries written at or after
        it name their manager as a writer; older ones are leftovers that a managedFields pass rewrites.
      - Default is O(lookback) seconds before the apiserver's time now.
    type: str
  lookback:
    description: O(check=writers) without O(since). Seconds before the apiserver's time now.
    type: float
    default: 3600
  metrics_window:
    description:
      - O(check=writers). Seconds between the two reads of each apiserver's C(/metrics); the growth of the
        request counters in between is other clients' traffic. V(0) does not read C(/metrics).
    type: float
    default: 30
  accept_clients:
    description:
      - O(check=writers). Clients accepted to break when the versions go, so that they no longer hold the next
        release back (the result's C(held_back)) - V(true) for every client, V(false) for none, or a list of names,
        each a source an object names (a Flux Kustomization or a Helm release as C(namespace/name), an Argo CD
        Application), a field manager (C(argocd-controller)), or V(requests) for the requests counted at a removed
        version.
      - A source covers exactly the objects that name it; a field manager covers only its objects that name no
        source. A name that accepts nothing is returned in RV(writers.unmatched_accepts).
      - Accepted clients are still listed in C(clients) and O(fail_on_error) does not fail for them.
      - A Flux C(Apply) entry at a removed version needs no acceptance once the Kustomization its objects name says,
        in C(status.inventory), that its source declares a version that stays (C(get) on
        C(kustomizations.kustomize.toolkit.fluxcd.io)); see RV(writers.kustomizations).
    type: raw
    default: false
  helm_releases:
    description:
      - O(check=writers). Also read the manifest of the revision C(helm upgrade) reads of each Helm release
        (Secrets and ConfigMaps labelled C(owner=helm), all namespaces) and name the releases that declare a custom
        resource at a removed version; after the version goes, every C(helm upgrade) of such a release fails
        (helm/helm#7361).
      - Every release the objects name (C(meta.helm.sh/release-name), C(meta.helm.sh/release-namespace)) that those
        lists did not show (forbidden, or another driver) is read in its own namespace (label selector
        C(owner=helm,name=<release>)). One that still cannot be read (forbidden, C(HELM_DRIVER=sql), not found) holds
        the CRD back as a client of kind C(not checked (Helm release)), naming the permission that would let it be
        checked; O(accept_clients) accepts it by C(namespace/name).
      - Release content is never returned or logged, only the objects' kind, namespace, name and version.
    type: bool
    default: true
  helm_rewrite:
    description:
      - O(check=writers). The caller will rewrite the stored manifests of the Helm releases found, for CRDs with
        conversion C(None) (M(crdops.migration.crd_release_apply) O(crdops.migration.crd_release_apply#module:rewrite_helm_releases)),
        so those releases, and appliers whose objects name them, do not hold the next release back.
    type: bool
    default: false
  apiserver_endpoints:
    description:
      - O(check=writers). The https URL of every apiserver (as for M(crdops.migration.crd_storage_migrate)),
        when the C(default/kubernetes) EndpointSlice does not reach them all. Each apiserver counts only the
        requests it served.
    type: list
    elements: str
    default: []
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
    description:
      - Fail when any CRD does not pass. With V(false) the result still says C(ok=false).
      - O(check=writers) fails only for a CRD held back by a client not in O(accept_clients).
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
  - O(check=writers) needs C(list) on the custom resources, C(get)/C(list) on C(leases) in C(kube-system) and on
    C(endpointslices) in C(default) (to find every apiserver), and optionally C(get) on the non-resource URL
    C(/metrics).
  - Needs C(patch) on the custom resources (a dry-run apply is authorised like a real one), C(list) and C(get)
    on them, C(get)/C(list) on CRDs and, with O(events), C(create) on C(events) in namespace C(default).
'''

EXAMPLES = r'''
- name: Clients can still apply to the widgets after the upgrade
  crdops.migration.crd_client_check:
    context: prod-eu-1
    names: [widgets.example.com]
    sample: 20

- name: Who still uses v1alpha1 of the widgets (appliers declaring it, writers since the re-store began, requests in 30 s)
  crdops.migration.crd_client_check:
    check: writers
    names: [widgets.example.com]
    removed_versions: {widgets.example.com: [v1alpha1]}
    since: "{{ info.server_time }}"
    # the legacy deployer is being retired with this release: its objects may break
    accept_clients: [legacy-deployer]
    fail_on_error: false
  register: writers

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
    applies: {description: Dry-run applies as an C(Apply) manager (one per manager and object)., type: int, returned: always}
    rivals: {description: Dry-run applies by a new manager changing an owned value (each must conflict)., type: int, returned: always}
    patches: {description: Dry-run merge patches under an C(Update) manager's name., type: int, returned: always}
    by_manager:
      description:
        - Per field manager and operation what was proved on the sampled objects - C(manager), C(operation)
          (C(Apply) or C(Update)), C(objects), C(changed) (a change of a value it owns succeeded),
          C(unchanged_only) (no value could be changed), C(conflicts_named) (a new manager's change conflicted
          naming it) and C(failed).
      type: list
      elements: dict
      returned: always
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
      description: Up to 20 failures with C(object), C(manager), C(operation) (C(Apply), C(ownership) (a new
        manager's change was not refused naming the owner), C(Update), C(probe) or C(read)),
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
writers:
  description: O(check=writers) only. Per CRD the managers and the traffic seen at the removed versions.
  returned: when O(check=writers)
  type: dict
  contains:
    since: {description: The time (apiserver's clock) entries are compared with., type: str, returned: always}
    server_time: {description: The apiserver's time when the check began., type: str, returned: always}
    metrics:
      description: Where the request counters were measured, or why not (C(not measured ...)).
      type: str
      returned: always
    metrics_window_s: {description: Seconds between the two reads of C(/metrics)., type: float, returned: always}
    ok: {description: No client uses a removed version (accepted ones included)., type: bool, returned: always}
    held_back:
      description: The CRDs whose next release must not be applied yet, a client not accepted still using a removed version.
      type: list
      elements: str
      returned: always
    readers_checked:
      description: The request counters were read for every CRD checked; V(false) means readers were not looked for.
      type: bool
      returned: always
    refusal:
      description: When a CRD is held back, one sentence naming the cluster, each CRD and client, and the way out.
      type: str
      returned: always
    helm:
      description:
        - With O(helm_releases), what was read of the Helm releases (null otherwise) - C(checked) (the Secrets of all
          namespaces could be listed), C(configmaps_checked) (the same for ConfigMaps), C(note), C(scanned)
          (revisions read), C(unreadable), C(releases) (per release C(release), C(revision), C(status), C(driver),
          C(secret) (the Secret or ConfigMap), C(blocked) and C(objects) at removed versions), C(looked_up) (releases
          the objects name that were read in their own namespace), C(not_checked) (release C(namespace/name) -> why
          it could not be read, naming the permission; each holds its CRDs back) and C(rewrite) (releases the
          caller rewrites, O(helm_rewrite)).
        - Never a release's content.
      type: dict
      returned: always
    helm_words:
      description: One sentence about the Helm releases, as the role's console and report show it.
      type: str
      returned: always
    kustomizations:
      description:
        - The Flux Kustomizations the objects name, asked what their sources declare (C(status.inventory)); each with
          C(ref) (namespace/name), C(says) (its C(spec.sourceRef), C(spec.path) and C(status.lastAppliedRevision)) and
          C(not_asked) (why its inventory could not be read, else null).
      type: list
      elements: dict
      returned: always
    flux_words:
      description: One sentence on the Kustomizations asked and those not asked, with why.
      type: str
      returned: always
    unmatched_accepts:
      description: Names in O(accept_clients) that accept no client here (probably a typo, or a source elsewhere).
      type: list
      elements: str
      returned: always
    crds:
      description:
      - Per CRD C(name), C(removed_versions), C(listed), C(writers) (C(manager), C(operation), C(version),
        C(subresource), C(kind), C(objects), C(last_write), C(examples), C(sources), C(source)), C(older_entries)
        (Update entries at removed versions written before C(since)), C(moved_entries) (Flux C(Apply) entries at
        removed versions whose Kustomization says the source moved), C(traffic) (per apiserver C(requests) and C(by_verb) per
        version, C(watches), C(measured), C(note)), C(clients) (one sentence each), C(ok), C(readers_checked),
        C(held_back), C(held_back_by) (the clients not accepted) and C(fix).
      - C(kind) is V(declares) for an C(Apply) entry at a removed version, whatever its age (the applier's source
        still says that version), V(declares (client-side apply)) for kubectl's last-applied annotation at such a
        version, V(declares (Helm release)) for a Helm release whose stored manifest says it, V(not checked (Helm
        release)) for a release the objects name whose storage could not be read (C(manager) is its
        C(namespace/name), C(operation) C(release storage), C(sources) says why and the permission to grant), and
        V(writes) for an C(Update) entry written at or after O(since).
      type: list
      elements: dict
      returned: always
broken_clients:
  description:
    - O(check=writers) only. One record per client that breaks when the versions go, with C(cluster), C(crd),
      C(version), C(seen_in), C(held) (V(false) when O(accept_clients) accepts it) and C(stays) (the storage
      version). With C(seen_in=managedFields) also C(manager), C(operation), C(objects), C(last_write) and
      C(source) (C(what), C(ref) and C(says) of the first source the objects name, or null); with
      C(seen_in=metrics) C(apiserver), C(requests), C(by_verb) and C(watches).
  returned: when O(check=writers)
  type: list
  elements: dict
  sample:
    - {cluster: prod-eu-1, crd: widgets.example.com, seen_in: managedFields, manager: argocd-controller,
       operation: Apply, version: v1alpha1, subresource: "", objects: 12, last_write: "2026-12-01T15:04:05Z",
       examples: [apps/w-01]}
'''

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import Job, argument_spec, run_module
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.client_check import (
    ClientCheckOptions, check_crd, post_outcome)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError, OutcomeError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.writers import WritersOptions, find_writers

OPTIONS = dict(
    check=dict(type="str", choices=["apply", "writers"], default="apply"),
    removed_versions=dict(type="dict"),
    since=dict(type="str"),
    lookback=dict(type="float", default=3600.0),
    metrics_window=dict(type="float", default=30.0),
    accept_clients=dict(type="raw", default=False),
    helm_releases=dict(type="bool", default=True),
    helm_rewrite=dict(type="bool", default=False),
    apiserver_endpoints=dict(type="list", elements="str", default=[]),
    sample=dict(type="int", default=10),
    check_all_below=dict(type="int", default=50),
    page_size=dict(type="int", default=500),
    probe_manager=dict(type="str", default="crdops-client-check"),
    retry_deadline=dict(type="float", default=5.0),
    fail_on_error=dict(type="bool", default=True),
    events=dict(type="bool", default=True),
)


def accept_value(value):
    """``accept_clients`` as given: a boolean (also as text, from a survey), or a list of names (also one per
    comma or line)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "yes", "on", "1", "false", "no", "off", "0", ""):
            return lowered in ("true", "yes", "on", "1")
        return [n for n in value.replace(",", " ").split() if n]
    if isinstance(value, (list, tuple)):
        return [str(n) for n in value]
    raise BadInputError("accept_clients must be true, false or a list of names, got %r" % (value,))


class ClientCheck(Job):
    RESULT = dict(crds=[], ok=False, failed_checks=0, stale_objects=0)
    WHAT = "crd_client_check"

    def prepare(self):
        p = self.params
        self.options = ClientCheckOptions(sample=p["sample"], check_all_below=p["check_all_below"],
                                          page_size=p["page_size"], probe_manager=p["probe_manager"])
        self.options.validate()
        self.checks = []
        self.writers = None
        if p["check"] == "writers":
            if p["removed_versions"] is None:
                raise BadInputError("check=writers needs removed_versions (CRD name -> versions the next release "
                                    "removes)")
            self.writers_options = WritersOptions(
                removed_versions=p["removed_versions"], since=p["since"], lookback=p["lookback"],
                metrics_window=p["metrics_window"], page_size=p["page_size"],
                apiserver_endpoints=tuple(p["apiserver_endpoints"]), accept=accept_value(p["accept_clients"]),
                helm_releases=p["helm_releases"], helm_rewrite=p["helm_rewrite"])
            self.writers_options.validate()

    def run(self, transport, crds):
        if self.params["check"] == "writers":
            self.writers = find_writers(transport, crds, self.writers_options,
                                        connect=getattr(transport, "for_endpoint", None))
            self.result.update(writers=self.writers.to_dict(self.result["cluster"]),
                               broken_clients=self.writers.broken_clients(self.result["cluster"]))
            return
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
        if self.writers is not None:
            self.result["ok"] = self.writers.ok
            held = self.writers.held_back
            self.result["held_back"] = held
            if held and self.params["fail_on_error"]:
                raise OutcomeError("broken_clients", self.writers.refusal(cluster), cluster=cluster, crd=held[0])
            return
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

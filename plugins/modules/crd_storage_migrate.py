#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_storage_migrate
short_description: Re-store every object of the selected CRDs at the current storage version
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
requirements:
  - orjson (optional, faster JSON decoding on the hot path)
description:
  - Lists the objects of each selected CRD (metadata only, in pages; whole objects under conversion C(Webhook) with
    O(removed_versions), whose translated managedFields entries are held against their object, see below) and sends
    each one an empty
    JSON merge patch at the storage version. The apiserver re-encodes an object only when its stored
    bytes differ, so already migrated objects are not written and keep their resourceVersion; this
    gives an exact count of rewritten and unchanged objects. Object content is never sent.
  - An object listed with C(metadata.managedFields) entries at a version being removed (O(removed_versions)) gets,
    instead of the empty patch, one JSON patch (guarded by a C(test) of its resourceVersion) that sets those entries to
    the storage version (conversion C(None), same field paths) or translates their field paths into the storage
    version's through the conversion webhook (C(Webhook)); otherwise server-side apply to the object fails once that
    version is removed (kubernetes/kubernetes#111937). This write, too, re-stores the object. Manager, operation,
    subresource and time are kept. A path the conversion is not shown to map is dropped from that entry alone and
    named (RV(crds[].managed_fields_managers)); an entry of which nothing maps is kept, and the version is listed in
    RV(crds[].versions_not_removable). An entry is translated only where every path it would own exists in its own
    object as read at the storage version; otherwise it is kept, named in RV(crds[].entries_not_in_object), and its
    version listed there too. An object is never left without managedFields. See C(docs/how-it-works.md).
  - A write answered 404 counts as C(gone) only when the Status names the object and a read at a version every
    apiserver serves confirms it; any other 404 fails that object (a lagging HA apiserver answers 404 for a
    version it has not loaded yet).
  - Page N is patched by a bounded worker pool while page N+1 is listed; memory does not grow with
    the number of objects.
  - Throttling (429/503) honours C(Retry-After); connection errors and 500/502/504 are retried with
    exponential backoff until O(retry_deadline).
  - The pass over a CRD stops at the first conversion-webhook failure, on 401/403 and when the
    connection is lost past O(retry_deadline). For CRDs with C(conversion.strategy=Webhook), one object of
    every page is read at every served version before the page is written (conversion probe).
    Other per-object failures (for example an admission webhook rejecting the write) are counted and
    reported; the pass continues unless O(max_failures) is exceeded.
  - Objects last written after the HA barrier passed (their C(resourceVersion) is newer than the etcd revision read
    right after it) whose managedFields name no other version are stored at the storage version already; they are
    not written and are counted in RV(crds[].already_current).
  - "Drain before the proof: a request that began before the storage flip keeps the old storage for its whole life
    (kube-apiserver tears the old storage down only after such requests end, bounded by the request timeout, 60 s by
    default). No write that counts towards a record starts until O(drain_window) seconds have passed since the later
    of the CRD's last spec change (by the apiserver's clock, from its managedFields) and the HA barrier round in
    which the last lagging apiserver reported the new storage version. A flip older than that costs nothing. The
    wait runs under the pass Lease; see RV(crds[].drain)."
  - "Before the record, the pass is proven: with O(etcd_url), every key of the CRD is read from etcd; without it, a
    confirming pass of no-op writes (each a JSON patch testing the object's resourceVersion, over a new connection
    each) must show that no write of ours changed an object, repeated up to O(confirm_passes) times. The record
    names its proof (C(etcd-scan), C(confirming-pass) or C(none)); see RV(crds[].proof) and C(docs/safety.md)."
  - After a complete pass with zero failures, a migration record is written as the annotation
    C(migration.crdops.io/storage-migration) on the CRD, provided its storage version and generation are
    unchanged since the pass started. M(crdops.migration.crd_stored_versions_trim) requires this record.
  - A checkpoint annotation (C(migration.crdops.io/storage-migration-checkpoint)) is written after each
    clean page so that a rerun resumes where the last one stopped. It is ignored when stale and removed
    when the record is written.
  - CRDs whose C(status.storedVersions) already equals the storage version, or that carry a valid record,
    are skipped unless O(force=true). A skipped CRD still gets a managedFields-only pass; its objects are listed
    and only those with managedFields entries at another version are written (no record).
  - Outside check mode, Kubernetes Events on the CRD (C(kubectl describe crd)) say when each pass started,
    succeeded (with its counts) or failed (with the reason).
  - The module fails when any pass is incomplete or has failures; the failure result holds every CRD's counts.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._etcd
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  check_mode:
    support: partial
    details:
      - Plan only. Lists and counts the objects (and probes conversion webhooks), writes nothing.
      - Plans the HA barrier too; when a real run would stop before the first write, it warns and says why in
        RV(barrier.refusal) (RV(barrier.mode=refused)) instead of failing.
  idempotent:
    details: A second run finds a valid record and skips the CRD.
options:
  page_size:
    description: Objects per LIST page. Must be greater than 0.
    type: int
    default: 500
  workers:
    description:
      - Concurrent no-op writes per cluster at most. Must be greater than 0. The HTTP connection pool is sized to match.
      - With O(pace=gentle) the most writes in flight; the pace decides how many are, between 1 and this.
    type: int
    default: 8
  pace:
    description:
      - How hard the re-store may press the apiserver.
      - V(gentle) measures the latency of its own writes, learns the idle latency (lowest window median of the last
        minute, re-measured every 15 s with a single write in flight) and adapts how many writes are in flight, between
        1 and O(workers). Latency over 1.5 times the idle latency cuts the number in proportion; a throttled answer
        (429/503) halves it; otherwise it grows by one per window.
      - With V(gentle), what other clients see is held too (see O(latency_budget)).
      - V(max) keeps O(workers) writes in flight all the time, for a maintenance window.
      - O(max_qps) caps both. The state of the pace is returned in RV(crds[].pace) and shown in the progress lines.
    type: str
    choices: [gentle, max]
    default: gentle
    version_added: 1.0.0
  latency_budget:
    description:
      - With O(pace=gentle), how much slower other clients may find the apiserver while the pass writes, as a multiple
        of their idle p90 and p99 latency. V(0) turns the probe off (the writes' own latency alone sets the pace).
      - A probe stands in for other clients. It sends a GET of the pass Lease 20 times a second, with the run's credentials
        (the same authentication and API Priority and Fairness flow as the writes), on a connection of its own and
        outside O(max_qps), from a Python process of its own (the interpreter running the module, started with the
        settings and credentials on its standard input, never on its command line), so that our own writers holding
        the interpreter do not show as the apiserver's latency. Where that process cannot reach the apiserver the way
        the run does (a proxy), the probe runs on a thread of the module instead and says why in C(process).
      - Its samples from before the pass does its own work are the idle baseline - from the pass Lease through the HA
        barrier and the drain, at least 60 of them (3 s) after 3 answers that paid the new connection's set-up, added to
        those of the run's previous passes. From the first write on, the p90 of its last 5 s is held within this
        multiple of the idle p90, beside the write latency; whichever asks for the slower pace wins.
      - Once the idle has at least 200 samples (the drain alone gives 20 a second), the p99 is held too, over the
        samples since the pace last changed for it (at least 200 of them, at most the last 60 s), within the budget
        over 1.2 of the idle p99 (x1.67 for a budget of 2). The p99 then also decides every growth of the pace - one
        more write in flight, or more of the time with one - taken only when the p99 at this pace, its excess over
        idle scaled to the next pace's writes in flight, stays within that; after a growth, or a cut the p99 asked
        for, the pace does not grow until the p99 is measured again (10 s). Other clients feel the tail - holding
        the p90 alone let their p99 run past the budget (docs/performance.md). Below 200 samples a p99 is one or two
        slow answers, so only the p90 is held and decides the growths.
      - The excess is scaled with the square of the writes in flight, not in proportion - on two cores other clients'
        GET p99 was x1.0-1.5 of idle at one write in flight half of the time and x2-3.7 at one all of the time
        (docs/performance.md) - and a p99 over the budget over 1.2 is cut to where it scales back there (C(tail_aim)
        in RV(crds[].pace)) - a pass's p99 is its slowest 1 % and a p99 of 200 samples reads 20 % high as often as
        not, so the pace holds it below the budget rather than at it.
      - With that p99, a pass that carries no pace from an earlier one (C(started_from) in RV(crds[].pace)) starts with one
        write in flight half of the time, and the p99 measured there grows it - the p99 can act only after 10 s, and one
        write in flight all the time can alone cost a small control plane more than the budget.
      - The multiples are those of a typical client, which spends about 2 ms of each answer in its own code (its HTTP
        library, decoding) that our writes do not lengthen - C(client_own_ms) is added to both the latency and its
        idle reference. The probe is a lean client, so the same delay was a larger multiple of its own faster idle
        than outside observers measured of theirs (docs/performance.md).
      - An idle p90 over 3 times the idle p50 (a noisy idle) is held at 3 times the p50, and an idle p99 over 2 times
        the p50 at 2 times the p50 - noise makes the budget tighter, it never turns it off. The result then says
        C(baseline=noisy) (of the p90).
      - Only the probe slows the pass below one write in flight all the time, down to one write in flight 10% of the
        time (C(duty) in RV(crds[].pace)); after a write that took L, the next one waits L * (1/duty - 1).
      - What the probe saw is returned in C(probe) of RV(crds[].pace) and shown in the pass's result line.
    type: float
    default: 2.0
    version_added: 1.0.0
  apiserver_endpoints:
    description:
      - Every apiserver of an HA control plane, as C(https://host:port) URLs, reached with the same credentials.
      - Before each pass the module waits until all of them, and the one it talks to, report the CRD's current
        storage version in their discovery documents (C(storageVersionHash)). Right after a storage flip an
        apiserver whose informer lags still writes the old version (kubernetes#130235); this is the HA barrier.
      - Before the first write the module counts the apiservers that are alive (identity Leases in
        C(kube-system) renewed within the last minute) and learns their addresses from the C(default/kubernetes)
        EndpointSlice. The URLs of this list, or the reachable EndpointSlice addresses, must be at least as many
        as the alive apiservers, else the module fails without writing anything (see O(barrier_fallback)). The
        kubeconfig URL may be a load balancer, so it counts on its own only when exactly one apiserver is alive.
      - When the identity Leases cannot be read, this list is trusted to name every apiserver (with a warning).
    type: list
    elements: str
    default: []
  barrier_timeout:
    description: Seconds to wait for the HA barrier before failing without writing anything.
    type: float
    default: 60
  barrier_settle:
    description: Extra seconds to wait once every apiserver reports the storage version.
    type: float
    default: 0
  drain_window:
    description:
      - Seconds, counted from the later of the CRD's last spec change (the latest C(time) of a managedFields entry that
        owns C(spec), by the apiserver's clock) and the HA barrier round in which the last lagging apiserver first
        reported the new storage version, before the first write that counts towards a record.
      - An UPDATE that began before the storage flip (held by a slow admission webhook, for example) keeps the old
        storage for its whole life and can commit old-version bytes after our write. kube-apiserver bounds such
        requests by its request timeout (C(--request-timeout), 60 s by default); the default adds 5 s for an apiserver
        that swaps its storage a little after discovery shows the new version. Raise it when C(--request-timeout) is
        raised. Nothing waits when the flip is older.
      - The wait holds the pass Lease (a second run waits for the drain, then O(lease_wait) more) and counts neither
        against O(barrier_timeout) nor against a second run's O(lease_wait). A stop request ends it at once.
    type: float
    default: 65
    version_added: 1.0.0
  confirm_passes:
    description:
      - Without O(etcd_url), the most confirming passes after the re-store. Each sends every object a no-op JSON patch
        that tests its listed resourceVersion (read again and retried when another client wrote in between) over a new
        connection per request; the first pass in which no write of ours changed an object proves the record
        (proof C(confirming-pass)). Objects whose managedFields the pass fixes are not part of the proof.
      - When every pass changed objects, no record is written and the task fails naming them; when every write
        changed its object, it names the mutating admission that does so.
      - V(0) writes the record without a proof (proof C(none)); M(crdops.migration.crd_stored_versions_trim)
        refuses such a record unless told otherwise. At most V(10).
    type: int
    default: 3
    version_added: 1.0.0
  etcd_url:
    description:
      - Client URL of one etcd member. When given, the proof before the record is a read of every key of the CRD from
        one etcd snapshot, each at the storage version (proof C(etcd-scan)), instead of a confirming pass.
    type: str
    version_added: 1.0.0
  barrier_fallback:
    description:
      - What to do when not every alive apiserver can be named and reached directly (most managed clusters
        publish no reachable apiserver address), or when their number cannot be read.
      - V(fail) stops before the first write, saying how many apiservers are alive, which URLs were reached
        and what to set.
      - V(settle) accepts a weaker barrier - B(a risk) - it polls the kubeconfig URL on a new connection each time
        until at least 10 (5 per alive apiserver) consecutive polls report the new storage version, then waits
        O(barrier_fallback_settle) seconds. A load balancer may route every poll to the same apiserver, and one
        that lags longer can still store objects at the old version. The result says so in RV(barrier.mode)
        (V(settle-fallback)) and RV(barrier.warning), and the module warns.
    type: str
    choices: [fail, settle]
    default: fail
  barrier_fallback_settle:
    description: Seconds the settle fallback waits after its polls agree (at least O(barrier_settle)).
    type: float
    default: 30
  preflight_sample:
    description:
      - Check mode only. The no-op write is sent with C(dryRun=All) to the first this many objects of each CRD;
        the ones admission (webhooks, ValidatingAdmissionPolicies) or conversion would refuse are returned in
        RV(crds[].predicted_rejections). V(0) sends no dry-run.
    type: int
    default: 5
  sample_only:
    description:
      - Check mode only (the module fails without it). List only the first O(preflight_sample) objects of each CRD
        (at least one) in one request instead of every object; the dry-run and the managedFields plan cover those
        objects, and the object count comes from the same answer (C(remainingItemCount)), in
        RV(crds[].object_count). The role's preflight uses it, so that only the re-store lists every object.
    type: bool
    default: false
    version_added: 1.0.0
  max_qps:
    description: Cap on requests per second (token bucket shared by all workers). Unset means no cap.
    type: float
  retry_deadline:
    description: Seconds one request may spend being retried (throttling, connection errors, 500/502/504).
    type: float
    default: 120
  max_failures:
    description:
      - Stop the pass over a CRD once more than this many objects failed. V(0) stops at the first failure.
      - Unset means never stop for per-object failures (they are still reported and fail the task).
    type: int
  progress_file:
    description:
      - Path of a JSON file rewritten (atomically) after every page, for polling an C(async) task from outside.
    type: path
  # --- heartbeat of an async pass: the writes stop once the playbook that follows the job is gone ---
  heartbeat_file:
    description:
      - For an C(async) task - a file the playbook touches while it follows the job. Before every write the
        pass checks its age; once it is older than O(heartbeat_timeout), or gone, the pass stops (not attempted
        objects are reported, no migration record) and the task fails saying why.
      - A cancelled or killed playbook (AWX / ansible-runner cancel, Ctrl-C) then stops the writes of the job it
        left behind. The file must exist when the module starts.
    type: path
  heartbeat_timeout:
    description: Seconds without a touch of O(heartbeat_file) after which the pass stops.
    type: float
    default: 30
  write_record:
    description: Write the migration record after a complete pass with zero failures.
    type: bool
    default: true
  resume:
    description: Use and maintain the resume checkpoint annotation.
    type: bool
    default: true
  force:
    description: Run the pass even when the CRD needs no migration or already carries a valid record.
    type: bool
    default: false
  removed_versions:
    description:
      - The versions the next release removes, whose managedFields entries must be fixed. Each item is
        C(<crd name>/<version>) (one CRD) or C(<version>) (every selected CRD). Entries at other versions are never
        touched, so a version that stays served keeps its entries, on every rerun.
      - Under conversion C(Webhook) the mapping of field paths is learnt without writing objects - a ConversionReview
        of made-up objects sent to the webhook (a C(url) webhook directly, a C(service) webhook through the
        apiserver's C(services/proxy), which needs C(create) on C(services/proxy) in its namespace), else a best effort
        from objects read at both versions. RV(crds[].field_mappings) says which.
      - When not given, conversion C(None) fixes the entries at every version other than the storage version (the
        paths are the same), and C(Webhook) fixes none and counts them in RV(crds[].managed_fields_untouched).
      - Naming the storage version fails before anything is written. The role C(crd_upgrade) passes the versions that
        release N+1 removes.
    type: list
    elements: str
    version_added: 1.0.0
  keep_applier_entries:
    description:
      - Leave C(Apply) entries and kubectl's C(last-applied-configuration) annotation at a version in
        O(removed_versions) as they are while the CRD still serves that version. They say that the applier's source (a
        Git repository, a chart) still declares that version, so a check before the next release (the role's, or
        M(crdops.migration.crd_client_check) with O(crdops.migration.crd_client_check#module:check=writers)) can name
        it, on this run and every rerun, until the applier applies at a version that stays. The apiserver converts
        them while the version is served.
      - The role C(crd_upgrade) sets it for the re-store and leaves it unset for the managedFields passes around
        release N+1, which translate them once that release is going to be applied.
    type: bool
    default: false
    version_added: 1.0.0
  keep_written_since:
    description:
      - An RFC 3339 time of the apiserver's clock (the C(server_time) M(crdops.migration.crd_storage_info) returned
        when the run began). Like O(keep_applier_entries), but for any managedFields entry at a version in
        O(removed_versions), still served, written at or after it - a controller still writing there - so that the check
        before the next release sees it whatever the order of the writes.
    type: str
    version_added: 1.0.0
  require_record:
    description:
      - Names of CRDs that must end with a valid migration record. Such a CRD without one gets a full pass (and a record)
        even when its C(status.storedVersions) already holds only the storage version, because a clean list alone is no
        proof (it may have been trimmed by hand). The role passes the CRDs that release N+1 removes a version from.
    type: list
    elements: str
    default: []
    version_added: 1.0.0
  # --- one pass per CRD at a time (the pass Lease) ---
  lease_namespace:
    description:
      - Namespace of the C(coordination.k8s.io/v1) Lease C(crdops-pass-<crd name>) that a pass holds while it writes
        (renewed every 10 s, duration 30 s, deleted when the pass ends), so that two runs (a rerun, a second AWX job,
        another controller) never interleave passes over one CRD. Not taken in check mode.
      - The default V(default) exists in every cluster and holds no control-plane Lock, so the write verbs the Lease
        needs can be granted by a Role in that one namespace; C(kube-system) would mean granting update on the
        leader-election Leases of kube-controller-manager and kube-scheduler. See C(docs/rbac.md).
    type: str
    default: default
  lease_wait:
    description:
      - Seconds to wait for a Lease held by another run before failing with its holder and last renewal.
        V(0) fails at once.
      - A Lease whose holder stopped renewing (killed run) is taken over once C(renewTime + 30 s) is past by the
        apiserver's clock, so the default V(60) lets a rerun right after a kill proceed.
    type: float
    default: 60
  # --- supervision: the pass runs in ansible-playbook's worker, prints progress and stops when it is stopped ---
  progress_interval:
    description:
      - Seconds between progress lines (percent of the discovered object count, rate, ETA) printed while the pass
        runs on the controller (see O(run_on_controller)). V(0) prints none. Ignored when run as a module.
    type: float
    default: 10
  run_on_controller:
    description:
      - V(auto) runs the pass inside ansible-playbook's worker process (the action plugin of this module) when the task
        runs on the controller (C(ansible_connection=local), which is how clusters are inventoried) without C(async).
        There it prints progress lines and stops when ansible-playbook is stopped - SIGINT (Ctrl-C), SIGTERM (an AWX
        cancel) or the loss of ansible-playbook (SIGKILL of its process group). Then no new write is started, the requests in
        flight finish, the checkpoint is kept and the task fails with C(stopped by signal ...)
      - Otherwise (a remote host, C(async), or V(never)) it runs as an ordinary module. A module also stops on
        SIGINT/SIGTERM sent to it, but under C(async) it runs in a session of its own that Ctrl-C and a kill of
        ansible-playbook do not reach; it keeps writing until it ends or its C(async) timeout kills it.
    type: str
    choices: [auto, never]
    default: auto
  time_limit:
    description:
      - Seconds after which the run stops as it does on SIGTERM (no new write, the requests in flight finish, the
        checkpoint is kept) and fails with C(stopped - time_limit of N s reached). A rerun resumes. Unset means no limit.
      - The limit counts from the start of the run, so it includes the drain window and, with a latency probe (see
        O(latency_budget)), whatever of the probe's 3 s idle baseline the barrier and the drain did not cover.
    type: float
seealso:
  - module: crdops.migration.crd_storage_info
  - module: crdops.migration.crd_stored_versions_trim
  - module: kubernetes.core.k8s
'''

EXAMPLES = r'''
- name: Re-store all objects of the Cluster API CRDs (progress lines every 30 s; Ctrl-C stops the writes)
  crdops.migration.crd_storage_migrate:
    context: prod-eu-1
    group: cluster.x-k8s.io
    workers: 16
    progress_interval: 30

- name: Plan only (counts, no writes)
  crdops.migration.crd_storage_migrate:
    names: [crontabs.stable.example.com]
  check_mode: true
'''

RETURN = r'''
crds:
  description: One result per selected CRD.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always}
    storage_version: {description: Storage version of the pass., type: str, returned: always}
    stored_versions: {description: C(status.storedVersions) when the pass started., type: list, elements: str, returned: always}
    skipped: {description: Why the CRD was not migrated (null when it was)., type: str, returned: always}
    listed: {description: Objects listed., type: int, returned: always}
    rewritten: {description: Objects whose resourceVersion changed (re-encoded)., type: int, returned: always}
    unchanged: {description: Objects already stored at the storage version., type: int, returned: always}
    gone:
      description:
        - Objects deleted between list and write. Counted only when the write's 404 is a C(NotFound) Status naming
          the object and a GET at a version every apiserver serves (the old storage version while it is still
          served) also answers C(NotFound) naming it. Any other 404 (for example the plain-text C(404 page not found)
          of an apiserver that does not serve the storage version yet) counts as C(failed).
      type: int
      returned: always
    failed: {description: Objects whose write failed., type: int, returned: always}
    skipped_by_checkpoint:
      description:
        - Listed objects not written because a checkpoint (or, after a relist, this pass) shows them done.
        - A complete pass accounts for every listing,
          C(rewritten + unchanged + gone + skipped_by_checkpoint + already_current == listed).
      type: int
      returned: always
    already_current:
      description:
        - Listed objects not written because they were last written after the HA barrier passed (their
          C(resourceVersion) is greater than RV(crds[].barrier_revision)) and their managedFields name no other
          version, so they are stored at the storage version already. Always 0 in check mode and in a
          managedFields-only pass.
      type: int
      returned: always
      version_added: 1.0.0
    object_count:
      description:
        - With O(sample_only), the number of objects of the CRD from the sample's LIST (C(remainingItemCount) plus the
          objects listed; null when the apiserver does not say); null otherwise (see RV(crds[].listed)).
      type: int
      returned: always
      version_added: 1.0.0
    sampled:
      description: With O(sample_only), V(true) - RV(crds[].listed) and the plan cover only the first objects.
      type: bool
      returned: always
      version_added: 1.0.0
    barrier_revision:
      description:
        - The C(resourceVersion) of a LIST with C(limit=1) of the CRD's objects, read right after the HA barrier passed
          (the etcd revision at that moment); null in check mode and for a managedFields-only pass.
      type: int
      returned: always
      version_added: 1.0.0
    not_attempted: {description: Objects not written because the pass stopped., type: int, returned: always}
    throttled: {description: Throttled responses (429/503)., type: int, returned: always}
    relists: {description: Lists restarted after 410 Gone., type: int, returned: always}
    first_failures:
      description:
        - The first 20 failures (C(namespace), C(name), C(status), C(reason), C(kind), the API's C(message), and
          C(error), one sentence naming cluster, CRD, object, what failed and the API's message).
      type: list
      elements: dict
      returned: always
    duration_s: {description: Seconds spent., type: float, returned: always}
    objects_per_s: {description: Objects processed per second., type: float, returned: always}
    complete: {description: Every object was processed (the pass was not stopped)., type: bool, returned: always}
    aborted_reason: {description: "Why the pass stopped, naming cluster, CRD, object and the API message.", type: str, returned: always}
    aborted_kind:
      description:
        - Error kind of RV(crds[].aborted_reason) (for example V(conversion_webhook), V(permission), V(connection),
          V(unexpected) for an exception that is not ours such as a credential plugin failing, V(lease_lost),
          V(max_failures)); null when the pass was not stopped.
      type: str
      returned: always
    carried:
      description:
        - Counts of the earlier runs of a resumed pass, carried by the checkpoint annotation (null when not resumed).
          The record (RV(crds[].record)) adds them to this run's counts, so it covers the whole pass; the other
          counts of this entry are this run's.
      type: dict
      returned: always
    lease:
      description:
        - The pass Lease (C(namespace), C(name), C(holder), C(waited_s), C(took_over_from), C(renewals), C(lost),
          C(release_error)); null in check mode.
      type: dict
      returned: always
    record: {description: The migration record written., type: dict, returned: always}
    record_written: {description: The record annotation was written., type: bool, returned: always}
    record_error: {description: Why the record could not be written., type: str, returned: always}
    predicted_rejections:
      description:
        - Check mode. Sampled objects (O(preflight_sample)) whose C(dryRun=All) no-op write the API refused,
          with C(namespace), C(name), HTTP C(status), error C(kind) and the API's C(message).
      type: list
      elements: dict
      returned: always
    dry_run_latency_ms:
      description:
        - With O(sample_only), the mean latency of one C(dryRun=All) no-op write of the sample, in milliseconds
          (null when no object was sampled). The role's plan estimates a re-store's duration from it when no
          earlier pass left a pace in the migration record.
      type: float
      returned: always
      version_added: 1.0.0
    managed_fields_rewritten:
      description:
        - C(metadata.managedFields) entries whose C(apiVersion) was another version of the CRD's group, set to the
          storage version in the object's one write (conversion strategy C(None), where the field paths are the same, so
          ownership is kept). Such entries make server-side apply fail with HTTP 500 once that version is removed
          (kubernetes/kubernetes#111937). In check mode, the entries that would be rewritten.
      type: int
      returned: always
    managed_fields_dropped:
      description:
        - Such entries removed instead - only an C(Update) entry whose rewrite would duplicate another entry of the same
          manager at the storage version (that entry stays). In check mode, the entries that would be dropped.
      type: int
      returned: always
    managed_fields_translated:
      description:
        - Entries at a removed version whose field paths were translated into the storage version's (conversion
          C(Webhook), O(removed_versions)); manager, operation, subresource and time kept. In check mode, planned.
      type: int
      returned: always
      version_added: 1.0.0
    managed_fields_untouched:
      description:
        - Entries at another version left as they are - their version is not in O(removed_versions) (it stays served),
          or conversion C(Webhook) without O(removed_versions). Counted as listed.
      type: int
      returned: always
      version_added: 1.0.0
    managed_fields_unmappable:
      description: Entries at a removed version kept as they are because none of their owned paths maps (see RV(crds[].unmappable_entries)).
      type: int
      returned: always
      version_added: 1.0.0
    managed_fields_not_in_object:
      description:
        - Entries at a removed version kept as they are because, translated, they would own a path their own object,
          as read at the storage version, does not have (see RV(crds[].entries_not_in_object)). The mapping's rules are
          checked on up to 50 objects; a conversion that depends on another field may place another object's value
          elsewhere, and its owner would be credited with a field the object lacks.
      type: int
      returned: always
      version_added: 1.0.0
    entries_not_in_object:
      description:
        - The entries of RV(crds[].managed_fields_not_in_object), per C(version), C(manager), C(operation),
          C(subresource) - the number of C(objects), up to five C(examples) (C(namespace/name)) and C(paths_missing),
          the translated paths (up to 20, for example C(.spec.mass.value)) those objects do not have. Their version is
          in RV(crds[].versions_not_removable), and the role refuses release N+1.
      type: list
      elements: dict
      returned: always
      version_added: 1.0.0
    managed_fields_managers:
      description:
        - Per manager, operation, subresource and old version (C(manager), C(operation), C(subresource),
          C(from_version)) - entries C(translated), C(rewritten), C(dropped), C(kept_unmappable),
          C(kept_not_in_object), C(untouched), the
          C(objects) counted, and C(paths_dropped), the owned paths (up to 20, for example C(.spec.endpoint)) the
          conversion is not shown to map, dropped from that manager's entries. A stable field for reports.
      type: list
      elements: dict
      returned: always
      version_added: 1.0.0
    managed_fields_ownership_reduced:
      description:
        - The managers whose ownership was reduced (C(manager), C(operation), C(from_version), C(paths_dropped),
          C(entries_dropped)); the module warns for each CRD that has any.
      type: list
      elements: dict
      returned: always
      version_added: 1.0.0
    unmappable_entries:
      description:
        - Entries kept because nothing of them maps, per C(version), C(manager), C(operation), C(subresource) - the
          number of C(objects), up to five C(examples) (C(namespace/name)) and C(why). Removing that version would make
          server-side apply fail for those objects (kubernetes/kubernetes#111937); the role refuses to.
      type: list
      elements: dict
      returned: always
      version_added: 1.0.0
    versions_not_removable:
      description:
        - The versions of RV(crds[].unmappable_entries) and RV(crds[].entries_not_in_object) - a release that removes
          one of them must not be applied.
      type: list
      elements: str
      returned: always
      version_added: 1.0.0
    last_applied_translated:
      description:
        - Objects whose C(kubectl.kubernetes.io/last-applied-configuration) annotation, applied at a removed version
          (conversion C(Webhook), O(removed_versions)), was rewritten into the storage version's field names in the
          same write, so that client-side C(kubectl apply) still prunes across a renamed field. The write is sent under
          the field manager owning the annotation, which keeps it. In check mode, planned.
      type: int
      returned: always
      version_added: 1.0.0
    last_applied:
      description:
        - Per owning C(manager) and C(from_version) - annotations C(translated) and C(kept) as they are (C(why_kept),
          up to five C(examples)), and C(paths_dropped), applied paths the conversion is not shown to map, left out of
          the annotation (client-side apply will not prune them). An annotation is kept when no single C(Update) entry
          owns it or nothing of it maps.
      type: list
      elements: dict
      returned: always
      version_added: 1.0.0
    field_mappings:
      description:
        - Conversion C(Webhook) with O(removed_versions) - per old version, how its field paths map to the storage
          version - C(from_version), C(to_version), C(method) (V(exact) - made-up objects sent to the webhook,
          V(best_effort) - objects read at both versions, V(unavailable) - no mapping, entries kept), C(paths_mapped),
          C(paths_unmapped) (up to 50) and C(note) (how it was learnt, or why the exact way was not available).
        - C(checked_on_objects) - for an exact mapping, the check of its rules on objects read at both versions
          (how many, and the paths the objects contradicted, left unmapped and named), or why it could not be done.
      type: list
      elements: dict
      returned: always
      version_added: 1.0.0
    objects_with_stale_managed_fields:
      description: Objects listed with such entries (written with the fix, or in check mode, planned).
      type: int
      returned: always
    managed_fields_only:
      description:
        - The CRD was skipped (see RV(crds[].skipped)) and only its objects with managedFields entries at another version
          were written. Objects without such entries are not written and are counted in RV(crds[].unchanged). No record.
      type: bool
      returned: always
    pace:
      description:
        - The pace of the writes at the end of the pass (see O(pace)) - C(mode), C(final_limit) (writes allowed in
          flight at the end), C(min_limit) and C(max_limit_reached) (the lowest and highest limit of the pass),
          C(workers), C(duty) (the fraction of the time one write was allowed in flight at the end; below 1 only when
          the latency probe slowed the pass further; C(final_limit) and C(min_limit) are then that fraction too),
          C(baseline_ms) (the idle write latency learned), C(latency_ms) (median of the last window),
          C(backoffs) (cuts of the limit, latency or throttling), C(throttle_backoffs) (of which for 429/503),
          C(windows), C(probes) (windows run at one write in flight), C(peak_in_flight) and C(started_from)
          (C(limit) and C(baseline_ms) this pass started from, learned by the previous pass of the same run with
          O(pace=gentle); null for the first pass).
        - With a probe (see O(latency_budget)), C(probe_cuts) (cuts it asked for), C(tail_cuts) (of those, the ones its
          p99 asked for), C(tail_refusals) (growths the p99, scaled to the next pace, did not allow), C(futile_cuts)
          (p99 cuts undone because the p99, measured afresh, did not fall), C(cut_floor) (after one, the lowest pace
          the probe cuts to for the rest of the pass, at most 1; else null), C(tail_aim) (the
          p99 multiple the pace holds, the budget over 1.2) and C(probe), what other clients
          saw - C(target) (the Lease it read), C(budget), C(percentile) (the one the budget holds, 90),
          C(baseline) (V(ok); V(noisy), an idle p90 over 3 times its p50, held at 3 times the p50; V(short), fewer than
          60 idle samples, no budget applied; or V(none)), C(baseline_carried) (from the run's previous pass),
          C(idle) and C(during) (C(p50_ms), C(p90_ms), C(p99_ms), C(samples)), C(reference_ms) (the idle latency the
          budget multiplies), C(client_own_ms) (a typical client's own time on each answer, added to both sides of each
          multiple), C(multiple) (the p90 during the writes over C(reference_ms)), C(held) (C(multiple)
          within C(budget)), C(tail_percentile) (99), C(tail_reference_ms) (the idle p99, capped as the p90 is; null
          below 200 idle samples), C(tail_multiple) (the p99 during the writes over it, from 200 samples on) and
          C(tail_held), C(errors) (probe GETs that failed), C(process) (V(separate), or V(in-process) and why),
          C(pid) (of the process that sent the GETs) and C(flow_schema) (the UID of the API Priority and Fairness
          FlowSchema the apiserver put the probe's GETs in, null in-process).
      type: dict
      returned: always
      sample: {mode: gentle, final_limit: 3, min_limit: 1, max_limit_reached: 5, workers: 8, baseline_ms: 2.4,
               latency_ms: 3.1, backoffs: 7, throttle_backoffs: 0, windows: 120, probes: 4, peak_in_flight: 5}
      version_added: 1.0.0
    event_errors:
      description: Kubernetes Events about the pass that could not be posted on the CRD (never a failure).
      type: list
      elements: str
      returned: always
    barrier:
      description:
        - The HA barrier before the pass, planned from the CRD as read under its Lease (every endpoint and the version
          it reported, seconds waited, C(mode), consecutive C(polls) required, C(warning), the endpoints that
          C(lagged) and C(caught_up_after_s), the members an earlier run saw lag in C(lagged_before); a lag is kept on
          the CRD as annotation C(migration.crdops.io/lagged) from the round that first sees it until a complete
          drain after it); null in check mode.
      type: dict
      returned: when a pass ran
    drain:
      description:
        - The drain window waited before the pass (see O(drain_window)) - C(window_s), C(spec_changed_at) (the CRD's
          last spec change, apiserver clock), C(anchor) (what the window counted from - V(flip), V(barrier),
          V(earlier lag) for a lag an earlier run saw, V(unknown) when no managedFields entry owns the spec, V(none)
          for a window of 0), C(waited_s), C(note), C(lagged_before), C(admission_margin_s) (added after the flip's
          stamp for its admission and commit), C(clock_allowance_s) (added for apiservers whose clocks are behind);
          null in check mode and for a managedFields-only pass.
      type: dict
      returned: when a pass ran
      version_added: 1.0.0
    proof:
      description:
        - The proof behind the record - C(kind) (V(etcd-scan), V(confirming-pass)), C(ok), C(reason) (why no record,
          when not ok) and its figures; for a confirming pass C(passes) (per pass C(listed), C(confirmed), C(changed),
          C(excluded), C(gone), C(failed), C(changed_objects), C(duration_s), C(pace) with C(mode), C(min_limit),
          C(max_limit_reached) and C(probe_cuts) of that pass), C(duration_s), C(first_pass_s),
          C(cost_ratio) (confirming passes' seconds over the first pass's) and C(fresh_connections); for an etcd scan
          C(etcd). Null when no proof ran (check mode, O(confirm_passes=0), an incomplete pass).
      type: dict
      returned: always
      version_added: 1.0.0
barrier:
  description: How the HA barrier was planned before the first write, or null when no CRD needed a pass.
  returned: always
  type: dict
  sample: {mode: endpoints, apiservers_alive: 2, reached: ["https://10.0.0.11:6443", "https://10.0.0.12:6443"]}
  contains:
    mode:
      description:
        - V(endpoints) (every apiserver by its own URL), V(single) (one apiserver alive, the kubeconfig URL is it),
          V(settle-fallback) (O(barrier_fallback=settle), weaker, see RV(barrier.warning)) or V(refused) (the run
          failed before the first write; in check mode, which writes nothing, the task does not fail but warns, and
          RV(barrier.refusal) says why a real run would stop).
      type: str
      returned: always
    apiservers_alive: {description: Identity Leases renewed within the last 60 s (null when unknown)., type: int, returned: always}
    identity_leases: {description: Names of those Leases., type: list, elements: str, returned: always}
    stale_identity_leases: {description: Identity Leases not renewed within 60 s (dead apiservers)., type: int, returned: always}
    identity_leases_problem: {description: Why the number of apiservers is unknown (null when known)., type: str, returned: always}
    kubeconfig_url: {description: The URL of the kubeconfig (may be a load balancer)., type: str, returned: always}
    apiserver_endpoints: {description: The URLs of O(apiserver_endpoints)., type: list, elements: str, returned: always}
    endpoint_slice: {description: Apiserver URLs of the C(default/kubernetes) EndpointSlice., type: list, elements: str, returned: always}
    endpoint_slice_problem: {description: Why the EndpointSlice gave no URL (null when it did)., type: str, returned: always}
    reached: {description: URLs that answered C(GET /version) with the run's credentials., type: list, elements: str, returned: always}
    not_reached: {description: URL to the reason it did not answer., type: dict, returned: always}
    targets: {description: URLs the barrier polls before each pass., type: list, elements: str, returned: when not refused}
    polls: {description: Consecutive rounds in which every target must report the storage version., type: int, returned: when not refused}
    settle_s: {description: The least settle time (the fallback's)., type: float, returned: when not refused}
    warning: {description: Why this barrier is weaker than reaching every apiserver (null when it is not)., type: str, returned: when not refused}
    refusal: {description: Check mode - the message a real run would fail with., type: str, returned: in check mode when refused}
totals:
  description:
    - Sums over all CRDs (listed, rewritten, unchanged, gone, failed, throttled, skipped_by_checkpoint, already_current,
      managed_fields_rewritten, managed_fields_dropped, objects_with_stale_managed_fields).
  returned: always
  type: dict
  sample: {listed: 1200, rewritten: 800, unchanged: 400, gone: 0, failed: 0, throttled: 0, skipped_by_checkpoint: 0, already_current: 0,
           managed_fields_rewritten: 120, managed_fields_dropped: 0, objects_with_stale_managed_fields: 60}
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''


from dataclasses import replace

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import (
    ETCD_ARG_SPEC, CrdOpsModule, Job, argument_spec, execute, restated)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.apiservers import (
    BarrierRefusedError, plan_barrier)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import OutcomeError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import EtcdReader
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.heartbeat import Heartbeat
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields_tally import ownership_warnings
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (
    ProgressFile, RunOptions, RunResult, run_migration, skip_reason)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import validate_record
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.stop import StopSignal, Supervision


def barrier_plan(transport, p):
    """Which apiservers the barrier polls, and how (raises BarrierRefusedError when they are not all known)."""
    return plan_barrier(
        transport, p["apiserver_endpoints"], transport.for_endpoint,
        connect_fresh=lambda url: transport.for_endpoint(url, new_connection_per_request=True),
        fallback=p["barrier_fallback"], fallback_settle=p["barrier_fallback_settle"])


def plan_barrier_for(transport, crds, p, check_mode, warn):
    """(plan, facts for the result) before the first write: plan is None when no CRD will get a pass or in check
    mode when the real run would be refused; check mode writes nothing, so it reports the refusal (and warns)
    instead of failing. Each pass plans its barrier again, from the CRD as read under its Lease."""
    if not any(skip_reason(crd, p["force"], validate_record(crd).ok, crd.name in p["require_record"]) is None
               for crd in crds):
        return None, None
    try:
        plan = barrier_plan(transport, p)
    except BarrierRefusedError as exc:
        if not check_mode:
            raise
        exc.with_context(cluster=transport.cluster_label)
        warn("check mode: a real run would stop here: %s" % exc)
        return None, dict(exc.facts, refusal=str(exc))
    if plan.warning:
        warn(plan.warning)
    return plan, plan.to_dict()


# The option list (also validated by the controller-side action plugin of the same name).
OPTIONS = dict(
    ETCD_ARG_SPEC,
    drain_window=dict(type="float", default=65),
    confirm_passes=dict(type="int", default=3, no_log=False),  # "passes" is no password
    page_size=dict(type="int", default=500),
    workers=dict(type="int", default=8),
    pace=dict(type="str", choices=["gentle", "max"], default="gentle"),
    latency_budget=dict(type="float", default=2.0),
    max_qps=dict(type="float"),
    retry_deadline=dict(type="float", default=120),
    max_failures=dict(type="int"),
    progress_file=dict(type="path"),
    write_record=dict(type="bool", default=True),
    resume=dict(type="bool", default=True),
    force=dict(type="bool", default=False),
    removed_versions=dict(type="list", elements="str"),
    keep_applier_entries=dict(type="bool", default=False),
    keep_written_since=dict(type="str"),
    require_record=dict(type="list", elements="str", default=[]),
    apiserver_endpoints=dict(type="list", elements="str", default=[]),
    barrier_timeout=dict(type="float", default=60),
    barrier_settle=dict(type="float", default=0),
    barrier_fallback=dict(type="str", choices=["fail", "settle"], default="fail"),
    barrier_fallback_settle=dict(type="float", default=30),
    preflight_sample=dict(type="int", default=5),
    sample_only=dict(type="bool", default=False),
    lease_namespace=dict(type="str", default="default"),
    lease_wait=dict(type="float", default=60),
    # heartbeat of an async pass: the writes stop once the playbook that follows the job is gone
    heartbeat_file=dict(type="path"),
    heartbeat_timeout=dict(type="float", default=30),
    # --- supervision: used by the controller-side action plugin, ignored by the module itself ---
    progress_interval=dict(type="float", default=10),
    run_on_controller=dict(type="str", choices=["auto", "never"], default="auto"),
    time_limit=dict(type="float"),
)


class Migrate(Job):
    """The whole run, shared by the module and the action plugin (which runs it in ansible-playbook's worker,
    see plugins/action/crd_storage_migrate.py). ``stop`` ends the passes early (stop.py); ``follower`` gets
    every progress update and the object counts."""

    WHAT = "the migration run"

    def __init__(self, params, check_mode=False, warn=None, diff=False, stop=None, follower=None):
        super().__init__(params, check_mode, warn, diff)
        self.stop, self.follower = stop, follower
        self.run_result = RunResult()
        self.barrier = None
        self.options = None

    def heartbeat(self):
        """The pass's dead man's switch for a background run, or None; raises when it has already stopped."""
        p = self.params
        if not p["heartbeat_file"] or self.check_mode:
            return None
        heartbeat = Heartbeat(p["heartbeat_file"], p["heartbeat_timeout"])
        reason = heartbeat.stop_reason()
        if reason:
            raise OutcomeError("stopped", "not started: %s" % reason)
        return heartbeat.stop_reason

    def prepare(self):
        p = self.params
        self.options = RunOptions(
            restore=RestoreOptions(page_size=p["page_size"], workers=p["workers"], pace=p["pace"],
                                   max_failures=p["max_failures"], check_mode=self.check_mode,
                                   write_record=p["write_record"], use_checkpoint=p["resume"],
                                   preflight_sample=p["preflight_sample"], sample_only=p["sample_only"],
                                   should_stop=self.heartbeat(),
                                   removed_versions=(tuple(p["removed_versions"])
                                                     if p["removed_versions"] is not None else None),
                                   keep_declared=p["keep_applier_entries"],
                                   keep_written_since=p["keep_written_since"]),
            force=p["force"], require_record=tuple(p["require_record"]),
            barrier_timeout=p["barrier_timeout"], barrier_settle=p["barrier_settle"],
            lease_namespace=p["lease_namespace"], lease_wait=p["lease_wait"], stop=self.stop,
            drain_window=p["drain_window"], confirm_passes=p["confirm_passes"],
            latency_budget=p["latency_budget"])
        self.options.validate()
        self.require_etcd_client()

    def run(self, transport, crds):
        progress = ProgressFile(self.params["progress_file"], transport.cluster_label, self.check_mode, self.warn)
        if self.follower is not None:
            self.follower.expect(crds, transport)
            progress.on_update = self.follower.update
        # every apiserver must write the new storage version before a pass starts (HA barrier); which ones
        # exist is settled here, before the first write (check mode predicts it)
        plan, self.barrier = plan_barrier_for(transport, crds, self.params, self.check_mode, self.warn)
        options = self.options
        reader = self.etcd(EtcdReader)
        if reader is not None:
            options = replace(options, etcd=reader)
        run_migration(transport, crds, options, self.planner(transport) if not self.check_mode else {},
                      progress, self.run_result)

    def planner(self, transport):
        """The barrier of each pass, planned from the CRD as read under its Lease (apiservers may have come or
        gone, and the CRD may have been flipped, since the run started)."""
        def plan(crd):
            found = barrier_plan(transport, self.params)
            if self.barrier is None:  # no CRD needed a pass when the run started: report this pass's plan
                self.barrier = found.to_dict()
                if found.warning:
                    self.warn("[CRD %s] %s" % (crd.name, found.warning))
            return found
        return plan

    def finish(self):
        run, cluster = self.run_result, self.result["cluster"]
        for entry in run.crds:
            for warning in ownership_warnings(entry["name"], entry):
                self.warn("cluster %s: %s" % (cluster, warning))
        problems = run.problems()
        if problems:
            msg = "cluster %s: %d CRD(s) not fully migrated: %s" % (cluster, len(problems), "; ".join(problems))
            kind = next((c.get("aborted_kind") for c in run.crds if c.get("aborted_kind")), None) or "incomplete"
            raise OutcomeError(kind, msg, cluster=cluster)
        self.result.update(self.partial())

    def partial(self, error=None):
        run = self.run_result
        return dict(self.result, changed=run.changed, crds=run.crds, totals=run.totals,
                    barrier=self.barrier or getattr(error, "facts", None))


def migrate(params, check_mode, warn, stop=None, follower=None):
    """The run as a result; a failed one has ``failed``, ``msg`` and ``error``."""
    return execute(Migrate(params, check_mode, warn, stop=stop, follower=follower))


def main():
    m = CrdOpsModule(argument_spec(OPTIONS))
    # Run as a module (remote host, async, or run_on_controller=never): SIGINT/SIGTERM stop the pass the same
    # way (no new writes, checkpoint kept); the parent is not watched, because under `async` it is the
    # job wrapper, not ansible-playbook.
    stop = StopSignal()
    with Supervision(stop, watch_parent=False, time_limit=m.params["time_limit"]):
        result = migrate(m.params, m.check_mode, m.module.warn, stop=stop)
    if stop.is_set() and result.get("failed"):
        result = restated(result, "%s: %s" % (stop.reason, result["msg"]), "stopped")
    m.exit(result)


if __name__ == "__main__":
    main()

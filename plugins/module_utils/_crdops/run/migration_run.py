# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""One migration run over the selected CRDs of a cluster: checks, skips, HA barrier, passes, totals.

Every CRD is checked before the first write, so one unmigratable CRD stops the run with nothing written.
A CRD whose storedVersions is already clean, or that carries a valid record of a complete pass, is
skipped unless forced: a rerun does not redo finished work. A skipped CRD still gets a managedFields-only
pass, which writes only the objects listed with managedFields entries at another version (kubernetes#111937).
Outside check mode each pass leaves Kubernetes Events on its CRD (``kubectl describe crd``).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union, cast

from ..ha.barrier import BarrierResult, new_result, wait_for_storage_version
from ..kube.crd import Crd
from ..ha.drain import DEFAULT_WINDOW_S, Drain
from ..kube.errors import BadInputError, CrdOpsError, at_least
from ..proof.etcd_scan import EtcdReader
from ..record.events import PASS_FAILED, PASS_STARTED, PASS_SUCCEEDED, emit_crd_event
from ..restore.freshness import barrier_revision
from ..record.lag_note import LAGGED_ANNOTATION, LagKeeper
from ..restore.latency_probe import DEFAULT_BUDGET, LatencyProbe
from ..restore.probe_process import ProcessSampler
from ..ownership.managed_fields import check_removed_versions, keeps_ownership, removed_for
from ..restore.pace import GENTLE, Learned, PaceCarry, PaceGate
from ..ha.pass_lease import DEFAULT_NAMESPACE, LeaseHeldError, PassLease
from ..proof.record_proof import DEFAULT_CONFIRM_PASSES, ConfirmingPasses, etcd_proof
from ..record.record import Proof, validate_record
from ..restore.restore import (
    CrdResult, RestoreOptions, RunPolicy, StopCheck, check_migratable, fix_managed_fields, migrate_crd, run_policy)
from ..kube.selection import get_crd
from ..kube.stop import StopSignal
from ..kube.transport import Transport, error_from_response

TOTAL_KEYS = ("listed", "rewritten", "unchanged", "gone", "failed", "throttled", "skipped_by_checkpoint",
              "already_current", "managed_fields_rewritten", "managed_fields_dropped", "objects_with_stale_managed_fields",
              "managed_fields_translated", "managed_fields_untouched", "managed_fields_unmappable")


@dataclass(frozen=True)
class RunOptions:
    restore: RestoreOptions
    force: bool = False
    # CRDs that must end with a valid record (release N+1 removes one of their versions): a clean
    # storedVersions alone is not proof, since it may have been trimmed by hand
    require_record: Tuple[str, ...] = ()
    barrier_timeout: float = 60.0
    barrier_settle: float = 0.0
    # one pass per CRD at a time (pass_lease.py): the Lease's namespace, and how long to wait for another holder
    lease_namespace: str = DEFAULT_NAMESPACE
    lease_wait: float = 60.0
    stop: Optional[StopSignal] = None  # Ctrl-C, SIGTERM or a vanished supervisor ends the pass (stop.py)
    # do not write objects last written after the barrier passed (no stale managedFields): already_current
    skip_current: bool = True
    # seconds after the flip (or the barrier round in which the last lagging apiserver caught up) before the first
    # write that counts towards a record: requests begun with the old storage drain meanwhile (drain.py)
    drain_window: float = DEFAULT_WINDOW_S
    # the proof behind the record (record_proof.py): an etcd scan when a reader is given, else up to this many confirming
    # passes; 0 (and no reader) writes a record whose proof is "none"
    confirm_passes: int = DEFAULT_CONFIRM_PASSES
    etcd: Optional[EtcdReader] = None
    # the pace a previous run of this cluster learned (its result's ``pace_learned``): the first pass starts there
    pace_start: Optional[Learned] = None
    # pace gentle: what other clients see (a probe GET of the pass Lease) is held within this multiple of its idle
    # p90 (latency_probe.py, probe_baseline.py); 0: no probe, the writes' own latency alone
    latency_budget: float = DEFAULT_BUDGET

    def validate(self) -> None:
        self.restore.validate()
        at_least("drain_window", self.drain_window, 0)
        at_least("latency_budget", self.latency_budget, 0)
        if 0 < self.latency_budget < 1.0:
            raise BadInputError("latency_budget must be 0 (off) or at least 1.0 (a multiple of the idle p90), got %s"
                                % self.latency_budget)
        at_least("confirm_passes", self.confirm_passes, 0)
        if self.confirm_passes > 10:
            raise BadInputError("confirm_passes must be at most 10, got %d" % self.confirm_passes)


# the barrier of one pass: a fixed map of apiserver URL -> transport, or planned from the CRD as read under its Lease
BarrierPlanner = Callable[[Crd], Mapping[str, Any]]
Barrier = Union[Mapping[str, Any], BarrierPlanner]


@dataclass
class RunResult:
    crds: List[Dict[str, Any]] = field(default_factory=list)
    totals: Dict[str, int] = field(default_factory=lambda: dict((k, 0) for k in TOTAL_KEYS))
    changed: bool = False
    pace_learned: Optional[Dict[str, float]] = None  # for the next run of this cluster (RunOptions.pace_start)

    def problems(self) -> List[str]:
        return [p for p in (problem_of(entry) for entry in self.crds) if p]


def problem_of(entry: Dict[str, Any]) -> Optional[str]:
    """Why a CRD's pass does not count as complete, in one line naming the CRD and first object."""
    if entry.get("aborted_reason"):
        return "[CRD %s] pass stopped: %s" % (entry["name"], entry["aborted_reason"])
    if entry.get("failed"):
        first = (entry.get("first_failures") or [{}])[0]
        if first.get("error"):  # the full sentence: cluster, CRD, object, what happened, the API's message
            return "[CRD %s] %d objects failed; first: %s" % (entry["name"], entry["failed"], first["error"])
        obj = "/".join(x for x in (first.get("namespace"), first.get("name")) if x)
        return "[CRD %s] %d objects failed; first: %s (HTTP %s): %s" % (
            entry["name"], entry["failed"], obj, first.get("status"), first.get("message"))
    if entry.get("record_error"):
        return cast(str, entry["record_error"])
    return None


def skip_reason(crd: Crd, force: bool, has_valid_record: bool, record_required: bool = False) -> Optional[str]:
    if force or (record_required and not has_valid_record):
        return None
    if not crd.needs_migration:
        return "status.storedVersions is already [%s]" % crd.storage_version
    if has_valid_record:
        return "a valid migration record exists for storage version %s" % crd.storage_version
    return None


class ProgressFile:
    """A JSON file rewritten atomically after each page, for a role polling a background job."""

    def __init__(self, path: Optional[str], cluster: str, check_mode: bool,
                 on_error: Callable[[str], None]) -> None:
        self.path = path
        self.on_error = on_error
        self.state: Dict[str, Any] = dict(cluster=cluster, crds_total=0, crds_done=0, current=None,
                                          check_mode=check_mode)
        # a follower in the same process (the controller-side action prints progress lines from it)
        self.on_update: Optional[Callable[[Dict[str, Any]], None]] = None

    def update(self, info: Optional[Dict[str, Any]] = None) -> None:
        if info is not None:
            self.state["current"] = info
        self.state["updated_at"] = time.time()
        if self.on_update is not None:
            self.on_update(dict(self.state))
        if not self.path:
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=".crdops-progress-", dir=os.path.dirname(os.path.abspath(self.path)))
            with os.fdopen(fd, "w") as fh:
                json.dump(self.state, fh)
            os.replace(tmp, self.path)
        except OSError as exc:
            self.on_error("cannot write progress_file %s: %s" % (self.path, exc))


def _mf_words(entry: Dict[str, Any]) -> str:
    return ("managedFields entries at other versions: %d rewritten to the storage version, %d translated, %d dropped, "
            "%d kept (nothing maps), %d kept (not in their object), %d untouched (%d objects)" % (
                entry.get("managed_fields_rewritten") or 0, entry.get("managed_fields_translated") or 0,
                entry.get("managed_fields_dropped") or 0, entry.get("managed_fields_unmappable") or 0,
                entry.get("managed_fields_not_in_object") or 0, entry.get("managed_fields_untouched") or 0,
                entry.get("objects_with_stale_managed_fields") or 0))


def started_message(crd: Crd, removed_versions: Optional[Tuple[str, ...]] = None) -> str:
    removed = removed_for(crd.name, removed_versions)
    which = "at %s" % ", ".join(sorted(removed)) if removed is not None else "at other versions"
    if removed is not None and not removed:
        action = "left as they are (no version of this CRD is being removed)"
    elif keeps_ownership(crd.conversion_strategy):
        action = "set to %s (ownership kept)" % crd.storage_version
    elif removed is None:
        action = "left as they are (webhook conversion, and no removed versions given)"
    else:
        action = "translated into %s's field paths through the conversion webhook" % crd.storage_version
    return ("Re-storing every object at storage version %s (status.storedVersions: %s) with no-op writes; "
            "managedFields entries %s of %s are %s." % (
                crd.storage_version, ", ".join(crd.stored_versions) or "none", which, crd.group, action))


def finished_event(entry: Dict[str, Any]) -> Tuple[str, str, bool]:
    """(reason, message, warning) for the end of a pass, for a `kubectl describe crd` reader."""
    problem = problem_of(entry)
    if problem:
        return PASS_FAILED, "Pass at storage version %s failed, no migration record written: %s" % (
            entry["storage_version"], problem), True
    what = "managedFields-only pass" if entry.get("managed_fields_only") else "Re-store pass"
    record = "migration record written" if entry.get("record_written") else "no record needed"
    return PASS_SUCCEEDED, "%s at storage version %s complete: listed %d, rewritten %d, unchanged %d, gone %d, " \
        "skipped by checkpoint %d, already current %d, failed 0; %s; %s." % (
            what, entry["storage_version"], entry["listed"], entry["rewritten"], entry["unchanged"], entry["gone"],
            entry["skipped_by_checkpoint"], entry.get("already_current") or 0, _mf_words(entry), record), False


def _emit(transport: Transport, crd: Crd, errors: List[str], reason: str, message: str, warning: bool = False) -> None:
    err = emit_crd_event(transport, crd, reason, message, warning=warning)
    if err:
        errors.append(err)


def prover(transport: Transport, crd: Crd, options: RunOptions, progress: ProgressFile,
           stop_check: Optional[StopCheck], barrier: Optional[Dict[str, Any]],
           policy: Optional[RunPolicy] = None, pace: Optional[PaceGate] = None
           ) -> Optional[Callable[[CrdResult], Proof]]:
    """What proves the pass before its record: the etcd scan, confirming passes, or nothing (proof "none").
    Confirming requests take a new connection each unless one apiserver alone answers (barrier mode single); each
    confirming pass is paced on from where ``pace`` (the pass's gate) ended, under the same latency probe."""
    reader = options.etcd
    if reader is not None:
        return lambda _first: etcd_proof(reader, crd)
    if options.confirm_passes > 0:
        fresh = (barrier or {}).get("mode") != "single"
        return ConfirmingPasses(transport, crd, options.restore, options.confirm_passes, fresh_connections=fresh,
                                stop=options.stop, stop_check=stop_check, progress=progress.update,
                                mf_policy=policy[0] if policy is not None else None,
                                pace=pace.following if pace is not None else None)
    return None


def before_writes(transport: Transport, crd: Crd, options: RunOptions, barrier: Barrier,
                  lease: Optional[PassLease]) -> Tuple[Dict[str, Any], Dict[str, Any], Optional[int]]:
    """Barrier (planned now, from the CRD as read under its Lease), drain, then the skip rule's revision R:
    (barrier, drain, R). A stop request or a lost Lease ends the waits at once. A lag is noted on the CRD in the
    barrier round that first sees it, and the note (this run's or an earlier one's) is removed only after a complete
    drain; a run that ends or is killed before that leaves it for the next run (lag_note.py)."""
    try:
        plan = barrier(crd) if callable(barrier) else barrier
    except CrdOpsError as exc:  # refused for this CRD (and the ones after it); earlier CRDs' passes stand
        exc.with_context(cluster=transport.cluster_label, crd=crd.name)
        raise
    keeper = LagKeeper(transport, crd, options.restore.check_mode)
    seen = new_result(plan, crd, keeper.earlier)
    stop_check = lease.lost_reason if lease is not None else None
    try:
        waited = wait_for_storage_version(plan, crd, options.barrier_timeout, options.barrier_settle,
                                          stop=options.stop, result=seen, on_lag=keeper.seen)
        drain = Drain(transport, options.drain_window, stop=options.stop).wait(
            crd.name, on_start=lease.announce_drain if lease is not None else None, stop_check=stop_check,
            barrier=waited)
    except CrdOpsError as exc:
        keep_lag(crd, seen, keeper, exc)
        raise
    if lease is not None:
        lease.end_drain()
    if drain.anchor != "none":  # drained a whole window after every member was current: the note has done its work
        drain.note = keeper.forget() or drain.note
    elif keeper.text:  # drain_window 0 waited for nothing: a later run with a window still owes that drain
        drain.note = "drain_window 0: the %s annotation stays on the CRD for a run that drains" % LAGGED_ANNOTATION
    # after the drain: objects written later than this revision are at the storage version (freshness.py)
    revision = barrier_revision(transport, crd) if options.skip_current else None
    return waited.to_dict(), drain.to_dict(), revision


def keep_lag(crd: Crd, seen: BarrierResult, keeper: LagKeeper, exc: CrdOpsError) -> None:
    """The barrier or the drain ended early after a member lagged: the note its barrier wrote stays (written now when
    that write failed), so that the next run drains a whole window after that member catches up even when it has by
    the next run's first poll; the error says so."""
    members = seen.lag_seen
    if not members:
        return
    why = keeper.keep(members)
    if why:
        exc.message += "; the lag was not noted on the CRD (%s): the next run may drain too little" % why
    else:
        exc.message += ("; noted on the CRD (%s): the next run drains a whole window after %s report%s storage "
                        "version %s" % (LAGGED_ANNOTATION, ", ".join(members), "" if len(members) > 1 else "s",
                                        crd.storage_version))


def run_pass(transport: Transport, crd: Crd, options: RunOptions, barrier: Barrier,
             progress: ProgressFile, stop_check: Optional[StopCheck] = None,
             lease: Optional[PassLease] = None, pace: Optional[PaceGate] = None) -> Dict[str, Any]:
    """The full re-store pass of one CRD, behind the HA barrier and the drain, with Events (never in check mode)."""
    check_mode = options.restore.check_mode
    waited, drain, revision = None, None, None
    if not check_mode:
        waited, drain, revision = before_writes(transport, crd, options, barrier, lease)
    if pace is not None:  # the probe sampled through the barrier and the drain: its idle ends here
        pace.idle_ends(give_up(options, stop_check))
    errors: List[str] = []
    if not check_mode:
        _emit(transport, crd, errors, PASS_STARTED, started_message(crd, options.restore.removed_versions))
    try:
        policy = run_policy(transport, crd, options.restore)  # one for the pass and its confirming passes
        entry = migrate_crd(transport, crd, options.restore, progress=progress.update, stop_check=stop_check,
                            stop=options.stop, barrier_revision=revision, pace=pace, policy=policy,
                            barrier_mode=str((waited or {}).get("mode") or ""),
                            prove=None if check_mode else prover(transport, crd, options, progress, stop_check, waited,
                                                                 policy, pace)
                            ).to_dict()
    except CrdOpsError as exc:
        if not check_mode:
            _emit(transport, crd, errors, PASS_FAILED, "Pass at storage version %s stopped: %s" % (
                crd.storage_version, exc), warning=True)
        raise
    if not check_mode:
        reason, message, warning = finished_event(entry)
        _emit(transport, crd, errors, reason, message, warning)
    entry["barrier"] = waited
    entry["drain"] = drain
    entry["event_errors"] = errors
    return entry


def run_managed_fields_pass(transport: Transport, crd: Crd, options: RunOptions,
                            progress: ProgressFile, stop_check: Optional[StopCheck] = None,
                            pace: Optional[PaceGate] = None) -> Dict[str, Any]:
    """For a skipped CRD: fix stale managedFields entries; an Event only when something was (to be) written."""
    entry = fix_managed_fields(transport, crd, options.restore, progress=progress.update,
                               stop_check=stop_check, stop=options.stop, pace=pace).to_dict()
    errors: List[str] = []
    if not options.restore.check_mode and (entry["objects_with_stale_managed_fields"] or problem_of(entry)):
        reason, message, warning = finished_event(entry)
        _emit(transport, crd, errors, reason, message, warning)
    entry["event_errors"] = errors
    return entry


def run_migration(transport: Transport, crds: List[Crd], options: RunOptions,
                  barrier: Barrier, progress: ProgressFile,
                  result: Optional[RunResult] = None) -> RunResult:
    """Migrate ``crds`` one after the other; fills ``result`` as it goes (partial on an exception).

    ``barrier``: the apiservers to poll before each pass, or a planner called with the CRD as re-read under its
    Lease (a CRD flipped while an earlier CRD's pass ran gets a barrier of its own)."""
    result = result if result is not None else RunResult()
    check_mode = options.restore.check_mode
    for crd in crds:  # every selected CRD is checked before the first write
        check_migratable(crd, transport.cluster_label)
        check_removed_versions(crd, options.restore.removed_versions, transport.cluster_label)
    progress.state["crds_total"] = len(crds)
    carry = PaceCarry(options.restore.pace, options.restore.workers, options.pace_start)
    for index, crd in enumerate(crds, start=1):
        progress.state["crd_index"] = index  # the CRD the next progress reports are about
        lease = None if check_mode else take_lease(transport, crd, options)
        probe = start_probe(transport, lease, options, carry)
        gate = carry.gate(probe)
        try:
            if lease is not None:  # another run may have finished (record) or advanced (checkpoint) meanwhile
                crd = get_crd(transport, crd.name)
            entry, had_valid_record = migrate_one(transport, crd, options, barrier, progress, lease, gate)
        finally:
            if probe is not None:
                probe.stop()
            released = lease.release() if lease is not None else None
            carry.keep(gate)
            result.pace_learned = carry.learned.to_dict() if carry.learned else None
        entry["lease"] = dict(lease.to_dict(), release_error=released) if lease is not None else None
        result.crds.append(entry)
        for key in TOTAL_KEYS:
            result.totals[key] += entry.get(key) or 0
        progress.state["crds_done"] += 1
        progress.update()
        if is_change(entry, had_valid_record, check_mode):
            result.changed = True
    return result


def start_probe(transport: Transport, lease: Optional[PassLease], options: RunOptions,
                carry: PaceCarry) -> Optional[LatencyProbe]:
    """The probe of one pass under pace gentle with a budget: GETs of its pass Lease, from a process of its own
    (probe_process.py; else on a thread here, on a connection of its own), never through the max_qps bucket, from
    now until the pass ends. It samples the idle through the barrier and the drain (``PaceGate.idle_ends``), added
    to what the cluster's earlier passes measured."""
    if lease is None or options.restore.pace != GENTLE or not options.latency_budget:
        return None
    own = getattr(transport, "for_endpoint", None)
    base_url = getattr(transport, "base_url", None)
    conn: Transport = own(base_url) if own is not None and base_url else transport
    path = lease.path

    def fetch() -> None:
        resp = conn.request("GET", path)
        if not resp.ok:
            raise error_from_response(resp, "latency probe GET of the pass Lease", cluster=transport.cluster_label)
    wire = getattr(transport, "wire", None)
    sampler = ProcessSampler(wire() if wire is not None else None, path)
    return LatencyProbe(fetch, options.latency_budget, baseline=carry.idle, target=lease.where,
                        sampler=sampler).start()


def give_up(options: RunOptions, stop_check: Optional[StopCheck]) -> Callable[[], bool]:
    """Whether a wait of the pass should end: a stop request, or the pass Lease lost."""
    stop = options.stop
    return lambda: bool((stop is not None and stop.is_set()) or (stop_check is not None and stop_check()))


def take_lease(transport: Transport, crd: Crd, options: RunOptions) -> PassLease:
    """Hold the pass Lease of ``crd`` (waiting up to ``lease_wait`` s); a Warning Event on the CRD when refused."""
    try:
        lease = PassLease(transport, crd.name, options.lease_namespace).acquire(options.lease_wait, stop=options.stop)
    except LeaseHeldError as exc:
        emit_crd_event(transport, crd, PASS_FAILED, "Pass not started: %s" % exc, warning=True)
        raise
    if lease.took_over_from:
        emit_crd_event(transport, crd, PASS_STARTED, "Pass lease %s taken over from a run that stopped renewing "
                       "it (%s)." % (lease.where, lease.took_over_from))
    return lease


def migrate_one(transport: Transport, crd: Crd, options: RunOptions, barrier: Barrier,
                progress: ProgressFile, lease: Optional[PassLease],
                pace: Optional[PaceGate] = None) -> Tuple[Dict[str, Any], bool]:
    """The pass over one CRD, or its managedFields-only pass when it is skipped; (entry, had a valid record)."""
    stop_check = lease.lost_reason if lease is not None else None
    had_valid_record = validate_record(crd).ok
    skip = skip_reason(crd, options.force, had_valid_record, crd.name in options.require_record)
    if skip:
        if pace is not None:
            pace.idle_ends(give_up(options, stop_check))
        entry = run_managed_fields_pass(transport, crd, options, progress, stop_check, pace)
        entry["barrier"] = None
        entry["drain"] = None
    else:
        entry = run_pass(transport, crd, options, barrier, progress, stop_check, lease, pace)
    entry["skipped"] = skip
    return entry, had_valid_record


def is_change(entry: Dict[str, Any], had_valid_record: bool, check_mode: bool) -> bool:
    """A re-encoded object, a first record, or fixed managedFields; in check mode, a pass or fix to come."""
    if entry["skipped"]:  # managedFields-only pass: a change only when an object is (to be) written
        return bool(entry["objects_with_stale_managed_fields"] if check_mode else entry["rewritten"])
    # refreshing a record that was already valid (force) is not a change worth reporting
    first_record = entry["record_written"] and not had_valid_record
    return bool(entry["rewritten"] or first_record or check_mode)

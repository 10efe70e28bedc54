# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The re-store pass: one no-op write of every object at the storage version (see object_write.py).

An object whose stored bytes already match the storage encoding is not written by the apiserver
and keeps its resourceVersion, so comparing the returned resourceVersion with the listed one
counts rewritten vs unchanged exactly. Object content is never sent; an object listed with
managedFields entries at another version gets a JSON patch of those entries instead of ``{}``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ..ha.server_clock import parse_time
from ..kube.crd import Crd
from ..kube.errors import (
    BadInputError,
    ConnectionFailed,
    ConversionWebhookError,
    CrdOpsError,
    PermissionDenied,
    UnexpectedError,
    at_least,
    unexpected,
)
from .freshness import written_after
from .listing import ListStats, ObjectRef, first_page, list_pages
from ..ownership.managed_fields import ManagedFieldsPolicy, check_removed_versions, plan_patch
from ..ownership.mapping_source import MappingSource, managed_fields_policy
from ..ownership.managed_fields_tally import ManagedFieldsTally
from .object_write import (  # noqa: F401 - outcome kinds and restore_object are re-exported for callers
    FAILED,
    GONE,
    NOT_ATTEMPTED,
    REWRITTEN,
    UNCHANGED,
    Outcome,
    confirm_object,
    restore_object,
)
from .pace import GENTLE, PACE_MODES, PaceGate, pace_gate
from .preflight import predict_rejections, timed_rejections
from ..kube.stop import StopSignal
from ..record.record import (
    CARRIED_COUNTS,
    PROOF_NONE,
    Checkpoint,
    MigrationRecord,
    Proof,
    read_checkpoint,
    utc_now,
    write_checkpoint,
    write_record,
)
from ..kube.transport import JSON, Transport, error_from_response

FATAL_ERRORS = (ConversionWebhookError, ConnectionFailed, PermissionDenied, UnexpectedError)
MAX_REPORTED_FAILURES = 20

ProbeFn = Callable[[Crd, List[ObjectRef]], None]
ProgressFn = Callable[[Dict[str, Any]], None]
StopCheck = Callable[[], Optional[str]]  # why the pass must stop writing now (e.g. its Lease was lost), or None
MAX_CHANGED_KEYS = 20


@dataclass(frozen=True)
class RestoreOptions:
    page_size: int = 500
    workers: int = 8  # threads; with pace gentle the most writes in flight, with pace max always that many
    pace: str = GENTLE  # gentle: writes in flight adapt to their latency (pace.py); max: always ``workers``
    max_failures: Optional[int] = None  # abort once failed > max_failures; None = never
    check_mode: bool = False
    write_record: bool = True
    use_checkpoint: bool = True
    checkpoint_every: int = 1  # pages
    probe_conversion: bool = True  # probe webhook conversion before each page
    preflight_sample: int = 5  # check mode: dry-run the no-op write on this many objects
    # check mode: list only the first max(1, preflight_sample) objects (one request, which also gives the count)
    sample_only: bool = False
    # asked before every write: a reason to stop the pass (the background job's heartbeat), or None
    should_stop: Optional[Callable[[], Optional[str]]] = field(default=None, compare=False, repr=False)
    # versions the target release removes, ``<crd name>/<version>`` or ``<version>`` (every CRD); None: not given
    # (managed_fields.py: conversion None then fixes every other version, a webhook none)
    removed_versions: Optional[Tuple[str, ...]] = None
    # Apply entries and kubectl's last-applied annotation at a removed version still served are left as they are
    # (managed_fields.py): they tell the check before the next release which appliers still declare that version
    keep_declared: bool = False
    # and so is any entry at such a version written at or after this apiserver time (RFC 3339: when the run began)
    keep_written_since: Optional[str] = None

    def validate(self) -> None:
        at_least("page_size", self.page_size, 0, strict=True)
        at_least("workers", self.workers, 0, strict=True)
        if self.pace not in PACE_MODES:
            raise BadInputError("pace must be one of %s, got %r" % (", ".join(PACE_MODES), self.pace))
        at_least("max_failures", self.max_failures, 0)
        at_least("checkpoint_every", self.checkpoint_every, 0, strict=True)
        at_least("preflight_sample", self.preflight_sample, 0)
        if self.sample_only and not self.check_mode:
            raise BadInputError("sample_only plans from a sample: it needs check mode")
        if self.keep_written_since is not None and parse_time(self.keep_written_since) is None:
            raise BadInputError("keep_written_since must be an RFC 3339 time such as 2026-12-01T15:04:05Z, got %r"
                                % self.keep_written_since)


@dataclass
class CrdResult:
    crd: str
    storage_version: Optional[str]
    stored_versions: List[str]
    listed: int = 0
    rewritten: int = 0
    unchanged: int = 0
    gone: int = 0
    failed: int = 0
    skipped_by_checkpoint: int = 0
    # listed, not written: last written after the barrier passed, no stale managedFields (freshness.py)
    already_current: int = 0
    not_attempted: int = 0
    throttled: int = 0
    relists: int = 0
    expired_continues: int = 0  # 410 Gone answered by resuming with the server's inconsistent token
    pages: int = 0
    first_failures: List[Dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0
    objects_per_s: float = 0.0
    complete: bool = False
    aborted_reason: Optional[str] = None
    aborted_kind: Optional[str] = None  # error kind of the first stop reason (conversion_webhook, unexpected, ...)
    check_mode: bool = False
    resumed_from: Optional[str] = None
    # counts of the earlier runs of this pass, carried by the checkpoint (None: not resumed, or an old checkpoint)
    carried: Optional[Dict[str, int]] = None
    checkpoint_note: Optional[str] = None
    record: Optional[Dict[str, Any]] = None
    record_written: bool = False
    record_error: Optional[str] = None
    predicted_rejections: List[Dict[str, Any]] = field(default_factory=list)
    # managedFields entries at a version other than the storage version (kubernetes#111937), fixed in the write
    managed_fields_rewritten: int = 0  # entries whose apiVersion was set to the storage version (conversion None)
    managed_fields_dropped: int = 0  # entries removed (webhook conversion, or a duplicate manager identity)
    objects_with_stale_managed_fields: int = 0  # objects listed with such entries (written or, check mode, planned)
    managed_fields_only: bool = False  # a pass over a CRD already done: only objects with stale entries written
    barrier_revision: Optional[int] = None  # etcd revision read when the barrier passed (None: no skip rule)
    object_count: Optional[int] = None  # sample_only: the count the sample's LIST gave (remainingItemCount)
    sampled: bool = False  # sample_only: listed and planned only the first objects
    pace: Optional[Dict[str, Any]] = None  # the limiter's state at the end (pace.py)
    # a confirming pass (record_proof.py): no-op writes testing the listed resourceVersion; ``rewritten`` counts objects
    # our write changed (the first keys in ``changed_objects``), ``excluded`` those whose managedFields it fixed
    confirming: bool = False
    excluded: int = 0
    changed_objects: List[str] = field(default_factory=list)
    proof: Optional[Dict[str, Any]] = None  # the proof behind the record (a full pass), see record.Proof
    drain: Optional[Dict[str, Any]] = None  # the drain window waited before the pass (drain.py)
    dry_run_latency_ms: Optional[float] = None  # sample_only: mean latency of one dry-run write (the plan's estimate)
    # per manager: entries translated, rewritten, dropped, kept unmappable, untouched (managed_fields_tally.py)
    managed_fields_report: Dict[str, Any] = field(default_factory=dict)
    field_mappings: List[Dict[str, Any]] = field(default_factory=list)  # how each old version maps (webhook)

    @property
    def ok(self) -> bool:
        return self.complete and self.failed == 0 and self.record_error is None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.crd, "storage_version": self.storage_version,
            "stored_versions": list(self.stored_versions), "listed": self.listed,
            "rewritten": self.rewritten, "unchanged": self.unchanged, "gone": self.gone,
            "failed": self.failed, "skipped_by_checkpoint": self.skipped_by_checkpoint,
            "already_current": self.already_current, "barrier_revision": self.barrier_revision,
            "object_count": self.object_count, "sampled": self.sampled,
            "not_attempted": self.not_attempted, "throttled": self.throttled, "relists": self.relists,
            "expired_continues": self.expired_continues,
            "pages": self.pages, "first_failures": list(self.first_failures),
            "duration_s": round(self.duration_s, 3), "objects_per_s": round(self.objects_per_s, 1),
            "complete": self.complete, "aborted_reason": self.aborted_reason, "aborted_kind": self.aborted_kind,
            "check_mode": self.check_mode, "resumed_from": self.resumed_from, "carried": self.carried,
            "checkpoint_note": self.checkpoint_note, "record": self.record,
            "record_written": self.record_written, "record_error": self.record_error,
            "predicted_rejections": list(self.predicted_rejections),
            "managed_fields_rewritten": self.managed_fields_rewritten,
            "managed_fields_dropped": self.managed_fields_dropped,
            "objects_with_stale_managed_fields": self.objects_with_stale_managed_fields,
            "managed_fields_only": self.managed_fields_only, "pace": self.pace,
            "proof": self.proof, "drain": self.drain,
            "dry_run_latency_ms": self.dry_run_latency_ms,
            **self.managed_fields_report, "field_mappings": list(self.field_mappings),
        }


def conversion_probe(transport: Transport) -> ProbeFn:
    """GET the page's first object at every served version; a failure aborts the pass."""

    def probe(crd: Crd, page: List[ObjectRef]) -> None:
        if crd.conversion_strategy != "Webhook" or not page:
            return
        ref = page[0]
        for version in crd.served_versions:
            path = crd.resource_path(version, ref.namespace or None, ref.name)
            resp = transport.request("GET", path, accept=JSON)
            if resp.ok or resp.status == 404:
                continue
            err = error_from_response(resp, "conversion probe GET at %s" % version,
                                      cluster=transport.cluster_label, crd=crd.name, obj=ref.key)
            if not isinstance(err, ConversionWebhookError):
                err = ConversionWebhookError(
                    "conversion probe GET at %s failed" % version, cluster=transport.cluster_label,
                    crd=crd.name, obj=ref.key, status=resp.status, api_message=resp.api_message())
            raise err

    return probe


def check_migratable(crd: Crd, cluster: Optional[str] = None) -> None:
    """Refuse, before anything is written, a CRD whose objects cannot be re-stored."""
    from ..kube.errors import BadInputError

    if not crd.storage_version:
        raise BadInputError("CRD has no storage version", cluster=cluster, crd=crd.name)
    if crd.storage_version not in crd.served_versions:
        raise BadInputError(
            "storage version %s is not served (served: %s); the no-op write goes through the storage "
            "version's endpoint, so serve it (served: true) before migrating"
            % (crd.storage_version, ", ".join(crd.served_versions) or "none"), cluster=cluster, crd=crd.name)


class _Page:
    """One listed page: the objects submitted, their pending outcomes, and what the checkpoint needs."""

    __slots__ = ("refs", "futures", "last_key", "skipped", "covered", "current")

    def __init__(self, refs: List[ObjectRef], futures: List[Future[Outcome]], last_key: str, skipped: int) -> None:
        self.refs = refs
        self.futures = futures
        self.last_key = last_key
        self.skipped = skipped
        self.covered = 0  # of the skipped: listed at or before the resume point, counted by earlier runs
        self.current = 0  # listed, not written: at the storage version already (written after the barrier)


class RestorePass:
    """One pass over one CRD (as read when the pass starts). Page N is written by a worker pool while page
    N+1 is listed; at most two pages are held, so memory does not grow with the object count.

    ``managed_fields_only``: for a CRD whose pass is already done (clean storedVersions or a valid record),
    write only the objects listed with stale managedFields entries; no checkpoint, no record."""

    def __init__(self, transport: Transport, crd: Crd, options: RestoreOptions, *, probe: Optional[ProbeFn] = None,
                 progress: Optional[ProgressFn] = None, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], str] = utc_now, managed_fields_only: bool = False,
                 stop_check: Optional[StopCheck] = None, stop: Optional[StopSignal] = None,
                 barrier_revision: Optional[int] = None, barrier_mode: str = "",
                 pace: Optional[PaceGate] = None, mf_policy: Optional[ManagedFieldsPolicy] = None,
                 confirming: bool = False, prove: Optional[Callable[[CrdResult], Proof]] = None) -> None:
        self.transport = transport
        self.crd = crd
        self.options = options
        self.mf_only = managed_fields_only
        self.confirming = confirming
        self.prove = prove
        self.barrier_mode = barrier_mode  # into the record: a settle-fallback proof is weaker (record.py)
        if probe is None and options.probe_conversion:
            probe = conversion_probe(transport)
        self.probe = probe
        self.progress = progress
        self.clock = clock
        self.now = now
        self.result = CrdResult(crd=crd.name, storage_version=crd.storage_version,
                                stored_versions=list(crd.stored_versions), check_mode=options.check_mode,
                                managed_fields_only=managed_fields_only, confirming=confirming)
        # check mode writes nothing, a managedFields-only pass writes only stale objects and a confirming pass tests
        # every object: no skip rule there
        if not (options.check_mode or managed_fields_only or confirming):
            self.result.barrier_revision = barrier_revision
        self.stats = ListStats()
        # which managedFields entries to fix and how (removed versions, field mapping), and what was done to them
        self.mf_policy = mf_policy or ManagedFieldsPolicy(crd.group, crd.storage_version, crd.conversion_strategy)
        self.mf_tally = ManagedFieldsTally()
        # how many writes are in flight (workers are threads; the gate decides how many of them write at once)
        self.pace = pace if pace is not None else pace_gate(options.pace, options.workers)
        self.abort = threading.Event()
        self.abort_reasons: List[str] = []
        self.abort_kind: Optional[str] = None
        self.stop_check = stop_check
        self.started_at = now()
        self.clean_through: Optional[str] = None  # last key of the last failure-free page, in order
        self.resume_point: Optional[str] = None  # the checkpoint's key when it carries earlier counts
        self.covered = 0  # listings (drained) at or before resume_point: already in the carried counts
        self.clean = True  # no failure so far: the checkpoint may advance
        self.pages_since_ckpt = 0
        self.inflight: Deque[_Page] = deque()
        self.relists_seen = 0
        self._start = clock()
        self._throttled_before = 0
        # writes answered so far, counted in the workers: a gentle run (low max_qps) drains a page only every
        # page_size / max_qps seconds, and progress lines should move in between (report at most once a second)
        self._live_lock = threading.Lock()
        self._live_done = 0
        self._live_reported = time.monotonic()
        if stop is not None:  # a signal or a vanished supervisor ends the pass like a fatal error (stop.py)
            stop.listen(self.stop)

    # -- the pass ---------------------------------------------------------------------------------------------
    def run(self) -> CrdResult:
        if self.options.sample_only:
            return self.sample()
        self.resume_from_checkpoint()
        self._throttled_before = _throttled(self.transport)
        executor = ThreadPoolExecutor(max_workers=self.options.workers, thread_name_prefix="crdops-restore")
        try:
            self.guarded(lambda: self.list_and_submit(executor), "listing and submitting the writes")
            self.guarded(self.drain_all, "counting the writes")
            self.drain_all()  # after a stop: what is left in flight returns NOT_ATTEMPTED
        except BaseException:  # KeyboardInterrupt, SystemExit: queued writes must not run on
            self.stop("interrupted", "interrupted")
            raise
        finally:
            executor.shutdown(wait=True)
        self.finish()
        self.write_record()
        return self.result

    def sample(self) -> CrdResult:
        """Check mode from one LIST of the first objects: their dry-run, their managedFields plan, and the count."""
        r = self.result
        r.sampled = True
        self.guarded(self.plan_sample, "planning from a sample")
        self.finish()
        return r

    def plan_sample(self) -> None:
        r = self.result
        refs, r.object_count = first_page(self.transport, self.crd, self.options.preflight_sample,
                                          classify=self.mf_policy.classify,
                                          whole_objects=self.mf_policy.reads_objects)
        self.note_kept(refs)
        self.stats.listed, self.stats.pages, r.pages = len(refs), 1, 1
        if self.probe is not None:
            self.probe(self.crd, refs)
        if not self.mf_only and self.options.preflight_sample > 0:
            r.predicted_rejections, r.dry_run_latency_ms = timed_rejections(self.transport, self.crd, refs,
                                                                            self.options.preflight_sample)
        self.plan_managed_fields(refs)

    def resume_from_checkpoint(self) -> None:
        """Skip what a previous run did cleanly at this storage version and generation."""
        if not self.options.use_checkpoint or self.mf_only:
            return
        ckpt, note = read_checkpoint(self.crd)
        self.result.checkpoint_note = note
        if ckpt is not None:
            self.clean_through = ckpt.last
            self.started_at = ckpt.started_at or self.started_at
            self.result.resumed_from = ckpt.last
            if ckpt.counts is not None:
                self.resume_point = ckpt.last
                self.result.carried = dict(ckpt.counts)

    def stop(self, reason: str, kind: Optional[str] = None) -> None:
        """End the pass: workers not yet started return NOT_ATTEMPTED; the first reason is reported."""
        if not self.abort.is_set():
            self.abort_reasons.append(reason)
            self.abort_kind = kind
            self.abort.set()

    def guarded(self, step: Callable[[], None], what: str) -> None:
        """Run ``step``; any exception that is not ours stops the pass like our own fatal errors do (no more
        writes, partial counts kept), with a scrubbed message and no traceback."""
        try:
            step()
        except CrdOpsError as exc:
            exc.with_context(cluster=self.transport.cluster_label, crd=self.crd.name)
            self.stop(str(exc), exc.kind)
        except Exception as exc:
            err = unexpected(exc, what, cluster=self.transport.cluster_label, crd=self.crd.name)
            self.stop(str(err), err.kind)

    def must_stop(self) -> bool:
        """Stopped already, or told to stop now by ``stop_check`` (the pass Lease was lost)."""
        if self.abort.is_set():
            return True
        reason = self.stop_check() if self.stop_check is not None else None
        if reason:
            self.stop("[cluster %s, CRD %s] %s" % (self.transport.cluster_label, self.crd.name, reason), "lease_lost")
        return self.abort.is_set()

    def list_and_submit(self, executor: ThreadPoolExecutor) -> None:
        """List pages (metadata only) and hand each to the workers; a listing or probe failure stops the pass."""
        try:
            # whole objects when entries are translated: each translation is held against its own object
            for refs in list_pages(self.transport, self.crd, self.options.page_size, stats=self.stats,
                                   classify=self.mf_policy.classify, whole_objects=self.mf_policy.reads_objects):
                if self.must_stop():
                    break
                self.note_kept(refs)
                if self.stats.relists != self.relists_seen:
                    # the list restarted: finish in-flight pages first so that what they did is skipped
                    self.relists_seen = self.stats.relists
                    self.drain_all()
                todo, skipped = self.select(refs)
                todo, current = self.split_current(todo)
                if self.probe is not None:
                    self.probe(self.crd, todo if self.mf_only else refs)
                page = self.submit(executor, todo, refs[-1].key, skipped)
                page.current = current
                if self.resume_point is not None:
                    page.covered = sum(1 for r in refs if r.key <= self.resume_point)
                self.inflight.append(page)
                while len(self.inflight) > 1:  # page N is written while page N+1 is listed
                    self.drain(self.inflight.popleft())
        except CrdOpsError as exc:
            # listing/probe failure (conversion webhook, 403, connection): stop the pass
            self.stop(str(exc.with_context(cluster=self.transport.cluster_label, crd=self.crd.name)), exc.kind)

    def select(self, refs: List[ObjectRef]) -> Tuple[List[ObjectRef], int]:
        """The objects of a page to write, and how many are skipped (checkpoint, or done before a relist).
        In managedFields-only mode the objects without stale entries are not written (counted unchanged)."""
        todo = refs if self.clean_through is None else [r for r in refs if r.key > self.clean_through]
        skipped = len(refs) - len(todo)
        if self.mf_only:
            fine = len(todo)
            todo = [r for r in todo if r.stale is not None]
            if not self.options.check_mode:
                self.result.unchanged += fine - len(todo)
        return todo, skipped

    def split_current(self, todo: List[ObjectRef]) -> Tuple[List[ObjectRef], int]:
        """Take out the objects last written after the barrier passed, with no stale managedFields entry: they are
        at the storage version already (freshness.py). Returns the objects still to write and how many were taken."""
        revision = self.result.barrier_revision
        if revision is None:
            return todo, 0
        rest = [r for r in todo if not written_after(r, revision)]
        return rest, len(todo) - len(rest)

    def submit(self, executor: ThreadPoolExecutor, todo: List[ObjectRef], last_key: str, skipped: int) -> _Page:
        """Start the writes of one page; in check mode plan them instead (dry-run sample, managedFields counts)."""
        futures: List[Future[Outcome]] = []
        if self.options.check_mode:
            if (self.result.pages == 0 and not self.inflight and self.options.preflight_sample > 0
                    and not self.mf_only):
                self.result.predicted_rejections = predict_rejections(self.transport, self.crd, todo,
                                                                      self.options.preflight_sample)
            self.plan_managed_fields(todo)
        else:
            futures = [executor.submit(self.work, r) for r in todo]
        return _Page(todo, futures, last_key, skipped)

    def plan_managed_fields(self, todo: List[ObjectRef]) -> None:
        """Check mode: count the managedFields entries the writes would rewrite, translate or drop."""
        for ref in todo:
            if ref.stale is None:
                continue
            plan = plan_patch(ref.resource_version, ref.stale)
            self.result.objects_with_stale_managed_fields += 1
            self.result.managed_fields_rewritten += plan.rewritten
            self.result.managed_fields_dropped += plan.dropped
            self.mf_tally.add(ref.stale.changes, ref.key)
            self.mf_tally.add_last_applied(ref.stale.last_applied, ref.key)

    def note_kept(self, refs: List[ObjectRef]) -> None:
        """The entries at other versions that no write changes (untouched, kept unmappable), as listed."""
        for ref in refs:
            if ref.kept:
                self.mf_tally.add(ref.kept, ref.key)
            self.mf_tally.add_last_applied(ref.last_applied_kept, ref.key)

    def work(self, ref: ObjectRef) -> Outcome:
        """One object's write (in a worker thread); a fatal error stops the pass."""
        if self.must_stop():
            return Outcome(NOT_ATTEMPTED)
        if self.options.should_stop is not None:
            reason = self.options.should_stop()
            if reason:
                self.stop(reason)   # reported as "[CRD ...] pass stopped: <reason>" for the cluster
                return Outcome(NOT_ATTEMPTED)
        started = self.pace.acquire(self.must_stop)
        if started is None:
            return Outcome(NOT_ATTEMPTED)
        throttled_before, waited_before = _throttled(self.transport), _waited(self.transport)
        try:
            outcome = self.write(ref)
            self.mf_tally.add(outcome.mf_fixes, ref.key)
            self.mf_tally.add_last_applied(outcome.last_applied, ref.key)
        finally:
            self.pace.release(started, throttled=_throttled(self.transport) > throttled_before,
                              waited=_waited(self.transport) - waited_before)
        if self.confirming and outcome.kind == REWRITTEN and not outcome.stale_object:
            with self._live_lock:
                if len(self.result.changed_objects) < MAX_CHANGED_KEYS:
                    self.result.changed_objects.append(ref.key)
        if outcome.error is not None and isinstance(outcome.error, FATAL_ERRORS):
            self.stop(str(outcome.error), outcome.error.kind)
        self.count_live()
        return outcome

    def write(self, ref: ObjectRef) -> Outcome:
        try:
            if self.confirming:
                return confirm_object(self.transport, self.crd, ref, self.mf_policy)
            return restore_object(self.transport, self.crd, ref)
        except CrdOpsError as exc:  # connection failure past the deadline
            return Outcome(FAILED, exc.with_context(crd=self.crd.name, obj=ref.key), stale_object=ref.stale is not None)
        except Exception as exc:  # e.g. an exec credential plugin failing on token refresh: stop like our errors
            err = unexpected(exc, "re-store write", cluster=self.transport.cluster_label, crd=self.crd.name,
                             obj=ref.key)
            return Outcome(FAILED, err, stale_object=ref.stale is not None)

    def count_live(self) -> None:
        """One more write answered; report progress from this worker when a second has passed since the last."""
        with self._live_lock:
            self._live_done += 1
            now = time.monotonic()
            due = self.progress is not None and now - self._live_reported >= 1.0
            if due:
                self._live_reported = now
        if due:
            self.report_progress()

    # -- accounting ---------------------------------------------------------------------------------------------
    def drain_all(self) -> None:
        while self.inflight:
            self.drain(self.inflight.popleft())

    def drain(self, page: _Page) -> None:
        """Wait for a page's writes, count them, then advance the checkpoint and report progress."""
        page_failed = False
        for fut in page.futures:
            if self.tally(fut.result()):
                page_failed = True
        self.result.skipped_by_checkpoint += page.skipped
        self.result.already_current += page.current
        self.covered += page.covered
        self.result.pages += 1
        if page_failed:
            self.clean = False
        self.advance_checkpoint(page)
        self.report_progress()

    def tally(self, outcome: Outcome) -> bool:
        """Count one object's outcome; True when it leaves its page unclean (failed or not attempted)."""
        r = self.result
        if outcome.stale_object and outcome.kind != NOT_ATTEMPTED:
            r.objects_with_stale_managed_fields += 1
        r.managed_fields_rewritten += outcome.mf_rewritten
        r.managed_fields_dropped += outcome.mf_dropped
        if self.confirming and outcome.stale_object and outcome.kind in (REWRITTEN, UNCHANGED):
            r.excluded += 1  # its managedFields were fixed by this write: a change that says nothing of the storage
            return False
        if outcome.kind in (REWRITTEN, UNCHANGED, GONE):
            setattr(r, outcome.kind, getattr(r, outcome.kind) + 1)
            return False
        if outcome.kind == NOT_ATTEMPTED:
            r.not_attempted += 1
            return True
        r.failed += 1
        err = outcome.error
        if len(r.first_failures) < MAX_REPORTED_FAILURES and err is not None:
            ns, _sep, name = (err.obj or "").rpartition("/")
            r.first_failures.append({"namespace": ns or None, "name": name, "status": err.status,
                                     "reason": err.reason, "kind": err.kind, "message": err.api_message or err.message,
                                     "error": str(err)})
        if self.options.max_failures is not None and r.failed > self.options.max_failures:
            self.stop("more than max_failures=%d objects failed" % self.options.max_failures, "max_failures")
        return True

    def advance_checkpoint(self, page: _Page) -> None:
        """Move the resume point past a page once every page so far is failure-free (never past a failure)."""
        if not self.clean or self.options.check_mode or not page.last_key:
            return
        if self.clean_through is not None and page.last_key <= self.clean_through:
            return
        self.clean_through = page.last_key
        self.pages_since_ckpt += 1
        if not self.options.use_checkpoint or self.mf_only or self.pages_since_ckpt < self.options.checkpoint_every:
            return
        self.pages_since_ckpt = 0
        try:
            write_checkpoint(self.transport, self.crd.name, Checkpoint(
                self.crd.storage_version or "", self.crd.generation, self.clean_through, self.started_at,
                self.pass_counts(self.drained_listings()), crd_uid=self.crd.uid))
        except CrdOpsError as exc:
            # A checkpoint is an optimisation; losing one costs re-work, not safety.
            self.result.checkpoint_note = "checkpoint write failed: %s" % exc

    def drained_listings(self) -> int:
        """Listings whose page has been counted (every page so far when called from ``drain``)."""
        r = self.result
        return (r.rewritten + r.unchanged + r.gone + r.failed + r.not_attempted + r.skipped_by_checkpoint
                + r.already_current)

    def pass_counts(self, listed: int) -> Dict[str, int]:
        """The whole pass's counts: this run's plus those carried by the checkpoint. Objects this run listed at or
        before the resume point are in the carried counts already (written by an earlier run), so they are taken
        out of this run's ``listed`` and ``skipped_by_checkpoint``; each listing is still counted exactly once in
        ``listed`` and once in rewritten/unchanged/gone/skipped_by_checkpoint, so the record identity holds."""
        r = self.result
        mine = {"listed": listed - self.covered, "rewritten": r.rewritten, "unchanged": r.unchanged, "gone": r.gone,
                "skipped_by_checkpoint": r.skipped_by_checkpoint - self.covered,
                "already_current": r.already_current,
                "managed_fields_rewritten": r.managed_fields_rewritten,
                "managed_fields_dropped": r.managed_fields_dropped,
                "objects_with_stale_managed_fields": r.objects_with_stale_managed_fields}
        carried = r.carried or {}
        return dict((k, mine[k] + int(carried.get(k, 0))) for k in CARRIED_COUNTS)

    def done(self) -> int:
        r = self.result
        return r.rewritten + r.unchanged + r.gone + r.failed + r.already_current

    def report_progress(self) -> None:
        if self.progress is None:
            return
        r = self.result
        elapsed = max(self.clock() - self._start, 1e-9)
        self.progress({"crd": self.crd.name, "pages": r.pages, "listed": self.stats.listed, "done": self.done(),
                       "answered": self._live_done,  # writes answered, page not yet counted (see count_live)
                       "rewritten": r.rewritten, "unchanged": r.unchanged, "gone": r.gone, "failed": r.failed,
                       "skipped_by_checkpoint": r.skipped_by_checkpoint, "already_current": r.already_current,
                       "managed_fields_rewritten": r.managed_fields_rewritten,
                       "managed_fields_dropped": r.managed_fields_dropped,
                       "objects_with_stale_managed_fields": r.objects_with_stale_managed_fields,
                       "managed_fields_only": self.mf_only, "confirming": self.confirming,
                       "objects_per_s": round(self.done() / elapsed, 1), "check_mode": self.options.check_mode,
                       "pace": self.pace.snapshot()})

    def finish(self) -> None:
        """Copy the listing's counters and the timing into the result; decide completeness."""
        r = self.result
        r.listed = self.stats.listed
        r.relists = self.stats.relists
        r.expired_continues = self.stats.resumed_inconsistent
        r.throttled = _throttled(self.transport) - self._throttled_before
        r.duration_s = self.clock() - self._start
        r.objects_per_s = self.done() / r.duration_s if r.duration_s > 0 else 0.0
        if self.abort_reasons:
            r.aborted_reason = self.abort_reasons[0]
            r.aborted_kind = self.abort_kind or "stopped"
        r.complete = not self.abort.is_set()
        r.pace = self.pace.snapshot()
        r.managed_fields_report = self.mf_tally.to_result()

    def write_record(self) -> None:
        """After a complete pass with zero failures, write the record that authorises a trim."""
        r = self.result
        if not (r.complete and r.failed == 0 and not self.options.check_mode and self.options.write_record
                and not self.mf_only and not self.confirming):
            return
        proof_kind = PROOF_NONE
        if self.prove is not None:  # more than "every write returned" (record_proof.py); without it no record
            proof = self.prove(r)
            r.proof = proof.to_dict()
            if not proof.ok:
                r.record_error = proof.reason
                return
            proof_kind = proof.kind
        # a resumed pass records the whole pass (earlier runs' counts carried by the checkpoint), not only this run
        record = MigrationRecord(storage_version=self.crd.storage_version or "", generation=self.crd.generation,
                                 started_at=self.started_at, completed_at=self.now(), failed=0, proof=proof_kind,
                                 crd_uid=self.crd.uid, barrier_mode=self.barrier_mode, **self.pass_counts(r.listed))
        try:
            write_record(self.transport, self.crd, record)
            r.record = record.to_dict()
            r.record_written = True
        except CrdOpsError as exc:
            r.record_error = str(exc)


RunPolicy = Tuple[ManagedFieldsPolicy, Optional[MappingSource]]


def run_policy(transport: Transport, crd: Crd, options: RestoreOptions) -> RunPolicy:
    """The one managedFields policy of a run over ``crd``: every pass and every re-read classify entries with it."""
    return managed_fields_policy(transport, crd, options.removed_versions, options.keep_declared,
                                 parse_time(options.keep_written_since))


def _prepare(transport: Transport, crd: Crd, options: RestoreOptions) -> None:
    options.validate()
    check_migratable(crd, transport.cluster_label)
    check_removed_versions(crd, options.removed_versions, transport.cluster_label)


def migrate_crd(
    transport: Transport,
    crd: Crd,
    options: RestoreOptions,
    *,
    probe: Optional[ProbeFn] = None,
    progress: Optional[ProgressFn] = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], str] = utc_now,
    stop_check: Optional[StopCheck] = None,
    stop: Optional[StopSignal] = None,
    barrier_revision: Optional[int] = None,
    pace: Optional[PaceGate] = None,
    prove: Optional[Callable[[CrdResult], Proof]] = None,
    policy: Optional[RunPolicy] = None,
    barrier_mode: str = "",
) -> CrdResult:
    """Run one complete re-store pass over ``crd`` (as read when the pass starts) and, when it is
    complete with zero failures, write the migration record. Never raises for per-object errors;
    fatal errors (conversion webhook, auth, connection past the retry deadline) end the pass with
    ``aborted_reason`` set. Bad input raises before anything is written. ``barrier_revision``: the etcd revision
    read when the HA barrier passed; objects written after it are counted ``already_current`` (freshness.py).
    ``pace``: the gate of the writes (default: a fresh one from ``options``; migration_run.py passes one that
    starts from what the cluster's previous pass learned). ``policy``: the run's managedFields policy, shared with
    the confirming passes (run_policy)."""
    _prepare(transport, crd, options)
    mf_policy, mappings = policy or run_policy(transport, crd, options)
    result = RestorePass(transport, crd, options, probe=probe, progress=progress, clock=clock, now=now,
                         stop_check=stop_check, stop=stop, barrier_revision=barrier_revision, pace=pace,
                         mf_policy=mf_policy, prove=prove, barrier_mode=barrier_mode).run()
    result.field_mappings = mappings.summaries() if mappings is not None else []
    return result


def fix_managed_fields(
    transport: Transport,
    crd: Crd,
    options: RestoreOptions,
    *,
    probe: Optional[ProbeFn] = None,
    progress: Optional[ProgressFn] = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], str] = utc_now,
    stop_check: Optional[StopCheck] = None,
    stop: Optional[StopSignal] = None,
    pace: Optional[PaceGate] = None,
) -> CrdResult:
    """A managedFields-only pass for a CRD whose re-store is already done: list every object (metadata only)
    and write only those carrying managedFields entries at a version other than the storage version.
    No checkpoint, no record; ``complete`` and the counts say what was done (in check mode, what would be)."""
    _prepare(transport, crd, options)
    opts = replace(options, use_checkpoint=False, write_record=False)
    policy, mappings = run_policy(transport, crd, options)
    result = RestorePass(transport, crd, opts, probe=probe, progress=progress, clock=clock, now=now,
                         managed_fields_only=True, stop_check=stop_check, stop=stop, pace=pace,
                         mf_policy=policy).run()
    result.field_mappings = mappings.summaries() if mappings is not None else []
    return result


def _throttled(transport: Transport) -> int:
    stats = getattr(transport, "stats", None)
    if stats is None:
        return 0
    try:
        return int(stats.snapshot().get("throttled", 0))
    except Exception:  # pragma: no cover - foreign transport
        return 0


def _waited(transport: Transport) -> float:
    """Seconds this thread has waited inside the transport (max_qps bucket, retry sleeps); 0 for other transports."""
    waited = getattr(transport, "waited", None)
    return float(waited()) if callable(waited) else 0.0

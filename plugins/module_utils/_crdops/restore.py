# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The re-store pass: a no-op write (empty JSON merge patch) of every object at the storage version.

An object whose stored bytes already match the storage encoding is not written by the apiserver
and keeps its resourceVersion, so comparing the returned resourceVersion with the listed one
counts rewritten vs unchanged exactly. Object content is never sent.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from .crd import Crd
from .errors import (
    ConnectionFailed,
    ConversionWebhookError,
    CrdOpsError,
    PermissionDenied,
)
from .listing import ListStats, ObjectRef, list_pages
from .preflight import predict_rejections
from .record import (
    Checkpoint,
    MigrationRecord,
    read_checkpoint,
    utc_now,
    write_checkpoint,
    write_record,
)
from .transport import ACCEPT_PARTIAL, JSON, MERGE_PATCH, Transport, error_from_response

FATAL_ERRORS = (ConversionWebhookError, ConnectionFailed, PermissionDenied)
MAX_REPORTED_FAILURES = 20

ProbeFn = Callable[[Crd, List[ObjectRef]], None]
ProgressFn = Callable[[Dict[str, Any]], None]


@dataclass(frozen=True)
class RestoreOptions(object):
    page_size: int = 500
    workers: int = 8
    max_failures: Optional[int] = None  # abort once failed > max_failures; None = never
    check_mode: bool = False
    write_record: bool = True
    use_checkpoint: bool = True
    checkpoint_every: int = 1  # pages
    probe_conversion: bool = True  # probe webhook conversion before each page
    preflight_sample: int = 5  # check mode: dry-run the no-op write on this many objects

    def validate(self) -> None:
        from .errors import BadInputError

        if self.page_size <= 0:
            raise BadInputError("page_size must be > 0, got %r" % self.page_size)
        if self.workers <= 0:
            raise BadInputError("workers must be > 0, got %r" % self.workers)
        if self.max_failures is not None and self.max_failures < 0:
            raise BadInputError("max_failures must be >= 0, got %r" % self.max_failures)
        if self.checkpoint_every <= 0:
            raise BadInputError("checkpoint_every must be > 0, got %r" % self.checkpoint_every)


@dataclass
class CrdResult(object):
    crd: str
    storage_version: Optional[str]
    stored_versions: List[str]
    listed: int = 0
    rewritten: int = 0
    unchanged: int = 0
    gone: int = 0
    failed: int = 0
    skipped_by_checkpoint: int = 0
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
    check_mode: bool = False
    resumed_from: Optional[str] = None
    checkpoint_note: Optional[str] = None
    record: Optional[Dict[str, Any]] = None
    record_written: bool = False
    record_error: Optional[str] = None
    predicted_rejections: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.complete and self.failed == 0 and self.record_error is None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.crd, "storage_version": self.storage_version,
            "stored_versions": list(self.stored_versions), "listed": self.listed,
            "rewritten": self.rewritten, "unchanged": self.unchanged, "gone": self.gone,
            "failed": self.failed, "skipped_by_checkpoint": self.skipped_by_checkpoint,
            "not_attempted": self.not_attempted, "throttled": self.throttled, "relists": self.relists,
            "expired_continues": self.expired_continues,
            "pages": self.pages, "first_failures": list(self.first_failures),
            "duration_s": round(self.duration_s, 3), "objects_per_s": round(self.objects_per_s, 1),
            "complete": self.complete, "aborted_reason": self.aborted_reason,
            "check_mode": self.check_mode, "resumed_from": self.resumed_from,
            "checkpoint_note": self.checkpoint_note, "record": self.record,
            "record_written": self.record_written, "record_error": self.record_error,
            "predicted_rejections": list(self.predicted_rejections),
        }


# outcome kinds of one object
REWRITTEN, UNCHANGED, GONE, FAILED, NOT_ATTEMPTED = "rewritten", "unchanged", "gone", "failed", "not_attempted"


def restore_object(transport: Transport, crd: Crd, ref: ObjectRef) -> Tuple[str, Optional[CrdOpsError]]:
    """Send ``{}`` as a JSON merge patch to the object at the storage version."""
    path = crd.resource_path(namespace=ref.namespace or None, name=ref.name)
    resp = transport.request("PATCH", path, body=b"{}", content_type=MERGE_PATCH, accept=ACCEPT_PARTIAL)
    if resp.ok:
        rv = str(((resp.json() or {}).get("metadata") or {}).get("resourceVersion") or "")
        return (UNCHANGED if rv == ref.resource_version else REWRITTEN), None
    if resp.status == 404:
        return GONE, None
    return FAILED, error_from_response(resp, "re-store (empty merge patch)", cluster=transport.cluster_label,
                                       crd=crd.name, obj=ref.key)


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


class _Page(object):
    __slots__ = ("refs", "futures", "last_key", "skipped")

    def __init__(self, refs: List[ObjectRef], futures: List["Future[Tuple[str, Optional[CrdOpsError]]]"],
                 last_key: str, skipped: int) -> None:
        self.refs = refs
        self.futures = futures
        self.last_key = last_key
        self.skipped = skipped


def check_migratable(crd: Crd, cluster: Optional[str] = None) -> None:
    """Refuse, before anything is written, a CRD whose objects cannot be re-stored."""
    from .errors import BadInputError

    if not crd.storage_version:
        raise BadInputError("CRD has no storage version", cluster=cluster, crd=crd.name)
    if crd.storage_version not in crd.served_versions:
        raise BadInputError(
            "storage version %s is not served (served: %s); the no-op write goes through the storage "
            "version's endpoint, so serve it (served: true) before migrating"
            % (crd.storage_version, ", ".join(crd.served_versions) or "none"), cluster=cluster, crd=crd.name)


def migrate_crd(
    transport: Transport,
    crd: Crd,
    options: RestoreOptions,
    *,
    probe: Optional[ProbeFn] = None,
    progress: Optional[ProgressFn] = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], str] = utc_now,
) -> CrdResult:
    """Run one complete re-store pass over ``crd`` (as read when the pass starts) and, when it is
    complete with zero failures, write the migration record. Never raises for per-object errors;
    fatal errors (conversion webhook, auth, connection past the retry deadline) end the pass with
    ``aborted_reason`` set. Bad input raises before anything is written."""
    options.validate()
    check_migratable(crd, transport.cluster_label)
    start = clock()
    result = CrdResult(crd=crd.name, storage_version=crd.storage_version,
                       stored_versions=list(crd.stored_versions), check_mode=options.check_mode)
    if probe is None and options.probe_conversion:
        probe = conversion_probe(transport)
    started_at = now()
    skip_through = None  # type: Optional[str]
    if options.use_checkpoint:
        ckpt, note = read_checkpoint(crd)
        result.checkpoint_note = note
        if ckpt is not None:
            skip_through = ckpt.last
            started_at = ckpt.started_at or started_at
            result.resumed_from = ckpt.last
    stats = ListStats()
    abort = threading.Event()
    abort_reason = []  # type: List[str]
    throttled_before = _throttled(transport)
    clean_through = skip_through  # last key of the last page with no failures, in order
    clean = True  # no failure so far: the checkpoint may advance
    pages_since_ckpt = 0

    def work(ref: ObjectRef) -> Tuple[str, Optional[CrdOpsError]]:
        if abort.is_set():
            return NOT_ATTEMPTED, None
        try:
            outcome, err = restore_object(transport, crd, ref)
        except CrdOpsError as exc:  # connection failure past the deadline
            outcome, err = FAILED, exc.with_context(crd=crd.name, obj=ref.key)
        if err is not None and isinstance(err, FATAL_ERRORS):
            if not abort.is_set():
                abort_reason.append(str(err))
                abort.set()
        return outcome, err

    def drain(page: _Page) -> None:
        nonlocal clean, clean_through, pages_since_ckpt
        page_failed = False
        for fut in page.futures:
            outcome, err = fut.result()
            if outcome == REWRITTEN:
                result.rewritten += 1
            elif outcome == UNCHANGED:
                result.unchanged += 1
            elif outcome == GONE:
                result.gone += 1
            elif outcome == NOT_ATTEMPTED:
                result.not_attempted += 1
                page_failed = True
            else:
                result.failed += 1
                page_failed = True
                if len(result.first_failures) < MAX_REPORTED_FAILURES and err is not None:
                    ns, _sep, name = (err.obj or "").rpartition("/")
                    result.first_failures.append({
                        "namespace": ns or None, "name": name, "status": err.status,
                        "reason": err.reason, "kind": err.kind, "message": err.api_message or err.message,
                    })
                if (options.max_failures is not None and result.failed > options.max_failures
                        and not abort.is_set()):
                    abort_reason.append("more than max_failures=%d objects failed" % options.max_failures)
                    abort.set()
        result.skipped_by_checkpoint += page.skipped
        result.pages += 1
        if page_failed:
            clean = False
        if clean and not options.check_mode and page.futures and (
                clean_through is None or page.last_key > clean_through):
            clean_through = page.last_key
            pages_since_ckpt += 1
            if options.use_checkpoint and pages_since_ckpt >= options.checkpoint_every:
                pages_since_ckpt = 0
                try:
                    write_checkpoint(transport, crd.name, Checkpoint(
                        crd.storage_version or "", crd.generation, clean_through, started_at))
                except CrdOpsError as exc:
                    # A checkpoint is an optimisation; losing one costs re-work, not safety.
                    result.checkpoint_note = "checkpoint write failed: %s" % exc
        if progress is not None:
            elapsed = max(clock() - start, 1e-9)
            done = result.rewritten + result.unchanged + result.gone + result.failed
            progress({"crd": crd.name, "pages": result.pages, "listed": stats.listed, "done": done,
                      "rewritten": result.rewritten, "unchanged": result.unchanged, "gone": result.gone,
                      "failed": result.failed, "skipped_by_checkpoint": result.skipped_by_checkpoint,
                      "objects_per_s": round(done / elapsed, 1), "check_mode": options.check_mode})

    inflight: Deque[_Page] = deque()
    relists_seen = 0
    executor = ThreadPoolExecutor(max_workers=options.workers, thread_name_prefix="crdops-restore")
    try:
        try:
            for refs in list_pages(transport, crd, options.page_size, stats=stats):
                if abort.is_set():
                    break
                if stats.relists != relists_seen:
                    # the list restarted: finish in-flight pages first so that what they did is skipped
                    relists_seen = stats.relists
                    while inflight:
                        drain(inflight.popleft())
                if probe is not None:
                    probe(crd, refs)
                # skip what a previous run (checkpoint) or this run (before a relist) did cleanly
                skip_key = clean_through
                if skip_key is not None:
                    todo = [r for r in refs if r.key > skip_key]
                else:
                    todo = refs
                skipped = len(refs) - len(todo)
                if options.check_mode:
                    futures = []  # type: List[Future[Tuple[str, Optional[CrdOpsError]]]]
                    if result.pages == 0 and not inflight and options.preflight_sample > 0:
                        result.predicted_rejections = predict_rejections(transport, crd, todo,
                                                                         options.preflight_sample)
                else:
                    futures = [executor.submit(work, r) for r in todo]
                inflight.append(_Page(todo, futures, refs[-1].key, skipped))
                # keep at most two pages in flight: page N is patched while page N+1 is listed
                while len(inflight) > 1:
                    drain(inflight.popleft())
        except CrdOpsError as exc:
            # listing/probe failure (conversion webhook, 403, connection): stop the pass
            abort_reason.append(str(exc.with_context(cluster=transport.cluster_label, crd=crd.name)))
            abort.set()
        while inflight:
            drain(inflight.popleft())
    finally:
        executor.shutdown(wait=True)

    result.listed = stats.listed
    result.relists = stats.relists
    result.expired_continues = stats.resumed_inconsistent
    result.throttled = _throttled(transport) - throttled_before
    result.duration_s = clock() - start
    done = result.rewritten + result.unchanged + result.gone + result.failed
    result.objects_per_s = done / result.duration_s if result.duration_s > 0 else 0.0
    if abort_reason:
        result.aborted_reason = abort_reason[0]
    result.complete = not abort.is_set()

    if (result.complete and result.failed == 0 and not options.check_mode and options.write_record):
        record = MigrationRecord(
            storage_version=crd.storage_version or "", generation=crd.generation, started_at=started_at,
            completed_at=now(), listed=result.listed + 0, rewritten=result.rewritten,
            unchanged=result.unchanged, gone=result.gone, failed=0)
        try:
            write_record(transport, crd, record)
            result.record = record.to_dict()
            result.record_written = True
        except CrdOpsError as exc:
            result.record_error = str(exc)
    return result


def _throttled(transport: Transport) -> int:
    stats = getattr(transport, "stats", None)
    if stats is None:
        return 0
    try:
        return int(stats.snapshot().get("throttled", 0))
    except Exception:  # pragma: no cover - foreign transport
        return 0

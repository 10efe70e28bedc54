# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Drain before the proof: no write that counts towards a record starts while a request begun before the storage
flip may still commit with the old storage (DESIGN invariant 12).

kube-apiserver's customresource_handler gives every request the storage of the CRD as it was when the request
began, for the request's whole life (retries of its update included). When the CRD changes, the old storage is
torn down only once such requests have drained, bounded by the request timeout (``--request-timeout``, 60 s by
default). A slow admission webhook can hold an UPDATE that long; its commit after our no-op write, or after the
revision of the skip rule (freshness.py), puts old-version bytes back behind a complete pass.

No API says when an apiserver swapped its storage, so the window is counted from the later of
- when the CRD's last spec change committed, at its latest: the latest ``time`` of a managedFields entry that owns
  ``f:spec``, plus one second (whole-second stamps), plus ADMISSION_MARGIN_S, because the apiserver stamps that time
  before the write's own admission and etcd commit; no later than the start of this run's barrier when the CRD's
  generation is still the one the barrier ran for (the flip had committed before that CRD was read). The stamp is on
  the clock of whichever apiserver took the write, the ``Date`` we compare it with may come from another: each is
  turned into our clock with the lowest offset (``Date`` minus our clock) seen from any apiserver, the barrier's
  members included, so that a stamp is never taken as older than it is; when the barrier could not reach every
  apiserver (``settle-fallback``) SKEW_ALLOWANCE_S more is allowed for clocks it never saw;
- the HA barrier round in which the last lagging apiserver first reported the new storage version, a lag seen by an
  earlier run included (lag_note.py): then the round this run first saw every member current.
A flip older than the window and the margin costs nothing: the common case of a release applied days ago.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .server_clock import parse_time, server_now
from .barrier import BarrierResult
from ..kube.crd import crd_path
from ..kube.errors import BadInputError, OutcomeError
from ..kube.stop import StopSignal
from ..kube.transport import JSON, Transport, error_from_response

# the apiserver's default request timeout (60 s) and a margin for an informer that swaps the storage a little
# after discovery shows the new version (kubernetes#130235)
DEFAULT_WINDOW_S = 65.0
CLOCK_GRAIN_S = 1.0  # managedFields times and the Date header are whole seconds
# a CRD write is stamped before its admission and etcd commit: 10 s is an admission webhook's default timeoutSeconds,
# so a flip held by one such webhook (on CRDs: policy engines) commits within it. A longer hold stays covered when
# this run's barrier started later than the margin (its start bounds the commit), which is the role's case
ADMISSION_MARGIN_S = 10.0
# when not every apiserver's clock was read (barrier mode settle-fallback): NTP keeps control plane clocks far closer
SKEW_ALLOWANCE_S = 5.0


def spec_changed_at(crd_obj: Dict[str, Any]) -> Optional[float]:
    """Epoch seconds (apiserver clock) of the latest managedFields entry owning ``f:spec``; None when none does."""
    latest: Optional[float] = None
    for entry in ((crd_obj.get("metadata") or {}).get("managedFields") or []):
        if not isinstance(entry, dict) or entry.get("subresource"):
            continue
        if "f:spec" not in (entry.get("fieldsV1") or {}):
            continue
        when = parse_time(entry.get("time"))
        if when is not None and (latest is None or when > latest):
            latest = when
    return latest


@dataclass
class DrainResult:
    window_s: float
    spec_changed_at: Optional[str] = None  # the CRD's last spec change (RFC 3339, apiserver clock)
    # what the window counted from: flip | barrier | earlier lag (a lag note, lag_note.py) | unknown (no spec owner:
    # whole window) | none (drain_window 0)
    anchor: str = "flip"
    waited_s: float = 0.0
    note: Optional[str] = None
    lagged_before: List[str] = field(default_factory=list)  # members an earlier run saw lag (its lag note)
    admission_margin_s: float = 0.0  # added after the flip's stamp for its admission and commit
    clock_allowance_s: float = 0.0  # added because the stamp may come from an apiserver whose clock is behind

    def to_dict(self) -> Dict[str, Any]:
        return {"window_s": self.window_s, "spec_changed_at": self.spec_changed_at, "anchor": self.anchor,
                "waited_s": round(self.waited_s, 3), "note": self.note, "lagged_before": list(self.lagged_before),
                "admission_margin_s": round(self.admission_margin_s, 3),
                "clock_allowance_s": round(self.clock_allowance_s, 3)}


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


class Drain:
    """Wait out the drain window of one CRD's flip, under its pass Lease; a stop request ends the wait at once."""

    def __init__(self, transport: Transport, window: float, *, stop: Optional[StopSignal] = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if window < 0:
            raise BadInputError("drain_window must be >= 0, got %s" % window)
        self.transport = transport
        self.window = window
        self.stop = stop
        self.clock, self.wall, self.sleep = clock, wall, sleep

    def deadline(self, crd_name: str, caught_up_at: Optional[float], result: DrainResult,
                 barrier: Optional[BarrierResult] = None) -> float:
        """The local clock time after which no request begun with the old storage can still commit."""
        resp = self.transport.request("GET", crd_path(crd_name), accept=JSON)
        if not resp.ok:
            raise error_from_response(resp, "GET CRD (drain window)", cluster=self.transport.cluster_label,
                                      crd=crd_name)
        local, wall_now = self.clock(), self.wall()
        body = resp.json() or {}
        changed = spec_changed_at(body)
        if changed is None:
            result.anchor = "unknown"
            result.note = "no managedFields entry of the CRD owns spec: its flip time is unknown, the whole window waits"
            end = local + self.window
        else:
            result.spec_changed_at = _rfc3339(changed)
            offset = server_now(resp.header("Date"), self.wall) - wall_now
            end = self.committed_by(changed, offset, int((body.get("metadata") or {}).get("generation") or 0),
                                    barrier, result, local - wall_now) + self.window
        if caught_up_at is not None and caught_up_at + self.window > end:
            result.anchor = "earlier lag" if barrier is not None and not barrier.lagged else "barrier"
            end = caught_up_at + self.window
        return end

    def committed_by(self, changed: float, offset: float, generation: int, barrier: Optional[BarrierResult],
                     result: DrainResult, to_local: float) -> float:
        """The local clock time by which the spec change stamped ``changed`` (apiserver clock) had committed.

        ``offset`` is the drain read's ``Date`` minus our wall clock; ``to_local`` turns our wall clock into the
        local (monotonic) one."""
        lowest, skew = offset, 0.0
        if barrier is not None:
            lowest = min([offset] + list(barrier.clock_offsets.values()))
            skew = 0.0 if barrier.mode in ("endpoints", "single") else SKEW_ALLOWANCE_S
        result.clock_allowance_s = offset - lowest + skew
        stamped = changed + CLOCK_GRAIN_S - (lowest - skew) + to_local  # at its latest, on the local clock
        committed = stamped + ADMISSION_MARGIN_S
        started = barrier.started_at if barrier is not None else None
        if started is not None and barrier is not None and barrier.generation == generation and started < committed:
            committed = started  # this generation was read before the barrier: its spec had committed by then
        result.admission_margin_s = max(0.0, committed - stamped)
        return committed

    def wait(self, crd_name: str, caught_up_at: Optional[float] = None,
             on_start: Optional[Callable[[float], None]] = None,
             stop_check: Optional[Callable[[], Optional[str]]] = None,
             barrier: Optional[BarrierResult] = None) -> DrainResult:
        """Wait until the window has passed (nothing when it has already). ``on_start(seconds)`` is called before a
        wait (the pass Lease announces it to a second run); ``stop_check`` ends it (the Lease was lost). ``barrier``:
        this pass's barrier (its catch-up round, start, generation and the clocks it read)."""
        result = DrainResult(window_s=self.window)
        if barrier is not None:
            caught_up_at = barrier.caught_up_at if caught_up_at is None else caught_up_at
            result.lagged_before = list(barrier.lagged_before)
        if self.window <= 0:
            result.anchor = "none"
            return result
        end = self.deadline(crd_name, caught_up_at, result, barrier)
        started = self.clock()
        left = end - started
        if left > 0:
            if on_start is not None:
                on_start(left)
            while left > 0:
                why = self.interrupted(min(left, 1.0), stop_check)
                if why:
                    raise OutcomeError("stopped", "%s: stopped while draining the old storage (%.0f s of the %.0f s "
                                       "drain window left); nothing written" % (why, end - self.clock(), self.window),
                                       crd=crd_name)
                left = end - self.clock()
        result.waited_s = self.clock() - started
        return result

    def interrupted(self, seconds: float, stop_check: Optional[Callable[[], Optional[str]]]) -> Optional[str]:
        """Wait up to ``seconds``; why the drain must end now (a stop request, a lost Lease), or None."""
        if self.stop is not None:
            if self.stop.wait(seconds) or self.stop.is_set():
                return self.stop.reason or "stopped"
        else:
            self.sleep(seconds)
        return stop_check() if stop_check is not None else None

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What other clients see while a pass writes: a light probe stands in for them.

``pace: gentle`` promises that the migration does not slow other clients down. The writes' own latency says
little of that on a small control plane, where our writes cost the apiserver CPU that other clients' GETs then
wait for while our write latency barely moves. So a probe does what a controller does: it GETs one small object
the run owns anyway (the pass Lease) every ``interval`` seconds, with the run's credentials (the same
authentication and API Priority and Fairness flow as our writes) on a connection of its own, never through our
``max_qps`` bucket.

Who sends the GETs is a :class:`Sampler`: a process of its own (probe_process.py), so that our writers holding the
interpreter do not show as the apiserver's latency; or, when that process cannot reach the apiserver the way the
run does, a thread here (``fetch``), as the summary's ``process`` says. Samples begun before the pass's own work
(from the probe's start through the barrier and the drain, where the run waits anyway: ``measure_idle``) are the
idle baseline, added to those of the run's earlier passes; ``multiple()`` is the p90 of the last ``window_s``
seconds over the baseline's reference (its p90, capped by its p50: probe_baseline.py), which the limiter holds
within the latency budget (pace.py). ``tail_multiple()`` is the p99 of the samples since the limiter last changed its
pace for the tail (at most ``TAIL_SPAN_S`` back, at least MIN_TAIL_SAMPLES of them) over the idle p99: held below the same
budget (at its aim, tail_model.py) once both sides have enough samples to estimate a p99. Both multiples are a typical client's, whose own time
on each answer (CLIENT_OWN_S) a pass does not lengthen: ``client_multiple`` adds it to both sides.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Protocol, Tuple

from ..kube.errors import CrdOpsError
from .probe_baseline import (
    BASELINE_NONE, BASELINE_NOISY, BASELINE_OK, HELD_PERCENTILE, MIN_IDLE_SAMPLES, MIN_TAIL_SAMPLES,
    NOISE_CAP, TAIL_PERCENTILE, Baseline, client_multiple, client_own_ms, latencies_dict, percentile)

DEFAULT_BUDGET = 2.0  # the probe's p90 (and p99) while we write, as a typical client's multiple of idle
DEFAULT_INTERVAL_S = 0.05  # 20 GETs a second: a busy controller's reads, light beside a pass's writes
# idle is sampled as the writes are, every ``interval``: requests 5 ms apart meet warmer caches and no wake-up, and
# a second of them misses the apiserver's rarer slow answers (a benchmark pass measured an idle p99 of 2.5 ms that
# way where an outside client asking every 50 ms for 30 s saw 4.5 ms, and the pass then held a budget twice too
# tight). At least MIN_IDLE_SAMPLES of them (probe_baseline.py), more when the barrier and the drain last longer.

# the first answers on the probe's new connection carry the TLS handshake and the apiserver's first look at the
# token: not what a client with a warm connection sees, so they are asked and not counted
WARMUP_REQUESTS = 3
# in-process only: an answer waits for the interpreter while our writers' threads decode and encode JSON, up to a
# switch interval (5 ms by default) each time. While a probe thread runs, the interpreter switches this often
SWITCH_INTERVAL_S = 0.0005
WINDOW_S = 5.0  # the sliding window the budget is held over
MIN_WINDOW_SAMPLES = 20  # the window's p90 is then at least its third largest
# the tail's samples reach back to the last cut it asked for (what came before measured a load that is gone), at
# most this far: older samples would hold a cut that no longer applies
TAIL_SPAN_S = 60.0
SEPARATE = "separate"  # the summary's ``process`` when the GETs came from a process of their own
IN_PROCESS = "in-process"

Clock = Callable[[], float]
Fetch = Callable[[], None]  # one probe request; raises on failure


class Sampler(Protocol):
    """Sends the probe's GETs somewhere else than this interpreter's threads (probe_process.py)."""

    pid: Optional[int]
    flow_schema: Optional[str]

    def start(self, probe: LatencyProbe) -> Optional[str]:
        """Start feeding ``probe`` (record, count_error, sampler_lost); None, or why it cannot."""

    def stop(self) -> None:
        ...


class LatencyProbe:
    """GETs at a steady rate from :meth:`start` to :meth:`stop`: from ``sampler`` (a process of its own) when it
    starts, else on a thread of this interpreter calling ``fetch``.

    ``baseline``: an earlier pass's idle baseline (the same cluster, moments ago): this pass's writes need not wait
    for idle samples of their own, and those it takes anyway are added to it."""

    def __init__(self, fetch: Fetch, budget: float = DEFAULT_BUDGET, *, interval: float = DEFAULT_INTERVAL_S,
                 window_s: float = WINDOW_S, clock: Clock = time.monotonic, baseline: Optional[Baseline] = None,
                 target: str = "", sampler: Optional[Sampler] = None) -> None:
        self.fetch, self.budget, self.interval, self.window_s = fetch, budget, interval, window_s
        self.clock, self.target, self.sampler = clock, target, sampler
        self.baseline = baseline
        self.carried = baseline is not None
        self.errors = 0
        self.process = IN_PROCESS
        self._frozen = False  # the baseline is final: later samples before the first write are not idle
        self._lost: Optional[str] = None  # the sampler ended before start() returned
        self._warmup_left = WARMUP_REQUESTS
        self._idle: List[float] = []
        self._during: List[float] = []
        self._window: Deque[Tuple[float, float]] = deque()
        self._tail: Deque[Tuple[float, float]] = deque()
        self._writing_since: Optional[float] = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._switch_before = sys.getswitchinterval()

    def start(self) -> LatencyProbe:
        why = self.sampler.start(self) if self.sampler is not None else None
        with self._cond:
            if self.sampler is not None and why is None and self._lost is None:
                self.process = SEPARATE
                return self
            if self.sampler is not None:
                self.process = "%s (%s)" % (IN_PROCESS, why or self._lost)
        self._start_thread()
        return self

    def _start_thread(self) -> None:
        self._switch_before = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_before, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._loop, name="crdops-latency-probe", daemon=True)
        self._thread.start()

    def sampler_lost(self, why: str) -> None:
        """The sampler's process ended mid-run: the probe goes on in-process, and says so."""
        with self._cond:
            if self.process != SEPARATE:
                self._lost = why  # start() has not returned yet: it falls back itself
                return
            self.process = "%s (%s)" % (IN_PROCESS, why)
            if self._stop.is_set():
                return
        self._start_thread()

    def stop(self) -> None:
        self._stop.set()
        if self.sampler is not None:
            self.sampler.stop()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval))
            sys.setswitchinterval(self._switch_before)

    def _loop(self) -> None:
        next_at = self.clock()
        while not self._stop.is_set():
            self.sample_once()
            interval = self.interval
            next_at += interval
            self._stop.wait(max(0.0, next_at - self.clock()))
            next_at = max(next_at, self.clock() - interval)  # after a slow answer: no burst to catch up

    def sample_once(self) -> None:
        """One probe request, timed; a failure counts as an error, not as a latency; the first WARMUP_REQUESTS
        answers count as neither."""
        started = self.clock()
        try:
            self.fetch()
        except (CrdOpsError, OSError):
            self.count_error()
            return
        if self._warmup_left > 0:
            self._warmup_left -= 1
            return
        self.record(started, self.clock() - started)

    def count_error(self) -> None:
        with self._cond:
            self.errors += 1

    def record(self, started: float, latency: float) -> None:
        with self._cond:
            if self._writing_since is None or started < self._writing_since:
                self._idle.append(latency)
            else:
                self._during.append(latency)
                self._window.append((started, latency))
                self._tail.append((started, latency))
            self._cond.notify_all()

    def _running(self) -> bool:
        return (self._thread is not None or self.process == SEPARATE) and not self._stop.is_set()

    def _wait_idle(self, give_up: Callable[[], bool], timeout: float) -> None:
        """Under the lock: wait until a baseline was carried in or MIN_IDLE_SAMPLES idle samples are in."""
        deadline = self.clock() + timeout
        while (not self._frozen and self.baseline is None and len(self._idle) < MIN_IDLE_SAMPLES and not give_up()
               and self._running() and self.clock() < deadline):
            self._cond.wait(self.interval)

    def _freeze(self) -> None:
        """Under the lock: the baseline is the idle samples so far, added to a carried one."""
        if self._frozen:
            return
        idle = list(self._idle)
        self.baseline = self.baseline.merged(idle) if self.baseline is not None else Baseline.of(idle)
        self._frozen = True

    def measure_idle(self, give_up: Callable[[], bool], timeout: float = 10.0) -> LatencyProbe:
        """The idle ends: called when the pass starts its own work (its LISTs and dry-runs load the apiserver), after
        the barrier and the drain, where the probe sampled all along. Waits (at most ``timeout``) only for what is
        still missing of MIN_IDLE_SAMPLES unless a baseline was carried in, then freezes the baseline."""
        with self._cond:
            self._wait_idle(give_up, timeout)
            if self.baseline is not None or len(self._idle) >= MIN_IDLE_SAMPLES:
                self._freeze()
        return self

    def writes_begin(self, give_up: Callable[[], bool], timeout: float = 10.0) -> None:
        """Called before the first write: the baseline as :meth:`measure_idle` leaves it (whatever there is after
        ``timeout``). Samples of requests begun from now on count as "during"."""
        with self._cond:
            if self._writing_since is not None:
                return
            self._wait_idle(give_up, timeout)
            self._freeze()
            self._writing_since = self.clock()

    def multiple(self) -> Optional[float]:
        """The last ``window_s`` seconds' p90 over the idle reference; None without a usable baseline or enough
        samples."""
        with self._cond:
            if self.baseline is None or not self.baseline.usable:
                return None
            return _recent_multiple(self._window, self.clock() - self.window_s, MIN_WINDOW_SAMPLES, HELD_PERCENTILE,
                                    self.baseline.reference)

    def tail_multiple(self) -> Optional[float]:
        """The p99 of the samples since :meth:`restart_tail` (at most TAIL_SPAN_S back) over the idle p99; None
        until both have MIN_TAIL_SAMPLES samples."""
        with self._cond:
            reference = self.baseline.tail_reference if self.baseline is not None else None
            if reference is None:
                return None
            return _recent_multiple(self._tail, self.clock() - TAIL_SPAN_S, MIN_TAIL_SAMPLES, TAIL_PERCENTILE,
                                    reference)

    def tail_measurable(self) -> bool:
        """Whether the idle had enough samples for a p99 reference: only then can the tail speak for a pace."""
        with self._cond:
            return self.baseline is not None and self.baseline.tail_reference is not None

    def restart_tail(self) -> None:
        """The limiter changed its pace for the tail: it is measured afresh, at the new pace."""
        with self._cond:
            self._tail.clear()

    def summary(self) -> Dict[str, Any]:
        """What other clients saw: idle and during p50/p90/p99, the multiple and whether the budget held, and where
        the GETs came from."""
        with self._cond:
            base, during, process = self.baseline, list(self._during), self.process
        usable = base is not None and base.usable
        sampler = self.sampler if process == SEPARATE else None  # whose GETs these were
        out: Dict[str, Any] = {
            "target": self.target, "budget": self.budget, "interval_s": self.interval, "percentile": HELD_PERCENTILE,
            "baseline": base.status if base is not None else BASELINE_NONE, "baseline_carried": self.carried,
            "idle": base.to_dict() if base is not None else None,
            "reference_ms": _ms(base.reference) if base is not None and usable else None,
            "client_own_ms": client_own_ms(),
            "during": latencies_dict(during), "errors": self.errors, "multiple": None, "held": None,
            "process": process, "pid": sampler.pid if sampler is not None else os.getpid(),
            "flow_schema": sampler.flow_schema if sampler is not None else None}
        if usable and during and base is not None:
            multiple = client_multiple(percentile(during, HELD_PERCENTILE), base.reference)
            out.update(multiple=round(multiple, 2), held=multiple <= self.budget)
        out.update(self._tail_summary(base, during))
        return out

    def _tail_summary(self, base: Optional[Baseline], during: List[float]) -> Dict[str, Any]:
        """The p99 part of the summary: held only where both sides had enough samples to estimate it."""
        reference = base.tail_reference if base is not None else None
        out: Dict[str, Any] = {"tail_percentile": TAIL_PERCENTILE, "tail_reference_ms": None, "tail_multiple": None,
                               "tail_held": None}
        if reference is None:
            return out
        out["tail_reference_ms"] = _ms(reference)
        if len(during) >= MIN_TAIL_SAMPLES:
            multiple = client_multiple(percentile(during, TAIL_PERCENTILE), reference)
            out.update(tail_multiple=round(multiple, 2), tail_held=multiple <= self.budget)
        return out


def _recent_multiple(samples: Deque[Tuple[float, float]], horizon: float, fewest: int, pct: float,
                     reference: float) -> Optional[float]:
    """Drops the (start, latency) samples begun before ``horizon``; the ``pct`` percentile of the rest as a multiple
    of ``reference`` (client_multiple), or None below ``fewest`` of them."""
    while samples and samples[0][0] < horizon:
        samples.popleft()
    if len(samples) < fewest:
        return None
    return client_multiple(percentile([lat for _t, lat in samples], pct), reference)


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def describe(summary: Optional[Dict[str, Any]]) -> str:
    """The probe part of a result line, e.g. ``other clients' GET p90 9.8 -> 17.1 ms (x1.62 to a client
    spending 2.0 ms of its own, budget x2.0 held)``.
    A summary from before the p90 (no ``percentile``) is told in its p99."""
    if not summary or not summary.get("idle"):
        return ""
    pct = int(summary.get("percentile") or 99)
    key, idle, during = "p%d_ms" % pct, summary["idle"], summary.get("during")
    if summary.get("baseline") not in (BASELINE_OK, BASELINE_NOISY) or (during and summary.get("multiple") is None):
        return "other clients' GET: baseline %s (idle p50 %.1f ms, p%d %.1f ms, %s samples), budget not applied" % (
            summary.get("baseline"), idle["p50_ms"], pct, idle.get(key) or 0.0, idle.get("samples"))
    reference = summary.get("reference_ms") or idle.get(key) or 0.0
    if not during:
        return "other clients' GET p%d %.1f ms idle, nothing written" % (pct, reference)
    noisy = ", noisy idle held at x%g its p50" % NOISE_CAP if summary.get("baseline") == BASELINE_NOISY else ""
    return "other clients' GET p%d %.1f -> %.1f ms (x%.2f%s, budget x%.1f %s%s)%s" % (
        pct, reference, during[key], summary["multiple"], _own_words(summary), summary["budget"],
        "held" if summary["held"] else "NOT held", noisy, _describe_tail(summary))


def _own_words(summary: Dict[str, Any]) -> str:
    """`` to a client spending 2.0 ms of its own``: why the multiple is not the two latencies' ratio; nothing for a
    summary from before a client's own time was added, or without it."""
    own = summary.get("client_own_ms")
    return " to a client spending %.1f ms of its own" % own if own else ""


def _describe_tail(summary: Dict[str, Any]) -> str:
    """``, p99 4.1 -> 7.9 ms (x1.93 held)`` where the tail was measured on both sides, else nothing."""
    if summary.get("tail_multiple") is None or not summary.get("during"):
        return ""
    pct = int(summary.get("tail_percentile") or TAIL_PERCENTILE)
    return ", p%d %.1f -> %.1f ms (x%.2f %s)" % (
        pct, summary["tail_reference_ms"], summary["during"]["p%d_ms" % pct], summary["tail_multiple"],
        "held" if summary["tail_held"] else "NOT held")

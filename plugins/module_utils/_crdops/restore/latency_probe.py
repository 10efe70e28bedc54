# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What other clients see while a pass writes: a light probe stands in for them.

``pace: gentle`` promises that the migration does not slow other clients down. The writes' own latency says
little of that on a small control plane, where our writes cost the apiserver CPU that other clients' GETs then
wait for while our write latency barely moves. So a probe does what a controller does: it GETs one small object
the run owns anyway (the pass Lease) every ``interval`` seconds, with the run's credentials (the same token
authentication and API Priority and Fairness flow as our writes) on a connection of its own, never through our
``max_qps`` bucket.

Its samples before the pass does anything else (``measure_idle``: nothing of ours loads the apiserver or holds the
interpreter meanwhile) are the idle baseline; ``multiple()`` is the p99 of the last ``window_s``
seconds over the idle p99, which the limiter holds within the latency budget (pace.py). A baseline is usable with
at least MIN_IDLE_SAMPLES samples and an idle p99 within NOISY_RATIO of its p50; otherwise the probe reports
"baseline noisy" and the limiter keeps its write-latency signal alone.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from ..kube.errors import CrdOpsError

DEFAULT_BUDGET = 2.0  # the probe's p99 while we write, as a multiple of its idle p99
DEFAULT_INTERVAL_S = 0.05  # 20 GETs a second: a busy controller's reads, light beside a pass's writes
# idle is sampled as the writes are, every ``interval``: requests 5 ms apart meet warmer caches and no wake-up, and
# a second of them misses the apiserver's rarer slow answers (a benchmark pass measured an idle p99 of 2.5 ms that
# way where an outside client asking every 50 ms for 30 s saw 4.5 ms, and the pass then held a budget twice too
# tight). 60 samples at 50 ms: 3 s, once per run and cluster
MIN_IDLE_SAMPLES = 60
# the first answers on the probe's new connection carry the TLS handshake and the apiserver's first look at the
# token: not what a client with a warm connection sees, so they are asked and not counted
WARMUP_REQUESTS = 3
# an answer waits for the interpreter while our writers' threads decode and encode JSON, up to a switch interval
# (5 ms by default) each time: what our own process adds, not what another client sees. While a probe runs, the
# interpreter switches threads this often instead
SWITCH_INTERVAL_S = 0.0005
NOISY_RATIO = 5.0  # an idle p99 above this many times the idle p50 is no baseline to hold anything to
WINDOW_S = 5.0  # the sliding window the budget is held over
MIN_WINDOW_SAMPLES = 20

BASELINE_OK, BASELINE_NOISY, BASELINE_NONE = "ok", "noisy", "none"

Clock = Callable[[], float]
Fetch = Callable[[], None]  # one probe request; raises on failure


def percentile(values: List[float], pct: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, int(math.ceil(pct / 100.0 * len(ordered))))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Baseline:
    """The probe's latency while we were not writing (seconds)."""
    p50: float
    p99: float
    samples: int

    @property
    def usable(self) -> bool:
        return self.samples >= MIN_IDLE_SAMPLES and self.p50 > 0 and self.p99 <= NOISY_RATIO * self.p50

    @classmethod
    def of(cls, latencies: List[float]) -> Optional[Baseline]:
        return cls(percentile(latencies, 50), percentile(latencies, 99), len(latencies)) if latencies else None

    def to_dict(self) -> Dict[str, Any]:
        return {"p50_ms": _ms(self.p50), "p99_ms": _ms(self.p99), "samples": self.samples}

    @classmethod
    def from_dict(cls, raw: Any) -> Optional[Baseline]:
        """From ``to_dict()`` output (an earlier pass of this run); None for anything else."""
        try:
            return cls(float(raw["p50_ms"]) / 1000.0, float(raw["p99_ms"]) / 1000.0, int(raw["samples"]))
        except (KeyError, TypeError, ValueError):
            return None


class LatencyProbe:
    """A GET at a steady rate on a thread of its own, from :meth:`start` to :meth:`stop`.

    ``baseline``: an earlier pass's idle baseline (the same cluster, moments ago): this pass's writes need not
    wait for idle samples of their own."""

    def __init__(self, fetch: Fetch, budget: float = DEFAULT_BUDGET, *, interval: float = DEFAULT_INTERVAL_S,
                 window_s: float = WINDOW_S, clock: Clock = time.monotonic, baseline: Optional[Baseline] = None,
                 target: str = "") -> None:
        self.fetch, self.budget, self.interval, self.window_s = fetch, budget, interval, window_s
        self.clock, self.target = clock, target
        self.baseline = baseline
        self.carried = baseline is not None
        self.errors = 0
        self._warmup_left = WARMUP_REQUESTS
        self._idle: List[float] = []
        self._during: List[float] = []
        self._window: Deque[Tuple[float, float]] = deque()
        self._writing_since: Optional[float] = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._switch_before = sys.getswitchinterval()

    def start(self) -> LatencyProbe:
        self._switch_before = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_before, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._loop, name="crdops-latency-probe", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
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
            with self._cond:
                self.errors += 1
            return
        if self._warmup_left > 0:
            self._warmup_left -= 1
            return
        self.record(started, self.clock() - started)

    def record(self, started: float, latency: float) -> None:
        with self._cond:
            if self._writing_since is None or started < self._writing_since:
                self._idle.append(latency)
            else:
                self._during.append(latency)
                self._window.append((started, latency))
            self._cond.notify_all()

    def measure_idle(self, give_up: Callable[[], bool], timeout: float = 10.0) -> LatencyProbe:
        """Wait (at most ``timeout``) for the idle baseline and freeze it, unless one was carried in. Called before
        the pass does anything else: its own LISTs and dry-runs load the apiserver, and its threads decoding pages
        hold the interpreter the probe's timer runs in, so samples taken beside them are not idle."""
        with self._cond:
            deadline = self.clock() + timeout
            while (self.baseline is None and len(self._idle) < MIN_IDLE_SAMPLES and not give_up()
                   and self._thread is not None and self.clock() < deadline):
                self._cond.wait(self.interval)
            if self.baseline is None and len(self._idle) >= MIN_IDLE_SAMPLES:
                self.baseline = Baseline.of(self._idle)
        return self

    def writes_begin(self, give_up: Callable[[], bool], timeout: float = 10.0) -> None:
        """Called before the first write: wait (at most ``timeout``) for enough idle samples unless a baseline
        was carried in, then freeze the baseline. Samples of requests begun from now on count as "during"."""
        with self._cond:
            if self._writing_since is not None:
                return
            deadline = self.clock() + timeout
            while (self.baseline is None and len(self._idle) < MIN_IDLE_SAMPLES and not give_up()
                   and self._thread is not None and self.clock() < deadline):
                self._cond.wait(self.interval)
            if self.baseline is None:
                self.baseline = Baseline.of(self._idle)
            self._writing_since = self.clock()

    def multiple(self) -> Optional[float]:
        """The last ``window_s`` seconds' p99 over the idle p99; None without a usable baseline or enough samples."""
        with self._cond:
            if self.baseline is None or not self.baseline.usable:
                return None
            horizon = self.clock() - self.window_s
            while self._window and self._window[0][0] < horizon:
                self._window.popleft()
            if len(self._window) < MIN_WINDOW_SAMPLES:
                return None
            return percentile([lat for _t, lat in self._window], 99) / self.baseline.p99

    def summary(self) -> Dict[str, Any]:
        """What other clients saw: idle and during p50/p99, the multiple and whether the budget held."""
        with self._cond:
            base, during = self.baseline, list(self._during)
        usable = base is not None and base.usable
        out: Dict[str, Any] = {
            "target": self.target, "budget": self.budget, "interval_s": self.interval,
            "baseline": BASELINE_OK if usable else (BASELINE_NOISY if base is not None else BASELINE_NONE),
            "baseline_carried": self.carried, "idle": base.to_dict() if base is not None else None,
            "during": _dict_of(Baseline.of(during)), "errors": self.errors,
            "multiple": None, "held": None}
        if usable and during and base is not None:
            multiple = percentile(during, 99) / base.p99
            out.update(multiple=round(multiple, 2), held=multiple <= self.budget)
        return out


def _dict_of(latencies: Optional[Baseline]) -> Optional[Dict[str, Any]]:
    return latencies.to_dict() if latencies is not None else None


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def describe(summary: Optional[Dict[str, Any]]) -> str:
    """The probe part of a result line, e.g. ``other clients' GET p99 9.8 -> 17.1 ms (x1.74, budget x2.0 held)``."""
    if not summary or not summary.get("idle"):
        return ""
    if summary.get("baseline") != BASELINE_OK:
        return "other clients' GET: baseline %s (idle p50 %.1f ms, p99 %.1f ms), budget not applied" % (
            summary.get("baseline"), summary["idle"]["p50_ms"], summary["idle"]["p99_ms"])
    if not summary.get("during"):
        return "other clients' GET p99 %.1f ms idle, nothing written" % summary["idle"]["p99_ms"]
    return "other clients' GET p99 %.1f -> %.1f ms (x%.2f, budget x%.1f %s)" % (
        summary["idle"]["p99_ms"], summary["during"]["p99_ms"], summary["multiple"], summary["budget"],
        "held" if summary["held"] else "NOT held")

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""How many re-store writes may be in flight, learned from the writes' own latency (``pace: gentle``).

A gradient limiter: the writes are measured in windows; each window's median latency is compared with the
idle baseline (the lowest window median of the last minute). Above ``tolerance`` times the baseline the limit
is cut in proportion to how far above it is (at most halved per window); at or below, it grows by one. A
throttled answer (429/503) halves it at once, once per window. Every ``probe_every`` seconds one window runs
with a single write in flight, so the baseline is re-measured at the lowest load this client can offer instead
of drifting up with the load it causes (BBR's ProbeRTT). docs/how-it-works.md says why this and not AIMD.

What other clients see is a signal of its own (latency_probe.py): with a probe, a window also cuts the limit when
the probe's p90 over its sliding window is above ``budget`` times its idle reference, in proportion, at most once per
``probe_cut_every`` seconds (the probe's window still holds the samples from before a cut), and the limit does not
grow while it is above; with a probe it grows at most once every ``probe_grow_every`` seconds, since a window of
writes lasts milliseconds and the probe's window needs seconds to show what a growth did (growing every window, a
pass measured other clients' p99 at x2.8 of idle with a budget of 2). The probe's p99 (its tail, over the samples
since the pace last changed for it) is held below the same budget, at its aim (tail_model.py), once it can be
estimated; a cut the tail asked for holds the limit until the tail, measured afresh, is within the aim, since a
growth two seconds later would bring back what it cut before the tail could see it. Where the tail can be estimated
it also decides every growth: one is taken only when the tail at this pace, its excess over idle scaled to the next
pace's writes in flight (with their square), stays within the tail's aim below the budget, and the next waits until
the tail is measured at the new pace; a tail over the aim is cut to where the same scaling puts it there
(tail_model.py). A p99 holds over a whole pass only if the pace spends well under 1 % of it above the budget, so a
growth must be right before it is tried (on two cores, passes that tried a second write in flight took other
clients' p99 to x4, and the cuts that followed left them at a third of the in-tree migrator's speed). Whichever
signal asks for the deeper cut wins. Only the probe cuts below one write in flight: a limit of 0.4 keeps one write
in flight 40 % of the time (after a write that took L seconds the next one starts L * (1/0.4 - 1) later), down to
``min_duty``; it grows back while the probe is within the budget, by a quarter per window, or where the tail
decides, by as much as the scaled tail allows (at most double). A tail cut is judged by the tail's first fresh
reading: where it did not fall, the tail is not this pace's doing (on two cores, the apiserver's garbage collections
stall GETs about once per 600 objects written, whatever the pace), so the cut is undone and that pace, at most one
write in flight, becomes the lowest the probe cuts to for the rest of the pass.
One write in flight all the time can still be more than a small control plane gives away quietly; the
write-latency signal cannot see that, since at one write in flight it measures its own baseline. So where the tail
can be measured, a pass that learned nothing before it starts at ``tail_start_duty`` (half the time) and lets the
tail, once measured, grow it: the first ten seconds, before the tail can cut, are otherwise spent at a pace nobody
has measured, and a short pass's p99 is made of them.

``pace: max`` measures the same way but never moves the limit from ``workers`` (the full-speed behaviour of
a maintenance window). Both modes are bounded by the transport's ``max_qps``.

A cluster's passes run one CRD after another against the same apiserver: a pass may start from what the one
before it learned (:class:`Learned`: its limit and idle baseline) instead of from one write in flight, so a
cluster with many small CRDs does not spend each of them climbing from the slowest pace. The carried baseline
ages out like any window median, and the first window still cuts the limit if this CRD's writes are slower.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from statistics import median
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from .latency_probe import LatencyProbe
from .latency_probe import describe as probe_describe
from .probe_baseline import MIN_IDLE_SAMPLES, Baseline
from . import tail_model

GENTLE = "gentle"
MAX = "max"
PACE_MODES = (GENTLE, MAX)

Clock = Callable[[], float]


@dataclass(frozen=True)
class Learned:
    """What a pass's limiter learned: the limit it ended at and the idle baseline (seconds), for the next pass."""
    limit: float
    baseline: float

    def to_dict(self) -> Dict[str, Any]:
        return {"limit": self.limit, "baseline_ms": round(self.baseline * 1000.0, 3)}

    @classmethod
    def from_dict(cls, raw: Any) -> Optional[Learned]:
        """From ``to_dict()`` output (a previous module result); None for anything else."""
        if not isinstance(raw, dict):
            return None
        try:
            limit, baseline = float(raw["limit"]), float(raw["baseline_ms"]) / 1000.0
        except (KeyError, TypeError, ValueError):
            return None
        return cls(limit, baseline) if limit > 0.0 and baseline > 0.0 else None


@dataclass(frozen=True)
class PaceSettings:
    tolerance: float = 1.5  # a window median up to this many times the baseline (plus slack) is not congestion
    slack: float = 0.0005  # seconds: below a millisecond or so, a rise is this process's own scheduling noise
    min_window: int = 8  # samples per window; a window is also at least 2 samples per permit
    baseline_age: float = 60.0  # seconds a window median stays a baseline candidate
    probe_every: float = 15.0  # seconds between windows run at one write in flight
    initial_limit: float = 1.0  # the first window is the first idle measurement
    tail_start_duty: float = 0.5  # where the tail can be measured, a fresh pass starts at this duty (see writes_begin)
    max_cut: float = 0.5  # a window never cuts the limit below this fraction
    probe_cut_every: float = 2.0  # seconds between cuts asked for by the latency probe
    probe_grow_every: float = 2.0  # with a probe, seconds between growths: it sees a change only over its window
    min_duty: float = 0.1  # the probe cuts down to one write in flight this fraction of the time, no further
    duty_growth: float = 1.25  # below one write in flight, a quiet window grows the limit by this factor


class GradientLimiter:
    """The limit and what it was learned from. Not thread-safe: :class:`PaceGate` calls it under its lock."""

    def __init__(self, max_limit: int, adaptive: bool = True, settings: PaceSettings = PaceSettings(),
                 clock: Clock = time.monotonic, start: Optional[Learned] = None,
                 probe: Optional[LatencyProbe] = None) -> None:
        self.max_limit = max(1, int(max_limit))
        self.probe = probe if adaptive else None  # pace max holds no budget
        self.probe_cuts = 0  # cuts the probe asked for (what other clients saw)
        self.tail_cuts = 0  # of those, the ones its p99 asked for
        self._last_probe_cut: Optional[float] = None
        self._last_growth: Optional[float] = None
        # the tail's multiple at the current pace, once measured; a tail cut or a growth forgets it, and the limit
        # then does not grow until the tail is measured again
        self._tail_seen: Optional[float] = None
        self.tail_refusals = 0  # growths the tail, scaled to the next pace, did not allow
        # a tail cut waits for the tail's first fresh reading: (the multiple that asked for it, the limit before it)
        self._cut_on_trial: Optional[Tuple[float, float]] = None
        self.futile_cuts = 0  # tail cuts undone because the tail, measured afresh, did not fall
        # after a futile cut, the lowest the probe cuts to for the rest of the pass: the pace it cut from (at most one
        # write in flight), since cutting below it did not lower what other clients saw
        self.cut_floor: Optional[float] = None
        self.adaptive = adaptive
        self.settings = settings
        self.clock = clock
        self.limit = float(self.max_limit) if not adaptive else min(float(self.max_limit), settings.initial_limit)
        self.min_seen = self.limit
        self.max_seen = self.limit
        self.baseline: Optional[float] = None
        self.latency: Optional[float] = None  # median of the last window
        self.backoffs = 0  # cuts of the limit (latency windows and throttled answers) that lowered it
        self.throttle_backoffs = 0  # throttled answers acted on (once per window), also at a limit of one
        self.windows = 0
        self.congested = 0  # windows over the target latency
        self.probes = 0
        self._samples: List[float] = []
        self._history: Deque[Tuple[float, float]] = deque()  # (end time, window median)
        self._cut_in_window = False
        self._probe_since: Optional[float] = None  # a probe window counts writes started after this
        self._last_probe = clock()
        self.started_from: Optional[Learned] = None
        self._begun = False
        if adaptive and start is not None:
            self._start_from(start)

    def _start_from(self, start: Learned) -> None:
        """Begin at an earlier pass's limit, its baseline remembered as a window median that ends now."""
        self.started_from = start
        self._set_limit(start.limit)
        self.min_seen = self.max_seen = self.limit
        self._history.append((self.clock(), start.baseline))
        self.baseline = start.baseline

    def writes_begin(self) -> None:
        """The first write is about to start and the probe's idle baseline is frozen. Where it can measure a tail and
        nothing earlier was learned, start below one write in flight: the tail needs ``MIN_TAIL_SAMPLES`` (ten
        seconds) before it can cut, and one write in flight all the time can alone be more than the budget on a
        small control plane, so a pass that started there spent its first ten seconds over the budget and a short
        pass's p99 is made of them. The tail, measured at this duty, then grows it (up to twice per step)."""
        if self._begun:
            return
        self._begun = True
        if self.probe is None or self.started_from is not None or not self.probe.tail_measurable():
            return
        self._set_limit(min(self.limit, self.settings.tail_start_duty), floor=self.settings.min_duty)
        self.min_seen = self.max_seen = self.limit

    def learned(self) -> Optional[Learned]:
        """The limit and baseline for the next pass; None before the first window (nothing was learned)."""
        if not self.adaptive or self.baseline is None:
            return None
        return Learned(self.limit, self.baseline)

    @property
    def duty(self) -> float:
        """The fraction of the time one write may be in flight: 1 unless the probe cut the limit below one."""
        return min(1.0, self.limit)

    @property
    def permits(self) -> int:
        """Writes allowed in flight now: the limit rounded down, one during a probe window, never below one."""
        if self._probe_since is not None:
            return 1
        return max(1, int(self.limit))

    def window_size(self) -> int:
        return max(self.settings.min_window, 2 * self.permits)

    def on_sample(self, started: float, latency: float) -> None:
        """One write answered without throttling, ``latency`` seconds after it ``started``."""
        if self._probe_since is not None and started < self._probe_since:
            return  # started at the higher limit before the probe: not an idle measurement
        self._samples.append(max(0.0, latency))
        if len(self._samples) >= self.window_size():
            self._close_window()

    def on_throttled(self) -> None:
        """A 429/503 answer: the server's own congestion signal. Halve the limit, once per window."""
        if not self.adaptive or self._cut_in_window:
            return
        self._cut_in_window = True
        if self.limit > 1.0:
            self.backoffs += 1
        self.throttle_backoffs += 1
        self._set_limit(self.limit / 2.0)

    def _close_window(self) -> None:
        now = self.clock()
        p50 = median(self._samples)
        self._samples = []
        self.windows += 1
        self.latency = p50
        self._remember(now, p50)
        if self._probe_since is not None:
            self._probe_since = None
            self._last_probe = now
        if self.adaptive and not self._cut_in_window:
            self._adjust(p50)
        self._cut_in_window = False
        if self.adaptive and now - self._last_probe >= self.settings.probe_every:
            self._probe_since = now
            self.probes += 1

    def _remember(self, now: float, p50: float) -> None:
        """Keep the window medians of the last ``baseline_age`` seconds (always the latest); baseline = lowest."""
        self._history.append((now, p50))
        while len(self._history) > 1 and now - self._history[0][0] > self.settings.baseline_age:
            self._history.popleft()
        self.baseline = min(m for _t, m in self._history)

    def _adjust(self, p50: float) -> None:
        target = (self.baseline or 0.0) * self.settings.tolerance + self.settings.slack
        factors = [target / p50] if p50 > target else []
        before = self.limit
        over, tail_over = self._probe_over_budget(*self._read_probe())
        floor = min(1.0, self.limit)  # the write latency never cuts below one write in flight
        probe_floor = min(self.limit, max(self.settings.min_duty, self.cut_floor or 0.0))
        # at its floor the probe has nothing left to cut: not a cut, and the tail goes on being measured at this pace
        if over is not None and self._probe_may_cut() and self.limit > probe_floor:
            factors.append(over)
            self._probe_cut(tail_over, before)
            floor = probe_floor
        if factors:
            self.congested += 1
            if self.limit > floor:  # at the floor there is nothing left to cut
                self.backoffs += 1
            self._set_limit(self.limit * max(self.settings.max_cut, min(factors)), floor)
        elif over is None and self._may_grow():
            self._grow(floor)

    def _grow(self, floor: float) -> None:
        """One more write in flight, or a quarter more of the time below one. Where the tail can be measured, the
        growth is taken only if the tail at this pace, scaled to the next, stays within the tail's aim below the
        budget (tail_model.py), and it starts the tail over: the next growth waits until the tail has been measured
        at the new pace."""
        grown = self.limit + 1.0 if self.limit >= 1.0 else min(1.0, self.limit * self.settings.duty_growth)
        self._last_growth = self.clock()  # a refused growth, too, is asked again only ``probe_grow_every`` later
        if self._tail_gates_growth():
            if not self._tail_allows(grown):
                self.tail_refusals += 1
                return
            grown = self._duty_the_tail_allows(grown)
            self._restart_tail()
        self._set_limit(grown, floor)

    def _duty_the_tail_allows(self, grown: float) -> float:
        """Below one write in flight, as much more of the time as the tail, scaled, allows (at most twice this duty,
        at least ``grown``): each step waits ten seconds for the tail, so a quarter at a time would take a minute
        and a half from the lowest duty back to one write in flight."""
        if self.limit >= 1.0 or self._tail_seen is None or self.probe is None:
            return grown
        allowed = tail_model.in_flight_allowed(self._tail_seen, self.limit, self.probe.budget)
        return max(grown, min(1.0, 2.0 * self.limit, allowed))

    def _tail_gates_growth(self) -> bool:
        return self.probe is not None and self.probe.tail_measurable()

    def _tail_allows(self, grown: float) -> bool:
        """Whether the tail last measured, its excess over idle scaled from the writes in flight now to those at
        ``grown`` (tail_model.py), is within the tail's aim. The excess grows faster than the writes in flight: a p99
        at x1.3 with one write in flight half of the time was x2-3.7 at one all of the time, which the tail would
        only show ten seconds of samples later."""
        if self._tail_seen is None or self.probe is None:  # not measured at this pace yet
            return False
        scaled = tail_model.scaled(self._tail_seen, _in_flight(self.limit), _in_flight(grown))
        return scaled <= tail_model.aim(self.probe.budget)

    def _restart_tail(self) -> None:
        self._tail_seen = None
        if self.probe is not None:
            self.probe.restart_tail()

    def _read_probe(self) -> Tuple[Optional[float], Optional[float]]:
        """The probe's p90 multiple and its tail's, each None until it can be estimated. A tail measured afresh
        speaks for the pace now, and judges a tail cut still on trial (``_undo_a_futile_cut``): a cut undone leaves
        no tail to act on until it is measured again, at the pace restored."""
        if self.probe is None:
            return None, None
        p90, tail = self.probe.multiple(), self.probe.tail_multiple()
        if tail is not None:
            self._tail_seen = tail
            if self._undo_a_futile_cut(tail):
                tail = None
        return p90, tail

    def _probe_over_budget(self, p90: Optional[float], tail: Optional[float]) -> Tuple[Optional[float], bool]:
        """(the factor to cut the limit by, whether the tail asked for it) when the probe's p90 window is over the
        budget (budget / p90) or its tail over the tail's aim below the budget (back to the aim: tail_model.py), the
        deeper cut of the two; else (None, False)."""
        if self.probe is None:
            return None, False
        budget = self.probe.budget
        cuts: List[Tuple[float, bool]] = []
        if p90 is not None and p90 > budget:
            cuts.append((budget / p90, False))
        if tail is not None and tail > tail_model.aim(budget):
            cuts.append((tail_model.cut_factor(tail, budget), True))
        if not cuts:
            return None, False
        return min(cuts, key=lambda cut: cut[0])

    def _probe_cut(self, by_tail: bool, limit_before: float) -> None:
        """A cut the probe asked for. One its tail asked for starts the tail again, at the new pace, and holds the
        limit until it is measured, when it is judged (``_undo_a_futile_cut``); the p90's cuts, seconds apart, leave
        the tail be, or it would never be measured."""
        self.probe_cuts += 1
        self._last_probe_cut = self.clock()
        if by_tail:
            self.tail_cuts += 1
            if self._tail_seen is not None:
                self._cut_on_trial = (self._tail_seen, limit_before)
            self._restart_tail()

    def _undo_a_futile_cut(self, tail: float) -> bool:
        """The tail's first reading since a tail cut, against the one that asked for it. Where it did not fall, the
        tail is not made of this pace (the apiserver's garbage collections stall every GET, whatever the pace): the
        cut is undone, and the pace it cut from, at most one write in flight, is the lowest the probe cuts to from
        now on. Otherwise a pass cuts on to ``min_duty`` and crawls with the tail where it was."""
        trial, self._cut_on_trial = self._cut_on_trial, None
        if trial is None or tail < trial[0]:
            return False
        limit_before = trial[1]
        self.futile_cuts += 1
        self.cut_floor = max(self.cut_floor or 0.0, min(1.0, limit_before))
        self._set_limit(limit_before, floor=self.settings.min_duty)
        self._restart_tail()  # measured at the cut pace, not at the one restored
        return True

    def _may_grow(self) -> bool:
        """Without a probe, every quiet window grows the limit; with one, at most every ``probe_grow_every`` s: a
        window of writes lasts milliseconds, the probe's p90 needs seconds to show what a growth did; after a cut
        the tail asked for or a growth it allowed, only once the tail is measured again."""
        if self.probe is None:
            return True
        if self._tail_seen is None and self._tail_gates_growth():
            return False
        return self._last_growth is None or self.clock() - self._last_growth >= self.settings.probe_grow_every

    def _probe_may_cut(self) -> bool:
        return self._last_probe_cut is None or self.clock() - self._last_probe_cut >= self.settings.probe_cut_every

    def _set_limit(self, value: float, floor: float = 1.0) -> None:
        self.limit = min(float(self.max_limit), max(floor, value))
        self.min_seen = min(self.min_seen, self.limit)
        self.max_seen = max(self.max_seen, self.limit)

    def snapshot(self) -> Dict[str, Any]:
        return {"mode": GENTLE if self.adaptive else MAX, "limit": self.permits, "final_limit": _limit(self.limit),
                "min_limit": _limit(self.min_seen), "max_limit_reached": _limit(self.max_seen),
                "duty": round(self.duty, 2), "workers": self.max_limit,
                "baseline_ms": _ms(self.baseline), "latency_ms": _ms(self.latency), "backoffs": self.backoffs,
                "throttle_backoffs": self.throttle_backoffs, "windows": self.windows,
                "congested_windows": self.congested, "probes": self.probes, "probe_cuts": self.probe_cuts,
                "tail_cuts": self.tail_cuts, "tail_refusals": self.tail_refusals, "futile_cuts": self.futile_cuts,
                "cut_floor": _limit(self.cut_floor) if self.cut_floor is not None else None,
                "tail_aim": round(tail_model.aim(self.probe.budget), 2) if self.probe is not None else None,
                "started_from": self.started_from.to_dict() if self.started_from else None}


def _in_flight(limit: float) -> float:
    """Writes in flight on average at a limit: whole ones above one, the fraction of the time below."""
    return float(int(limit)) if limit >= 1.0 else limit


def _limit(value: float) -> float:
    """Writes in flight as a result says it: whole above one, the fraction of the time below."""
    return int(value) if value >= 1.0 else round(value, 2)


def _ms(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else round(seconds * 1000.0, 2)


class PaceGate:
    """A semaphore whose number of permits the limiter sets: it bounds the writes in flight, not only their
    spacing. A lower limit takes effect as writes in flight finish; none is interrupted. Below one write in flight
    (the limiter's ``duty``), a write also waits out the pause the one before it earned."""

    def __init__(self, limiter: GradientLimiter, clock: Clock = time.monotonic, poll: float = 0.2) -> None:
        self.limiter = limiter
        self.clock = clock
        self.poll = poll
        self.in_flight = 0
        self.peak_in_flight = 0
        self._cond = threading.Condition()
        self._writing = False
        self._not_before = 0.0  # below one write in flight: the next write starts no earlier

    @property
    def probe(self) -> Optional[LatencyProbe]:
        return self.limiter.probe

    def idle_ends(self, give_up: Callable[[], bool]) -> None:
        """The pass starts its own work (LISTs, dry-runs): the probe's idle baseline is what it sampled until now."""
        if self.probe is not None:
            self.probe.measure_idle(give_up)

    def acquire(self, give_up: Callable[[], bool]) -> Optional[float]:
        """Wait for a permit; the start time of the write, or None when ``give_up()`` says the pass stopped. The
        first one first lets the probe finish its idle baseline."""
        if not self._writing and self.probe is not None:
            self.probe.writes_begin(give_up)
            with self._cond:
                self.limiter.writes_begin()
        self._writing = True
        with self._cond:
            while self.in_flight >= self.limiter.permits or self.clock() < self._not_before:
                if give_up():
                    return None
                self._cond.wait(max(0.001, min(self.poll, self._not_before - self.clock())))
            if give_up():
                return None
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            return self.clock()

    def release(self, started: float, throttled: bool = False, waited: float = 0.0) -> None:
        """The write that ``started`` is answered; a throttled one is congestion, not a latency sample. ``waited``:
        seconds of it spent waiting on our side (the max_qps bucket, retry sleeps), not on the apiserver."""
        ended = self.clock()
        with self._cond:
            self.in_flight -= 1
            if throttled:
                self.limiter.on_throttled()
            else:
                self.limiter.on_sample(started, ended - started - waited)
            duty = self.limiter.duty
            if duty < 1.0:  # in flight ``duty`` of the time: a pause in proportion to this write's time
                self._not_before = max(self._not_before, ended + (ended - started) * (1.0 / duty - 1.0))
            self._cond.notify_all()

    def following(self) -> PaceGate:
        """The gate of a pass run right after this one on the same cluster (a confirming pass): it starts from what
        this gate learned and holds the same probe, so its writes too are held to what other clients see."""
        with self._cond:
            learned = self.limiter.learned() or self.limiter.started_from  # a pass that wrote nothing passes it on
        lim = self.limiter
        return pace_gate(GENTLE if lim.adaptive else MAX, lim.max_limit, clock=self.clock, settings=lim.settings,
                         start=learned, probe=self.probe)

    def snapshot(self) -> Dict[str, Any]:
        with self._cond:
            snap = self.limiter.snapshot()
            snap["peak_in_flight"] = self.peak_in_flight
        if self.probe is not None:
            snap["probe"] = self.probe.summary()
        return snap


def pace_gate(mode: str, workers: int, clock: Clock = time.monotonic,
              settings: PaceSettings = PaceSettings(), start: Optional[Learned] = None,
              probe: Optional[LatencyProbe] = None) -> PaceGate:
    """The gate of one pass: adaptive for ``gentle`` (from ``start`` when an earlier pass learned it; holding
    ``probe``'s budget when given), fixed at ``workers`` for ``max``."""
    limiter = GradientLimiter(workers, adaptive=(mode == GENTLE), settings=settings, clock=clock, start=start,
                              probe=probe)
    return PaceGate(limiter, clock=clock)


class PaceCarry:
    """One cluster's passes, one after another: each gate starts from what the previous gates learned, and each
    probe from the idle baseline an earlier probe measured."""

    def __init__(self, mode: str, workers: int, start: Optional[Learned] = None) -> None:
        self.mode, self.workers = mode, workers
        self.learned = start
        self.idle: Optional[Baseline] = None

    def gate(self, probe: Optional[LatencyProbe] = None) -> PaceGate:
        return pace_gate(self.mode, self.workers, start=self.learned, probe=probe)

    def keep(self, gate: PaceGate) -> None:
        """After a pass: remember what its gate learned (a pass that wrote nothing leaves the memory as it was)."""
        with gate._cond:
            learned = gate.limiter.learned()
        if learned is not None:
            self.learned = learned
        probe = gate.probe
        if probe is not None and probe.baseline is not None and probe.baseline.samples >= MIN_IDLE_SAMPLES:
            # a noisy one too (it holds a budget, capped); the next pass adds the idle samples it takes anyway
            self.idle = probe.baseline


def describe(snap: Optional[Dict[str, Any]]) -> str:
    """The pace part of a progress line, e.g. ``pace gentle 3/8 in flight, write p50 4.1 ms (idle 2.0 ms)``."""
    if not snap:
        return ""
    text = "pace %s %s/%s in flight" % (snap.get("mode"), snap.get("limit"), snap.get("workers"))
    if (snap.get("duty") or 1.0) < 1.0:
        text += " %d%% of the time" % round(100 * snap["duty"])
    if snap.get("latency_ms") is not None:
        text += ", write p50 %.1f ms (idle %.1f ms)" % (snap["latency_ms"], snap.get("baseline_ms") or 0.0)
    if snap.get("backoffs"):
        text += ", %d backoffs" % int(snap["backoffs"])
    probe = probe_describe(snap.get("probe"))
    return text + ("; " + probe if probe else "")

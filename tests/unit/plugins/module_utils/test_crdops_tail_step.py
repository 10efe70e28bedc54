# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The step in other clients' tail (tail_step.py): a p99 that the lowest pace already lifts over the budget is not
cut for in vain, the excess above it is what the pace answers for, and the pass says so. On a fake clock."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.latency_probe import LatencyProbe
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.pace import (
    Learned, PaceSettings, pace_gate)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.probe_baseline import MIN_TAIL_SAMPLES
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.tail_step import (
    STEP_MARGIN, STEP_PACE, STEP_READINGS, TailStep)
from tests.unit.crdops_fakes import Clock

# multiples in the probe's own terms (latency over reference), as the limiter's other tests state them
pytestmark = pytest.mark.usefixtures("lean_client")

IDLE_S = 0.010


def fresh_pass(start=None):
    """A gate whose probe has an idle p99 (10 ms answers), after its first write: a fresh pass is at half the time."""
    clock = Clock(t=1000.0)
    probe = LatencyProbe(lambda: None, 2.0, clock=clock)
    for _sample in range(MIN_TAIL_SAMPLES):
        clock.t += 0.05
        probe.record(clock.t, IDLE_S)
    probe.writes_begin(lambda: False)
    gate = pace_gate("gentle", 8, clock=clock, settings=PaceSettings(probe_every=1e9), probe=probe, start=start)
    gate.release(gate.acquire(lambda: False))
    return clock, probe, gate.limiter


def in_flight(lim):
    return float(int(lim.limit)) if lim.limit >= 1.0 else lim.limit


def write(lim, clock, seconds, probe, tail_at):
    """Writes of 2 ms, 10 ms apart, for ``seconds``; the probe answers at idle but one in fifty at ``tail_at(writes in
    flight)`` times idle: a p90 at idle and a p99 that is whatever the pace makes it."""
    started, count = clock.t, 0
    while clock.t - started < seconds:
        for _write in range(lim.window_size()):
            clock.t += 0.01
            count += 1
            slow = count % 50 == 0
            probe.record(clock.t, IDLE_S * (tail_at(in_flight(lim)) if slow else 1.0))
            lim.on_sample(clock.t - 0.002, 0.002)


def test_a_step_over_the_budget_is_not_cut_for_in_vain_and_the_pace_grows_while_the_tail_stays_near_it():
    """Writing at all lifts other clients' p99 to x2.2 of idle whatever the pace (as measured on two cores): before,
    the limiter cut to a tenth of the time and refused every growth; now it grows to where the tail rises a
    quarter above that step, and no further."""
    clock, probe, lim = fresh_pass()
    assert lim.limit == pytest.approx(STEP_PACE)

    def tail_at(writes):  # the step, then a tenth more for each write in flight beyond one
        return 2.2 + 0.1 * max(0.0, writes - 1.0)

    write(lim, clock, 120.0, probe, tail_at)
    # one more write in flight each time the tail is measured while its excess over the step, scaled to the next
    # pace, stays within 2.2 x 1.25 = 2.75: x2.6 at five scales to 2.68 at six, taken; x2.7 at six to 2.78: refused
    assert lim.limit == 6.0 and lim.tail_refusals > 0
    assert lim.tail_cuts == 0
    snap = lim.snapshot()
    assert snap["tail_step"] == pytest.approx(2.2) and snap["tail_budget"] == pytest.approx(2.2 * STEP_MARGIN)
    assert snap["min_limit"] == STEP_PACE
    assert lim.learned().tail_step == pytest.approx(2.2)
    assert probe.summary()["tail_held"] is False  # the budget itself was not held, and the result says so


def test_a_tail_that_rises_past_a_quarter_above_the_step_is_cut_back_in_proportion_to_its_excess_over_it():
    clock, probe, lim = fresh_pass()
    write(lim, clock, 2.5, probe, lambda writes: 2.2)  # the step, read at half the time once 200 samples are in
    assert lim.limit == pytest.approx(1.0)  # x2.2 at half the time is the step: all of the time, at once
    assert lim.snapshot()["tail_step"] == pytest.approx(2.2)
    lim._set_limit(4.0)
    lim._restart_tail()
    write(lim, clock, 12.0, probe, lambda writes: 2.2 + 0.3 * writes)  # x3.4 at four: over 2.75
    assert lim.tail_cuts >= 1
    # (2.75 - 2.2) / (3.4 - 2.2) = 0.46, at most halved: two in flight, where the tail is 2.8; the next cut to one
    assert lim.limit <= 2.0


def test_a_step_under_the_budget_changes_no_budget_and_before_one_is_measured_the_excess_is_scaled_from_idle():
    step = TailStep()
    assert step.budget(2.0) == 2.0 and step.scaled(1.8, 1.0, 2.0) == pytest.approx(2.6)
    assert step.cut_factor(3.0, 2.0) == pytest.approx(2.0 / 3.0)
    step.read(1.0, 1.3)  # one write in flight is not the lowest pace: no step
    assert step.multiple is None
    step.read(STEP_PACE, 1.4)
    step.read(0.3, 1.2)
    step.read(0.3, 1.5)  # the median of the tails read that low is the step
    assert step.multiple == pytest.approx(1.4) and step.budget(2.0) == 2.0  # 1.4 x 1.25 = 1.75: the budget stands
    assert step.scaled(1.7, 1.0, 2.0) == pytest.approx(2.0)  # the excess over the step doubles, not over idle
    assert step.in_flight_allowed(1.4, 0.5, 2.0) == float("inf")


def test_a_quiet_first_reading_does_not_set_the_step_the_readings_at_the_lowest_pace_after_it_do():
    """A calibration's first 10 s at half the time read x1.22, its pass then met x1.9-2.5: the step is where the
    lowest pace keeps reading it, the median of its latest readings there, and the oldest ones age out."""
    step = TailStep()
    for tail in (1.22, 2.1, 1.9, 2.3):
        step.read(0.3, tail)
    assert step.multiple == pytest.approx(2.0)  # the median; the lowest reading alone was 1.22
    # the lowest reading alone cut to (2.0 - 1.22) / (3.0 - 1.22)
    assert step.cut_factor(3.0, 2.0) == pytest.approx((2.5 - 2.0) / (3.0 - 2.0))
    for tail in (1.5,) * STEP_READINGS:
        step.read(0.5, tail)
    assert step.multiple == pytest.approx(1.5)  # the cluster quietened: only the latest readings count
    assert TailStep(2.2).multiple == pytest.approx(2.2)


def test_a_measured_step_is_carried_to_the_next_pass_and_through_a_result():
    learned = Learned(1.0, 0.002, tail_step=2.2)
    assert Learned.from_dict(learned.to_dict()) == learned
    assert Learned.from_dict({"limit": 1.0, "baseline_ms": 2.0}).tail_step is None
    assert Learned.from_dict({"limit": 1.0, "baseline_ms": 2.0, "tail_step": "x"}) is None
    _clock, _probe, lim = fresh_pass(start=learned)
    assert lim.limit == 1.0 and lim.snapshot()["tail_budget"] == pytest.approx(2.2 * STEP_MARGIN)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How other clients' tail grows with the writes in flight (tail_model.py): with their square, so a pass grows only to
where the tail, so scaled, stays at the aim below the budget, and a tail over the budget is cut back to the aim. On a
fake clock."""
from __future__ import annotations

import math

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import tail_model
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.latency_probe import LatencyProbe
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.pace import (
    Learned, PaceSettings, pace_gate)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.probe_baseline import MIN_TAIL_SAMPLES
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


def write(lim, clock, seconds, probe, tail_at, until=lambda: False):
    """Writes of 2 ms, 10 ms apart, for ``seconds`` (or until ``until()``); the probe answers at idle but one in fifty
    at ``tail_at(writes in flight)`` times idle: a p90 at idle and a p99 that is whatever the pace makes it."""
    started, count = clock.t, 0
    while clock.t - started < seconds and not until():
        for _write in range(lim.window_size()):
            clock.t += 0.01
            count += 1
            slow = count % 50 == 0
            probe.record(clock.t, IDLE_S * (tail_at(in_flight(lim)) if slow else 1.0))
            lim.on_sample(clock.t - 0.002, 0.002)


AIM = 2.0 / 1.2  # the tail's aim for the budget of 2: what a p99 of 200 samples reading 20 % high still holds


def two_cores(writes):
    """Other clients' p99 as benchmarks/write_cost.py measured it on two cores: x1.3 at one write in flight half of
    the time, x2.2 at one all of the time, x5.8 at two."""
    return 1.0 + 1.2 * writes ** 2


def test_a_pass_grows_only_to_where_the_squared_tail_stays_within_the_aim_and_is_never_cut():
    """At x1.3 with one write in flight half of the time, scaling in proportion (as before) let the pass grow to one
    write in flight all of the time, where other clients saw x2.2 and the tail had to cut. Scaled with the square it
    grows to where the tail is predicted at the aim, and no further: no tail cut, other clients' p99 held."""
    clock, probe, lim = fresh_pass()
    assert lim.limit == pytest.approx(0.5)

    def noisy_idle(writes):  # x1.1 before any write (a noisy idle), the square of the writes above it
        return 1.1 + 0.8 * writes ** 2

    write(lim, clock, 120.0, probe, noisy_idle)
    assert lim.limit == pytest.approx(0.5 * math.sqrt((AIM - 1.0) / 0.3))  # 0.75 of the time: x1.54 there
    assert lim.tail_cuts == 0 and lim.tail_refusals > 0 and lim.max_seen < 1.0
    summary = probe.summary()
    assert summary["tail_multiple"] < AIM and summary["tail_held"] is True
    assert lim.snapshot()["tail_aim"] == pytest.approx(1.67)


def test_a_tail_over_the_aim_is_cut_to_where_its_square_puts_it_at_the_aim():
    clock, probe, lim = fresh_pass()
    lim._set_limit(2.0)
    lim._restart_tail()
    write(lim, clock, 30.0, probe, two_cores, until=lambda: lim.tail_cuts == 2)
    # x5.8 at two: sqrt(0.67 / 4.8) = 0.37 of it, at most halved: one write in flight; x2.2 there, over the aim
    # again: sqrt(0.67 / 1.2) of one
    assert lim.tail_cuts == 2 and lim.limit == pytest.approx(math.sqrt((AIM - 1.0) / 1.2))


def test_the_model_scales_the_excess_over_idle_with_the_square_of_the_writes_in_flight():
    assert tail_model.aim(2.0) == pytest.approx(AIM) and tail_model.aim(3.0) == pytest.approx(2.5)
    assert tail_model.aim(1.1) == 1.0  # never below idle
    assert tail_model.scaled(1.3, 0.5, 1.0) == pytest.approx(2.2)
    assert tail_model.scaled(1.8, 1.0, 2.0) == pytest.approx(4.2)  # in proportion it was x2.6
    assert tail_model.scaled(0.9, 1.0, 8.0) == pytest.approx(1.0)  # a tail at idle stays there
    assert tail_model.in_flight_allowed(1.0, 1.0, 2.0) == math.inf
    assert tail_model.scaled(1.3, 0.5, tail_model.in_flight_allowed(1.3, 0.5, 2.0)) == pytest.approx(AIM)
    assert tail_model.cut_factor(2.2, 2.0) == pytest.approx(math.sqrt((AIM - 1.0) / 1.2))
    assert tail_model.cut_factor(1.5, 2.0) == 1.0  # within the aim: nothing to cut


def test_what_a_pass_learned_round_trips_and_an_earlier_results_step_is_ignored():
    learned = Learned(1.0, 0.002)
    assert Learned.from_dict(learned.to_dict()) == learned
    assert Learned.from_dict({"limit": 0.8, "baseline_ms": 2.0, "tail_step": 2.2}) == Learned(0.8, 0.002)
    assert Learned.from_dict({"limit": 1.0}) is None
    _clock, _probe, lim = fresh_pass(start=learned)
    assert lim.limit == 1.0 and "tail_step" not in lim.snapshot()


def test_a_tail_cut_that_did_not_lower_the_tail_is_undone_and_the_pass_cuts_no_lower_than_where_it_was():
    """A tail made of something else than the pace (the apiserver's garbage collections stall GETs whatever the
    pace): x2.5 at one write in flight and at any part of the time. The first tail cut is judged by the tail's first
    fresh reading; it did not fall, so the cut is undone and one write in flight is the floor: the pass goes on at
    its pace instead of cutting on down to a tenth of the time with the tail where it was."""
    clock, probe, lim = fresh_pass(start=Learned(1.0, 0.002))
    assert lim.limit == 1.0
    write(lim, clock, 120.0, probe, lambda writes: 2.5)
    assert lim.tail_cuts >= 1 and lim.futile_cuts >= 1, lim.snapshot()
    assert lim.limit == 1.0 and lim.cut_floor == 1.0 and lim.min_seen < 1.0, lim.snapshot()
    snapshot = lim.snapshot()
    assert snapshot["futile_cuts"] == lim.futile_cuts and snapshot["cut_floor"] == 1


def test_a_tail_cut_that_lowered_the_tail_stands():
    """The pace's own tail (x2.2 at one write in flight, x1.3 at half of the time): the cut lowered it, so it stays
    and sets no floor."""
    clock, probe, lim = fresh_pass(start=Learned(1.0, 0.002))
    write(lim, clock, 60.0, probe, two_cores)
    assert lim.tail_cuts >= 1 and lim.futile_cuts == 0 and lim.cut_floor is None, lim.snapshot()
    assert lim.max_seen == 1.0 and lim.limit < 1.0

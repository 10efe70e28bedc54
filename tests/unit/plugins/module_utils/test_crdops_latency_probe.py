# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What other clients see: the latency probe's baseline, window and summary on a fake clock, the limiter holding
its budget beside the write latency, and the probe on its own thread against a fake fetch."""
from __future__ import annotations

import math
import threading
import time

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ApiError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import probe_baseline
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.latency_probe import (
    WARMUP_REQUESTS, LatencyProbe, describe)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.probe_baseline import (
    HELD_PERCENTILE, MAX_IDLE_SAMPLES, MIN_IDLE_SAMPLES, MIN_TAIL_SAMPLES, NOISE_CAP, TAIL_NOISE_CAP, Baseline, percentile)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.pace import (
    GradientLimiter, Learned, PaceCarry, PaceGate, PaceSettings, pace_gate)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.pace import describe as describe_pace


SHIPPED_CLIENT_OWN_S = probe_baseline.CLIENT_OWN_S


# the limiter is stated in the probe's own multiples (conftest.lean_client)
pytestmark = pytest.mark.usefixtures("lean_client")


class FakeClock(object):
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def probe_on(clock, budget=2.0, **kw):
    return LatencyProbe(lambda: None, budget, clock=clock, **kw)


def idle(probe, clock, latency, n=MIN_IDLE_SAMPLES, jitter=0.0):
    """``n`` idle samples 50 ms apart; every tenth ``jitter`` s slower."""
    for i in range(n):
        clock.t += 0.05
        probe.record(clock.t, latency + (jitter if i % 10 == 9 else 0.0))


def during(probe, clock, latency, seconds=5.0):
    for _sample in range(int(seconds / 0.05)):
        clock.t += 0.05
        probe.record(clock.t, latency)


def begin(probe):
    probe.writes_begin(lambda: False)


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0 and percentile([3.0], 99) == 3.0
    assert percentile(values, 90) == 90.0 and percentile(values[:60], 90) == 54.0  # of 60: the sixth largest


def test_idle_samples_before_the_first_write_are_the_baseline_and_the_window_p90_its_multiple():
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010)
    begin(probe)
    assert probe.baseline == Baseline(0.010, 0.010, 0.010, MIN_IDLE_SAMPLES) and probe.baseline.usable
    assert probe.multiple() is None  # too few samples in the window yet
    during(probe, clock, 0.030)
    assert probe.multiple() == pytest.approx(3.0)
    # the window slides: 5 s of idle-like answers later, the multiple is back near 1
    during(probe, clock, 0.011)
    assert probe.multiple() == pytest.approx(1.1)
    summary = probe.summary()
    assert summary["baseline"] == "ok" and summary["percentile"] == HELD_PERCENTILE == 90
    assert summary["idle"] == {"p50_ms": 10.0, "p90_ms": 10.0, "p99_ms": 10.0, "samples": MIN_IDLE_SAMPLES}
    assert summary["reference_ms"] == 10.0 and summary["during"]["p90_ms"] == 30.0
    assert summary["multiple"] == 3.0 and summary["held"] is False
    assert describe(summary) == "other clients' GET p90 10.0 -> 30.0 ms (x3.00, budget x2.0 NOT held)"
    # a summary from before the p90 (a result kept from an earlier release) is still told in its p99
    old = {"baseline": "ok", "budget": 2.0, "idle": {"p50_ms": 4.0, "p99_ms": 9.5, "samples": 60},
           "during": {"p50_ms": 6.1, "p99_ms": 15.2, "samples": 300}, "multiple": 1.6, "held": True}
    assert describe(old) == "other clients' GET p99 9.5 -> 15.2 ms (x1.60, budget x2.0 held)"
    assert describe(dict(old, baseline="noisy", multiple=None, held=None)).endswith("budget not applied")


def test_one_slow_idle_answer_in_sixty_no_longer_sets_the_budget():
    """The p99 of 60 samples is their largest: one idle spike made the baseline "noisy" and the budget off. The
    p90 is the sixth largest: three spikes leave it where the other 57 answers are."""
    clock = FakeClock()
    probe = probe_on(clock)
    for i in range(MIN_IDLE_SAMPLES):
        clock.t += 0.05
        probe.record(clock.t, 0.100 if i in (7, 30, 51) else 0.004)
    begin(probe)
    assert probe.baseline.status == "ok" and probe.baseline.p99 == 0.100 and probe.baseline.reference == 0.004
    during(probe, clock, 0.010)
    assert probe.multiple() == pytest.approx(2.5)
    assert probe.summary()["held"] is False and probe.summary()["baseline"] == "ok"


def test_a_noisy_idle_still_holds_a_budget_capped_at_three_times_its_p50():
    clock = FakeClock()
    noisy = probe_on(clock)
    for i in range(MIN_IDLE_SAMPLES):  # every fifth answer slow: the idle p90 is one of them, 12x the p50
        clock.t += 0.05
        noisy.record(clock.t, 0.050 if i % 5 == 4 else 0.004)
    begin(noisy)
    assert noisy.baseline.usable and noisy.baseline.p90 == 0.050
    assert noisy.baseline.reference == pytest.approx(NOISE_CAP * 0.004) and noisy.baseline.status == "noisy"
    during(noisy, clock, 0.030)
    assert noisy.multiple() == pytest.approx(0.030 / 0.012)  # held: tighter than the raw p90 (x0.6) would be
    summary = noisy.summary()
    assert summary["baseline"] == "noisy" and summary["reference_ms"] == 12.0 and summary["held"] is False
    assert describe(summary) == ("other clients' GET p90 12.0 -> 30.0 ms (x2.50, budget x2.0 NOT held, noisy idle "
                                 "held at x3 its p50)")
    # the limiter acts on it: a window over the budget cuts the limit
    lim = limiter_with(noisy, clock)
    feed(lim, clock, 0.002, windows=3, probe=noisy, probe_latency=0.030)
    assert lim.probe_cuts >= 1


def test_a_short_idle_is_no_baseline_and_the_budget_is_not_applied():
    clock = FakeClock()
    short = probe_on(clock)
    idle(short, clock, 0.004, n=MIN_IDLE_SAMPLES - 1)
    begin(short)  # not started: no sampler to wait for
    assert short.baseline.samples == MIN_IDLE_SAMPLES - 1 and not short.baseline.usable
    during(short, clock, 0.050)
    assert short.multiple() is None and short.summary()["baseline"] == "short" and short.summary()["held"] is None
    assert describe(short.summary()) == ("other clients' GET: baseline short (idle p50 4.0 ms, p90 4.0 ms, "
                                         "59 samples), budget not applied")


def test_a_carried_baseline_needs_no_idle_samples_and_round_trips():
    clock = FakeClock()
    carried = Baseline(0.008, 0.012, 0.015, MIN_IDLE_SAMPLES + 10)
    assert Baseline.from_dict(carried.to_dict()) == carried
    assert Baseline.from_dict({"p50_ms": 1}) is None and Baseline.from_dict(None) is None
    assert Baseline.from_dict({"p50_ms": 2, "p99_ms": 5, "samples": 60}).p90 == 0.005  # from before the p90
    probe = probe_on(clock, baseline=carried)
    begin(probe)
    during(probe, clock, 0.018)
    assert probe.multiple() == pytest.approx(1.5) and probe.summary()["baseline_carried"] is True
    assert probe.summary()["held"] is True


def test_the_next_pass_adds_its_idle_samples_to_the_carried_ones():
    clock = FakeClock()
    first = probe_on(clock)
    idle(first, clock, 0.010)
    first.measure_idle(lambda: False)
    carry = PaceCarry("gentle", 4)
    carry.keep(PaceGate(GradientLimiter(4, probe=first)))
    assert carry.idle is first.baseline and len(carry.idle.values) == MIN_IDLE_SAMPLES
    second = probe_on(clock, baseline=carry.idle)
    idle(second, clock, 0.020, n=40)  # sampled through the second pass's barrier and drain
    second.measure_idle(lambda: False)  # no wait: a baseline was carried in
    assert second.baseline.samples == MIN_IDLE_SAMPLES + 40 and second.baseline.p90 == 0.020
    assert second.baseline.p50 == 0.010 and second.summary()["baseline_carried"] is True
    many = Baseline.of([0.001] * (MAX_IDLE_SAMPLES + 50))
    assert many.samples == MAX_IDLE_SAMPLES == len(many.merged([0.002] * 10).values)


def limiter_with(probe, clock, workers=8):
    settings = PaceSettings(probe_every=1e9)
    return GradientLimiter(workers, settings=settings, clock=clock, probe=probe)


def feed(lim, clock, latency_s, windows=1, probe=None, probe_latency=None):
    """Full windows of writes taking ``latency_s`` (10 ms apart); the probe answers ``probe_latency`` meanwhile."""
    for _window in range(windows):
        for _write in range(lim.window_size()):
            clock.t += 0.01
            if probe is not None and probe_latency is not None:
                probe.record(clock.t, probe_latency)
            lim.on_sample(clock.t - latency_s, latency_s)


def test_the_limiter_holds_the_probe_budget_when_the_writes_latency_does_not_move():
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010)
    begin(probe)
    lim = limiter_with(probe, clock)
    calm = clock.t
    while clock.t - calm < 16:  # others fine: grows to the workers, one step every 2 s at most
        feed(lim, clock, 0.002, windows=1, probe=probe, probe_latency=0.012)
    assert lim.permits == 8 and lim.probe_cuts == 0
    # our writes stay fast, other clients' GETs go 3x slower: once a tenth of the 5 s window is (the p90 moves), cut
    # in proportion (2/3), and again only 2 s later
    feed(lim, clock, 0.002, windows=6, probe=probe, probe_latency=0.030)
    assert lim.probe_cuts == 1 and lim.limit == pytest.approx(8 * 2.0 / 3.0)
    cut_at = clock.t
    while clock.t - cut_at < 2.5:
        feed(lim, clock, 0.002, windows=1, probe=probe, probe_latency=0.030)
    assert lim.probe_cuts == 2 and lim.permits < 5
    snap = lim.snapshot()
    assert snap["probe_cuts"] == lim.probe_cuts and snap["congested_windows"] >= lim.probe_cuts


def test_no_growth_while_the_probe_is_over_budget_and_pace_max_ignores_it():
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010)
    begin(probe)
    lim = limiter_with(probe, clock)
    feed(lim, clock, 0.002, windows=4, probe=probe, probe_latency=0.012)
    grown = lim.limit
    feed(lim, clock, 0.002, windows=1, probe=probe, probe_latency=0.030)  # cut
    after_cut = lim.limit
    feed(lim, clock, 0.002, windows=1, probe=probe, probe_latency=0.030)  # within 2 s of the cut: held, no growth
    assert after_cut < grown and lim.limit == after_cut
    fixed = GradientLimiter(8, adaptive=False, clock=clock, probe=probe)
    assert fixed.probe is None and fixed.permits == 8


def test_the_gate_waits_for_the_idle_baseline_then_reports_the_probe_and_the_carry_keeps_its_baseline():
    answers = []

    def fetch():
        answers.append(time.monotonic())
        time.sleep(0.001)
    probe = LatencyProbe(fetch, 2.0, interval=0.002, target="default/crdops-pass-x").start()
    try:
        carry = PaceCarry("gentle", 4)
        gate = carry.gate(probe)
        started = gate.acquire(lambda: False)
        assert started is not None and len(answers) >= MIN_IDLE_SAMPLES  # the first write waited for the baseline
        gate.release(started)
    finally:
        probe.stop()
    snap = gate.snapshot()
    assert snap["probe"]["target"] == "default/crdops-pass-x" and snap["probe"]["idle"]["samples"] >= MIN_IDLE_SAMPLES
    carry.keep(gate)
    assert carry.idle == probe.baseline  # the next pass of the cluster starts from it, noisy or not


def test_failed_probe_requests_count_as_errors_not_latencies_and_stop_ends_the_thread():
    calls = []

    def fetch():
        calls.append(1)
        raise ApiError("probe refused", status=403)
    probe = LatencyProbe(fetch, 2.0, interval=0.001).start()
    deadline = time.monotonic() + 5
    while len(calls) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    probe.stop()
    assert probe.errors >= 5 and probe.summary()["idle"] is None and describe(probe.summary()) == ""
    assert not any(t.name == "crdops-latency-probe" and t.is_alive() for t in threading.enumerate())


def test_a_gate_without_a_probe_is_unchanged():
    gate = PaceGate(GradientLimiter(2))
    started = gate.acquire(lambda: False)
    gate.release(started)
    assert "probe" not in gate.snapshot() and gate.snapshot()["probe_cuts"] == 0


def test_a_pass_whose_writes_stay_fast_while_other_clients_slow_down_is_held_by_the_probe_alone():
    """Other clients' GETs slow with each of our writes in flight, our writes do not: the write-latency signal
    alone grows to every worker; with the probe's budget the pace stays low, and both passes are exact."""
    from tests.unit.plugins.module_utils.test_crdops_pace import NAME, slow_cluster
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, RestorePass
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd

    def run(with_probe):
        c, state = slow_cluster(1500, per_in_flight=0.0, base=0.004)

        def others_get():  # what another client waits for: 3 ms idle, 2 ms more per write of ours in flight
            time.sleep(0.003 + 0.002 * state["in"])
        probe = LatencyProbe(others_get, 2.0, interval=0.005, window_s=1.0).start() if with_probe else None
        try:
            # growth and cuts on a 1 s probe window, so that a short pass on a fast machine still sees both
            settings = PaceSettings(probe_every=1e9, probe_grow_every=0.2, probe_cut_every=0.5)
            gate = pace_gate("gentle", 8, settings=settings, probe=probe)
            result = RestorePass(c, get_crd(c, NAME), RestoreOptions(page_size=100, workers=8), pace=gate).run()
        finally:
            if probe is not None:
                probe.stop()
        assert (result.listed, result.rewritten, result.failed, result.complete) == (1500, 1500, 0, True)
        return result.pace

    alone, held = run(False), run(True)
    assert alone["final_limit"] == 8 and "probe" not in alone and alone["probe_cuts"] == 0, alone
    # only the probe cut: where the limit ends depends on the machine's timing (growth again once the probe's
    # window is back within the budget)
    assert held["probe_cuts"] >= 1 and held["min_limit"] < 8, held
    assert held["probe"]["baseline"] == "ok" and held["probe"]["idle"]["p50_ms"] < 5, held["probe"]


def test_the_first_answers_on_a_new_connection_are_not_the_idle_baseline():
    clock, calls = FakeClock(), []

    def fetch():  # the first answers pay the TLS handshake and the token's first review
        calls.append(1)
        clock.t += 0.040 if len(calls) <= WARMUP_REQUESTS else 0.002

    probe = LatencyProbe(fetch, 2.0, clock=clock)
    for _request in range(WARMUP_REQUESTS + MIN_IDLE_SAMPLES):
        probe.sample_once()
    begin(probe)
    assert probe.baseline.samples == MIN_IDLE_SAMPLES and probe.baseline.usable
    assert probe.baseline.p99 == pytest.approx(0.002) and len(calls) == WARMUP_REQUESTS + MIN_IDLE_SAMPLES


def test_only_the_probe_cuts_below_one_write_in_flight_and_the_pace_grows_back_when_others_are_fine():
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010)
    begin(probe)
    lim = limiter_with(probe, clock)
    started = clock.t
    while clock.t - started < 60:  # other clients stay 3x slower whatever we do
        feed(lim, clock, 0.002, windows=1, probe=probe, probe_latency=0.030)
    assert lim.limit == pytest.approx(PaceSettings().min_duty) and lim.permits == 1
    snap = lim.snapshot()
    assert snap["final_limit"] == snap["min_limit"] == snap["duty"] == PaceSettings().min_duty
    assert "1/8 in flight 10% of the time" in describe_pace(dict(snap, probe=None))
    calm = clock.t
    while clock.t - calm < 40:  # others back to idle: once the probe's window slid past, it grows past one
        feed(lim, clock, 0.002, windows=1, probe=probe, probe_latency=0.011)
    assert lim.limit > 1.0 and lim.duty == 1.0
    # the writes' own latency alone never goes below one write in flight
    alone = GradientLimiter(8, settings=PaceSettings(probe_every=1e9), clock=clock)
    feed(alone, clock, 0.002, windows=3)
    feed(alone, clock, 0.200, windows=20)
    assert alone.limit == 1.0 and alone.duty == 1.0


def test_below_one_write_in_flight_the_gate_pauses_in_proportion_to_the_last_write():
    clock = FakeClock()
    lim = GradientLimiter(8, settings=PaceSettings(probe_every=1e9), clock=clock)
    lim.limit = 0.25  # one write in flight a quarter of the time
    gate = PaceGate(lim, clock=clock, poll=0.001)
    started = gate.acquire(lambda: False)
    clock.t += 0.010
    gate.release(started)
    assert gate._not_before == pytest.approx(clock.t + 0.030)
    clock.t += 0.029
    assert gate.acquire(lambda: True) is None  # still pausing: a stop ends the wait
    clock.t += 0.002
    assert gate.acquire(lambda: False) == clock.t


def test_the_idle_baseline_is_measured_before_the_pass_does_anything_else():
    probe = LatencyProbe(lambda: time.sleep(0.0005), 2.0).start()
    try:
        assert probe.measure_idle(lambda: False) is probe
        assert probe.baseline is not None and probe.baseline.samples >= MIN_IDLE_SAMPLES
        frozen = probe.baseline
        time.sleep(0.05)  # later samples before the first write do not move it
        begin(probe)
        assert probe.baseline == frozen
    finally:
        probe.stop()
    stopped = LatencyProbe(lambda: None, 2.0).start()
    try:  # a stop request ends the wait with no baseline
        assert stopped.measure_idle(lambda: True).baseline is None
    finally:
        stopped.stop()


def test_with_a_probe_the_limit_grows_at_most_every_two_seconds_without_one_every_quiet_window():
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010)
    begin(probe)
    lim = limiter_with(probe, clock)
    feed(lim, clock, 0.002, windows=10, probe=probe, probe_latency=0.010)  # 0.8 s of quiet windows
    assert lim.limit == 2.0  # one growth: the probe could not have seen what a second one did yet
    alone = GradientLimiter(8, settings=PaceSettings(probe_every=1e9), clock=clock)
    feed(alone, clock, 0.002, windows=10)
    assert alone.limit == 8.0


def test_the_gate_of_the_next_pass_starts_from_what_this_one_learned_and_holds_the_same_probe():
    """A confirming pass's gate (PaceGate.following): the limit and baseline learned, the probe still running."""
    clock = FakeClock()
    probe = probe_on(clock)
    settings = PaceSettings(probe_every=1e9, tolerance=3.0)
    gate = pace_gate("gentle", 8, clock=clock, settings=settings, start=Learned(5.0, 0.002), probe=probe)
    for _write in range(gate.limiter.window_size() * 3):
        clock.t += 0.01
        gate.limiter.on_sample(clock.t - 0.002, 0.002)
    learned = gate.limiter.learned()
    nxt = gate.following()
    assert nxt is not gate and nxt.probe is probe and nxt.limiter.settings is settings
    assert nxt.limiter.started_from == learned and nxt.limiter.permits == int(learned.limit) >= 5
    untouched = pace_gate("gentle", 8, clock=clock, start=Learned(3.0, 0.002), probe=probe).following()
    assert untouched.limiter.permits == 3 and untouched.probe is probe   # nothing written: the start passes on
    fixed = pace_gate("max", 8, clock=clock, probe=probe).following()
    assert fixed.limiter.permits == 8 and not fixed.limiter.adaptive and fixed.probe is None


def spiky(lim, clock, seconds, probe, every=20, spike=0.030, calm=0.010, until=lambda: False):
    """Writes of 2 ms, 10 ms apart, for ``seconds`` or ``until()``; the probe answers ``calm`` but one in ``every``
    ``spike``: a p90 at idle, a tail three times the idle's."""
    started, count = clock.t, 0
    while clock.t - started < seconds and not until():
        for _write in range(lim.window_size()):
            clock.t += 0.01
            count += 1
            probe.record(clock.t, spike if count % every == 0 else calm)
            lim.on_sample(clock.t - 0.002, 0.002)


def test_the_idle_p99_is_a_reference_only_from_enough_samples_and_capped_at_twice_the_idle_p50():
    assert Baseline.of([0.010] * (MIN_TAIL_SAMPLES - 1)).tail_reference is None
    assert Baseline.of([0.010] * MIN_TAIL_SAMPLES).tail_reference == pytest.approx(0.010)
    quiet = Baseline.of([0.010] * (MIN_TAIL_SAMPLES - 10) + [0.018] * 10)  # p99 1.8 times the p50: as measured
    assert quiet.tail_reference == pytest.approx(0.018)
    # a few slow idle answers (p99 2.5 times the p50) would loosen the tail: capped, though the p90 is not noisy
    spiky = Baseline.of([0.010] * (MIN_TAIL_SAMPLES - 10) + [0.025] * 10)
    assert spiky.tail_reference == pytest.approx(TAIL_NOISE_CAP * 0.010) and spiky.status == "ok"
    noisy = Baseline.of([0.010] * (MIN_TAIL_SAMPLES - 10) + [0.200] * 10)  # p99 twenty times the p50
    assert noisy.tail_reference == pytest.approx(TAIL_NOISE_CAP * 0.010)


def test_the_tail_is_measured_from_the_last_cut_and_only_from_enough_samples():
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010, n=MIN_TAIL_SAMPLES)
    begin(probe)
    during(probe, clock, 0.010, seconds=(MIN_TAIL_SAMPLES - 1) * 0.05)
    assert probe.tail_multiple() is None  # 199 samples: no p99 yet
    during(probe, clock, 0.030, seconds=0.05 * 5)
    assert probe.tail_multiple() == pytest.approx(3.0)  # 5 of 204 at 3x idle: the p99
    probe.restart_tail()
    assert probe.tail_multiple() is None
    during(probe, clock, 0.010, seconds=MIN_TAIL_SAMPLES * 0.05)
    assert probe.tail_multiple() == pytest.approx(1.0)
    short = probe_on(clock)
    idle(short, clock, 0.010)  # 60 idle samples: a p90, no p99
    begin(short)
    during(short, clock, 0.030, seconds=30)
    assert short.tail_multiple() is None and short.multiple() == pytest.approx(3.0)
    assert short.summary()["tail_multiple"] is None and short.summary()["tail_reference_ms"] is None


def limiter_with_a_tail():
    """A limiter whose probe had enough idle samples (10 ms each) for an idle p99: the tail can speak."""
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.010, n=MIN_TAIL_SAMPLES)
    begin(probe)
    return clock, probe, limiter_with(probe, clock)


def test_a_tail_over_budget_cuts_and_holds_the_pace_until_it_is_measured_again_while_the_p90_is_fine():
    clock, probe, lim = limiter_with_a_tail()
    lim._set_limit(4.0)
    spiky(lim, clock, 30.0, probe, until=lambda: lim.probe_cuts > 0)  # one in twenty at 3x idle: p90 x1, p99 x3
    assert probe.multiple() == pytest.approx(1.0) and lim.tail_cuts == 1 and lim.probe_cuts == 1
    assert clock.t - probe._writing_since == pytest.approx(MIN_TAIL_SAMPLES * 0.01, abs=0.1)  # once it knew
    # no growth before the tail spoke, then cut to where x3 scales (with the square of the writes in flight) to the
    # tail's aim, x1.67 for a budget of 2 (tail_model.py)
    assert lim.limit == pytest.approx(4.0 * math.sqrt((2.0 / 1.2 - 1.0) / 2.0))
    held = lim.limit
    spiky(lim, clock, 1.5, probe, every=1000)  # calm again, 150 samples since the cut: the tail unknown, held
    assert probe.tail_multiple() is None and lim.limit == held
    spiky(lim, clock, 1.0, probe, every=1000)  # measured again and within: it grows, and the tail starts over
    assert lim.limit > held and lim.tail_cuts == 1 and probe.tail_multiple() is None
    summary = probe.summary()
    assert summary["tail_percentile"] == 99 and summary["tail_reference_ms"] == 10.0
    assert summary["tail_multiple"] == pytest.approx(3.0) and summary["tail_held"] is False
    assert "p99 10.0 -> 30.0 ms (x3.00 NOT held)" in describe(summary)
    assert lim.snapshot()["tail_cuts"] == 1


def steady(lim, clock, seconds, probe, tail, until=lambda: False):
    """Writes of 2 ms, 10 ms apart; the probe answers 10 ms but one in fifty ``tail`` times that: p90 x1, p99 x tail."""
    spiky(lim, clock, seconds, probe, every=50, spike=0.010 * tail, until=until)


def test_a_growth_waits_for_the_tail_at_the_pace_and_is_taken_only_if_the_tail_scaled_to_the_next_pace_holds():
    clock, probe, lim = limiter_with_a_tail()
    steady(lim, clock, 1.8, probe, tail=1.0)  # 180 samples: the tail at one write in flight not yet measured
    assert lim.limit == 1.0 and probe.tail_multiple() is None
    steady(lim, clock, 0.3, probe, tail=1.0, until=lambda: lim.limit > 1.0)  # measured, x1: two would be x1
    assert lim.limit == 2.0 and probe.tail_multiple() is None  # and the tail starts over at the new pace
    steady(lim, clock, 1.5, probe, tail=1.0)
    assert lim.limit == 2.0  # held until the tail at two writes in flight is in
    steady(lim, clock, 1.0, probe, tail=1.0, until=lambda: lim.limit > 2.0)
    assert lim.limit == 3.0 and lim.tail_refusals == 0
    # the excess over idle grows with the square of the writes in flight (tail_model.py), and a growth is taken
    # only within the tail's aim, x1.67 for a budget of 2: x1.35 with three would be x1.62 with four, taken
    steady(lim, clock, 5.0, probe, tail=1.35, until=lambda: lim.limit > 3.0)
    assert lim.limit == 4.0
    # x1.4 with four would be x1.63 with five: taken; x1.6 with five would be x1.86 with six: refused
    steady(lim, clock, 5.0, probe, tail=1.4, until=lambda: lim.limit > 4.0)
    assert lim.limit == 5.0
    steady(lim, clock, 10.0, probe, tail=1.6)
    assert lim.limit == 5.0 and lim.tail_refusals >= 3 and lim.probe_cuts == 0
    assert lim.snapshot()["tail_refusals"] == lim.tail_refusals
    # below one write in flight the same rule: x1.3 at half the time would be x1.47 at five eighths, x2.2 at all
    duty = limiter_with(probe, clock)
    duty._set_limit(0.5, floor=0.1)
    duty._tail_seen = 1.3
    assert duty._tail_allows(0.625) and not duty._tail_allows(1.0)
    # and it takes as much as the tail allows, up to twice the duty: x1.3 at a half allows 0.75 of the time
    assert duty._duty_the_tail_allows(0.625) == pytest.approx(0.5 * math.sqrt((2.0 / 1.2 - 1.0) / 0.3))
    duty._set_limit(0.2, floor=0.1)
    assert duty._duty_the_tail_allows(0.25) == pytest.approx(0.2 * math.sqrt((2.0 / 1.2 - 1.0) / 0.3))  # 0.30
    duty._tail_seen = 1.1
    assert duty._duty_the_tail_allows(0.25) == pytest.approx(0.4)  # x1.1 would allow more than half: doubled
    # without an idle p99 (too few idle samples) the p90 alone decides, every two seconds
    short = probe_on(clock)
    idle(short, clock, 0.010)
    begin(short)
    free = limiter_with(short, clock)
    steady(free, clock, 4.5, short, tail=1.0)
    assert free.limit == 4.0 and free.tail_refusals == 0  # its first window, then every two seconds


def test_where_the_tail_can_be_measured_a_fresh_pass_starts_at_half_the_time_and_the_tail_grows_it():
    clock, probe, _lim = limiter_with_a_tail()
    gate = pace_gate("gentle", 8, clock=clock, settings=PaceSettings(probe_every=1e9), probe=probe)
    assert gate.limiter.limit == 1.0  # the baseline is not frozen yet: nothing is known of the tail
    started = gate.acquire(lambda: False)
    gate.release(started)
    lim = gate.limiter
    assert lim.limit == pytest.approx(0.5) and lim.snapshot()["max_limit_reached"] == 0.5
    steady(lim, clock, 1.9, probe, tail=1.15)  # 190 samples: the tail at half the time not yet measured, held
    assert lim.limit == pytest.approx(0.5)
    # x1.15 at a half is x1.6 at all of the time, within the tail's aim (x1.67): all of the time
    steady(lim, clock, 0.3, probe, tail=1.15, until=lambda: lim.limit > 0.5)
    assert lim.limit == pytest.approx(1.0) and lim.probe_cuts == 0
    # a pass that starts from what an earlier one learned, a probe without an idle p99, or pace max: unchanged
    learned = pace_gate("gentle", 8, clock=clock, start=Learned(2.0, 0.002), probe=probe)
    learned.release(learned.acquire(lambda: False))
    assert learned.limiter.limit == 2.0
    short = probe_on(clock)
    idle(short, clock, 0.010)
    begin(short)
    without_p99 = pace_gate("gentle", 8, clock=clock, probe=short)
    without_p99.release(without_p99.acquire(lambda: False))
    assert without_p99.limiter.limit == 1.0
    fixed = pace_gate("max", 8, clock=clock, probe=probe)
    fixed.release(fixed.acquire(lambda: False))
    assert fixed.limiter.limit == 8.0


def test_a_multiple_is_a_typical_clients_whose_own_time_a_pass_does_not_lengthen(monkeypatch):
    """The probe answers in 2 ms at idle and 4.4 ms while we write: x2.2 of its own idle, but a client that spends
    2 ms of its own on each answer goes from 4 ms to 6.4 ms, x1.6: within a budget of 2 (and the tail's aim, x1.67),
    so nothing is cut."""
    monkeypatch.setattr(probe_baseline, "CLIENT_OWN_S", SHIPPED_CLIENT_OWN_S)
    assert SHIPPED_CLIENT_OWN_S == pytest.approx(0.002)
    clock = FakeClock()
    probe = probe_on(clock)
    idle(probe, clock, 0.002, n=MIN_TAIL_SAMPLES)
    lim = limiter_with(probe, clock)
    begin(probe)
    assert probe.multiple() is None
    feed(lim, clock, 0.004, windows=40, probe=probe, probe_latency=0.0044)
    assert probe.multiple() == pytest.approx(1.6) and probe.tail_multiple() == pytest.approx(1.6)
    assert lim.probe_cuts == 0 and lim.tail_cuts == 0
    summary = probe.summary()
    assert summary["client_own_ms"] == 2.0 and summary["reference_ms"] == 2.0
    assert summary["multiple"] == 1.6 and summary["held"] is True and summary["tail_held"] is True
    assert describe(summary) == ("other clients' GET p90 2.0 -> 4.4 ms (x1.60 to a client spending 2.0 ms of its own, "
                                 "budget x2.0 held), p99 2.0 -> 4.4 ms (x1.60 held)")
    # the same pass held in the probe's own multiples: x2.2, over the budget, cut
    monkeypatch.setattr(probe_baseline, "CLIENT_OWN_S", 0.0)
    assert probe.multiple() == pytest.approx(2.2)

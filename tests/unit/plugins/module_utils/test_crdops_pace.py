# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The adaptive pace: the limiter on a fake clock and latency sequence, the gate under threads, the pass with it."""
from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.progress import progress_line
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.pace import (
    GradientLimiter, Learned, PaceCarry, PaceGate, PaceSettings, describe, pace_gate)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import (
    RestoreOptions, RestorePass, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"


class FakeClock(object):
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def feed(lim, clock, latency_s, windows=1):
    """Answer ``windows`` full windows of writes, each taking ``latency_s``; 10 ms of fake time per write."""
    for _window in range(windows):
        for _write in range(lim.window_size()):
            clock.t += 0.01
            lim.on_sample(clock.t - latency_s, latency_s)


def limiter(workers=8, adaptive=True, **kw):
    clock = FakeClock()
    kw.setdefault("probe_every", 1e9)  # probes only where a test asks for them
    return GradientLimiter(workers, adaptive=adaptive, settings=PaceSettings(**kw), clock=clock), clock


def test_starts_at_one_learns_the_idle_latency_and_grows_by_one_per_window_up_to_workers_never_above():
    lim, clock = limiter(workers=8)
    assert lim.permits == 1 and lim.window_size() == 8
    feed(lim, clock, 0.002)
    assert lim.baseline == pytest.approx(0.002) and lim.permits == 2
    feed(lim, clock, 0.002, windows=5)
    assert lim.permits == 7 and lim.window_size() == 14  # two samples per permit
    feed(lim, clock, 0.002, windows=20)
    assert lim.permits == 8 and lim.limit == 8.0 and lim.backoffs == 0
    # within the tolerance (1.5 x baseline) is not congestion
    feed(lim, clock, 0.0029, windows=3)
    assert lim.permits == 8 and lim.backoffs == 0


def test_rising_latency_cuts_in_proportion_at_most_half_a_window_and_never_below_one():
    lim, clock = limiter(workers=8)
    feed(lim, clock, 0.010, windows=10)
    assert lim.permits == 8
    feed(lim, clock, 0.020)  # 2x the baseline: target 15.5 ms (1.5 x 10 ms + 0.5 ms slack) / 20 ms
    assert lim.limit == pytest.approx(6.2) and lim.permits == 6 and lim.backoffs == 1
    feed(lim, clock, 0.100)  # 10x: the cut stops at half
    assert lim.limit == pytest.approx(3.1) and lim.backoffs == 2
    feed(lim, clock, 0.500, windows=10)
    assert lim.limit == 1.0 and lim.permits == 1 and lim.min_seen == 1.0
    assert lim.baseline == pytest.approx(0.010)  # congestion does not become the baseline within a minute


def test_recovers_when_the_latency_falls_back():
    lim, clock = limiter(workers=6)
    feed(lim, clock, 0.005, windows=8)
    feed(lim, clock, 0.050, windows=4)
    assert lim.permits == 1
    feed(lim, clock, 0.005, windows=3)
    assert lim.permits == 4
    feed(lim, clock, 0.005, windows=5)
    assert lim.permits == 6 and lim.max_seen == 6.0


def test_a_throttled_answer_halves_the_limit_once_per_window_and_never_below_one():
    lim, clock = limiter(workers=8, initial_limit=8.0)
    lim.on_throttled()
    assert lim.limit == 4.0 and lim.backoffs == 1 and lim.throttle_backoffs == 1
    lim.on_throttled()  # the same congestion episode
    assert lim.limit == 4.0 and lim.throttle_backoffs == 1
    feed(lim, clock, 0.002)  # the window closes without a latency move: it was cut already
    assert lim.limit == 4.0
    seen = []
    for _window in range(3):
        lim.on_throttled()
        seen.append(lim.limit)
        lim._cut_in_window = False  # the next window (closing it with samples would also grow the limit)
    assert seen == [2.0, 1.0, 1.0] and lim.min_seen == 1.0 and lim.throttle_backoffs == 4


def test_max_mode_measures_but_never_moves_the_limit():
    lim, clock = limiter(workers=8, adaptive=False)
    assert lim.permits == 8
    feed(lim, clock, 0.002, windows=3)
    feed(lim, clock, 0.200, windows=3)
    lim.on_throttled()
    assert lim.permits == 8 and lim.backoffs == 0
    snap = lim.snapshot()
    assert snap["mode"] == "max" and snap["baseline_ms"] == 2.0 and snap["latency_ms"] == 200.0
    assert (snap["final_limit"], snap["min_limit"]) == (8, 8)


def test_a_probe_window_runs_one_write_in_flight_ignores_earlier_writes_and_refreshes_the_baseline():
    lim, clock = limiter(workers=4, probe_every=15.0, baseline_age=60.0)
    feed(lim, clock, 0.002, windows=5)
    assert lim.permits == 4
    clock.t += 15.0
    feed(lim, clock, 0.002)  # this window ends past probe_every: the next one is a probe
    assert lim.permits == 1 and lim.probes == 1
    probe_start = clock.t
    lim.on_sample(probe_start - 1.0, 5.0)  # started before the probe at four in flight: not counted
    assert lim._samples == []
    feed(lim, clock, 0.002)
    assert lim.permits == 4  # back to the limit it had
    # a cluster that got slower for good: after a minute the old idle latency is forgotten
    clock.t += 61.0
    feed(lim, clock, 0.006)
    assert lim.baseline == pytest.approx(0.006)


def test_the_gate_bounds_writes_in_flight_follows_a_lower_limit_and_gives_up_on_stop():
    lim = GradientLimiter(8, adaptive=True, settings=PaceSettings(initial_limit=3.0, probe_every=1e9))
    gate = PaceGate(lim, poll=0.01)
    active, peak, lock = [0], [0], threading.Lock()

    def one():
        started = gate.acquire(lambda: False)
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.01)
        with lock:
            active[0] -= 1
        gate.release(started)

    threads = [threading.Thread(target=one) for _thread in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert peak[0] <= 4 and gate.peak_in_flight <= 4 and gate.in_flight == 0  # 3, then 4 after one window
    lim.limit = 1.0
    first = gate.acquire(lambda: False)
    stopped = threading.Event()
    out = []
    waiter = threading.Thread(target=lambda: out.append(gate.acquire(stopped.is_set)))
    waiter.start()
    time.sleep(0.05)
    assert out == []  # one permit, taken
    stopped.set()
    waiter.join(2)
    assert out == [None] and gate.in_flight == 1
    gate.release(first, throttled=True)
    assert gate.in_flight == 0 and lim.throttle_backoffs == 1 and lim.limit == 1.0


def slow_cluster(n, per_in_flight=0.004, throttle_first=0, base=0.0):
    """A fake apiserver whose write latency grows with the writes in flight (queueing), optionally 429 first."""
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, n, namespaces=("a",))
    state = {"in": 0, "peak": 0, "throttles": throttle_first}
    lock = threading.Lock()

    class Stats(object):
        throttled = 0

        def snapshot(self):
            return {"throttled": self.throttled}

    c.stats = Stats()

    def hook(method, path, _q, _body):
        if method != "PATCH" or "/customresourcedefinitions/" in path:
            return None
        with lock:
            if state["throttles"] > 0:
                state["throttles"] -= 1
                c.stats.throttled += 1  # the transport counts a 429 it retried, then answers the retry
            state["in"] += 1
            state["peak"] = max(state["peak"], state["in"])
            delay = base + per_in_flight * state["in"]
        time.sleep(delay)
        with lock:
            state["in"] -= 1
        return None

    c.hooks.append(hook)
    return c, state


def test_a_gentle_pass_backs_off_when_its_writes_queue_and_counts_stay_exact():
    c, state = slow_cluster(400)
    gate = pace_gate("gentle", 8, settings=PaceSettings(tolerance=1.5, probe_every=1e9))
    result = RestorePass(c, get_crd(c, NAME), RestoreOptions(page_size=100, workers=8), pace=gate).run()
    assert (result.listed, result.rewritten, result.failed, result.complete) == (400, 400, 0, True)
    pace = result.pace
    assert pace["mode"] == "gentle" and pace["workers"] == 8
    # latency grows by the baseline with every write in flight: 1.5x the baseline allows one, maybe two
    assert state["peak"] <= 3 and pace["peak_in_flight"] <= 3 and pace["backoffs"] >= 1
    assert 1 <= pace["final_limit"] <= 2 and pace["baseline_ms"] >= 3.5


def test_a_max_pass_keeps_every_worker_writing():
    c, state = slow_cluster(200, per_in_flight=0.001)
    result = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=100, workers=8, pace="max"))
    assert (result.listed, result.rewritten, result.failed) == (200, 200, 0)
    assert result.pace["mode"] == "max" and result.pace["final_limit"] == 8 and result.pace["backoffs"] == 0
    assert state["peak"] == 8


def test_a_throttled_write_halves_the_pass_limit():
    c, _state = slow_cluster(300, per_in_flight=0.0, throttle_first=1, base=0.005)
    # latency never counts as congestion here (tolerance): on a loaded machine a slow window would cut the
    # limit too, and only the throttled answer's cut is under test
    gate = pace_gate("gentle", 8, settings=PaceSettings(initial_limit=8.0, probe_every=1e9, tolerance=1e6))
    result = RestorePass(c, get_crd(c, NAME), RestoreOptions(page_size=100, workers=8), pace=gate).run()
    assert result.rewritten == 300 and result.pace["throttle_backoffs"] == 1 and result.pace["min_limit"] == 4


def test_pace_is_validated_reported_in_the_result_and_in_the_progress_line():
    with pytest.raises(BadInputError, match="pace must be one of gentle, max"):
        RestoreOptions(pace="fast").validate()
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, 5, namespaces=("a",))
    seen = []
    result = migrate_crd(c, get_crd(c, NAME), RestoreOptions(), progress=seen.append)
    assert result.to_dict()["pace"]["mode"] == "gentle" and seen[-1]["pace"]["mode"] == "gentle"
    line = progress_line({"crds_done": 0, "crds_total": 1, "current": seen[-1]}, 5)
    assert "; pace gentle 1/8 in flight" in line
    snap = {"mode": "gentle", "limit": 3, "workers": 8, "latency_ms": 4.14, "baseline_ms": 2.0, "backoffs": 2}
    assert describe(snap) == "pace gentle 3/8 in flight, write p50 4.1 ms (idle 2.0 ms), 2 backoffs"
    assert describe(None) == ""


def test_a_stopped_pass_does_not_wait_for_a_permit():
    c, _state = slow_cluster(50, per_in_flight=0.002)
    c.hooks.insert(0, lambda m, p, _q, _b: status(403, "forbidden", "Forbidden") if m == "PATCH" and
                   "/customresourcedefinitions/" not in p else None)
    result = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=50, workers=8))
    assert result.complete is False and result.aborted_kind == "permission"
    assert result.failed + result.not_attempted == 50


def test_the_transport_tells_each_thread_its_own_waiting_and_the_gate_leaves_it_out_of_the_sample():
    from tests.unit.plugins.module_utils.test_crdops_transport import Clock, Pool, Raw, transport
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import RateLimiter

    clock = Clock()
    t = transport(Pool(Raw(503, b"", {"Retry-After": "2"}), Raw(200, {})), clock,
                  rate_limiter=RateLimiter(1, burst=1, clock=clock, sleep=clock.sleep))
    t.request("GET", "/a")  # a token at hand, then 2 s of Retry-After (the bucket refills meanwhile)
    assert t.waited() == pytest.approx(2.0)
    t.request("GET", "/b")  # 1 s for the next token
    assert t.waited() == pytest.approx(3.0)
    other = []
    worker = threading.Thread(target=lambda: other.append(t.waited()))
    worker.start()
    worker.join()
    assert other == [0.0]  # another worker's wait is not this one's

    clock2 = FakeClock()
    gate = PaceGate(GradientLimiter(4, settings=PaceSettings(min_window=1, probe_every=1e9), clock=clock2),
                    clock=clock2)
    for _write in range(2):  # one window
        started = gate.acquire(lambda: False)
        clock2.t += 1.003  # one second in the max_qps bucket, 3 ms on the wire
        gate.release(started, waited=1.0)
    assert gate.limiter.latency == pytest.approx(0.003)


def test_a_max_qps_bucket_is_not_read_as_congestion():
    """A pass capped by max_qps waits in the transport before writes; the limiter sees only the rest."""
    def run(tell):
        c = FakeCluster()
        c.add_crd()
        c.add_objects(NAME, 60, namespaces=("a",))
        local = threading.local()

        def hook(method, path, _q, _b):
            if method == "PATCH" and "/customresourcedefinitions/" not in path:
                time.sleep(0.05)  # as if the max_qps bucket held this write 50 ms
                local.w = getattr(local, "w", 0.0) + 0.05
            return None

        c.hooks.append(hook)
        if tell:
            c.waited = lambda: getattr(local, "w", 0.0)
        gate = pace_gate("gentle", 4, settings=PaceSettings(probe_every=1e9))
        return RestorePass(c, get_crd(c, NAME), RestoreOptions(page_size=60, workers=4), pace=gate).run()

    told, untold = run(True), run(False)
    assert told.rewritten == untold.rewritten == 60
    assert told.pace["latency_ms"] < 25 and untold.pace["latency_ms"] >= 50


# --- a cluster's later CRDs start from what its earlier ones learned -------------------------------------------

def test_a_limiter_started_from_a_learned_pace_begins_at_its_limit_and_baseline_and_still_cuts_on_slower_writes():
    clock = FakeClock()
    settings = PaceSettings(probe_every=1e9)
    lim = GradientLimiter(8, settings=settings, clock=clock, start=Learned(limit=6.0, baseline=0.002))
    assert lim.permits == 6 and lim.baseline == pytest.approx(0.002) and lim.window_size() == 12
    feed(lim, clock, 0.002)
    assert lim.permits == 7 and lim.backoffs == 0  # same latency as the earlier CRD: keeps climbing from there
    feed(lim, clock, 0.006)  # this CRD's writes are slower: the carried baseline makes the first window cut
    assert lim.permits < 7 and lim.backoffs == 1
    snap = lim.snapshot()
    assert snap["started_from"] == {"limit": 6.0, "baseline_ms": 2.0} and snap["max_limit_reached"] == 7


def test_the_carried_baseline_ages_out_like_any_window_median():
    clock = FakeClock()
    lim = GradientLimiter(8, settings=PaceSettings(probe_every=1e9, baseline_age=60.0), clock=clock,
                          start=Learned(limit=4.0, baseline=0.001))
    clock.t += 61.0
    feed(lim, clock, 0.003)
    assert lim.baseline == pytest.approx(0.003)


def test_learned_is_none_before_any_window_and_in_max_mode_and_survives_a_round_trip():
    lim, clock = limiter(workers=8)
    assert lim.learned() is None
    feed(lim, clock, 0.002, windows=3)
    learned = lim.learned()
    assert learned == Learned(limit=4.0, baseline=pytest.approx(0.002))
    assert Learned.from_dict(learned.to_dict()) == Learned(4.0, pytest.approx(0.002))
    fixed, fixed_clock = limiter(workers=8, adaptive=False)
    feed(fixed, fixed_clock, 0.002)
    assert fixed.learned() is None
    max_started = GradientLimiter(8, adaptive=False, start=Learned(2.0, 0.002))
    assert max_started.permits == 8 and max_started.started_from is None
    for bad in (None, "x", {}, {"limit": 0, "baseline_ms": 2}, {"limit": 3, "baseline_ms": "n/a"},
                {"limit": 3, "baseline_ms": 0}):
        assert Learned.from_dict(bad) is None, bad


def test_pace_carry_hands_each_pass_what_the_last_one_that_wrote_learned():
    carry = PaceCarry("gentle", 8)
    first = carry.gate()
    assert first.limiter.permits == 1 and first.limiter.started_from is None
    clock = FakeClock()
    first.limiter.clock = clock
    feed(first.limiter, clock, 0.002, windows=4)
    carry.keep(first)
    assert carry.learned == Learned(5.0, pytest.approx(0.002))
    idle = carry.gate()   # a CRD with nothing to write: learns nothing, forgets nothing
    carry.keep(idle)
    assert carry.gate().limiter.permits == 5 and carry.learned.limit == 5.0


def never_congested(monkeypatch):
    """run_migration's gates with a huge tolerance: the limiter never sees congestion, so a pass climbs to every
    worker whatever the load of the machine running the test."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.run import migration_run

    class Calm(PaceCarry):
        def gate(self, probe=None):
            return pace_gate(self.mode, self.workers, settings=PaceSettings(tolerance=1e6), start=self.learned,
                             probe=probe)

    monkeypatch.setattr(migration_run, "PaceCarry", Calm)


def test_a_clusters_second_crd_starts_at_the_pace_the_first_one_reached(monkeypatch):
    """Two CRDs in one run_migration: the second pass's gate starts where the first one's ended (fake apiserver).
    The limiter never sees congestion here (a huge tolerance), so the first pass climbs to every worker whatever
    the load of the machine running the test, and the second must start there, not at one write in flight."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (
        ProgressFile, RunOptions, run_migration)
    never_congested(monkeypatch)
    second = "widgets.stable.example.com"
    c, _state = slow_cluster(300, per_in_flight=0.0, base=0.001)
    c.add_crd(name=second)
    c.add_objects(second, 100, namespaces=("a",))
    # the write latency's own limiter is carried here; the latency probe's slower growth is tested on its own
    options = RunOptions(restore=RestoreOptions(page_size=100, workers=8), lease_wait=0, latency_budget=0)
    res = run_migration(c, [get_crd(c, NAME), get_crd(c, second)], options, {c.base_url: c},
                        ProgressFile(None, "t", False, print))
    one, two = (e["pace"] for e in res.crds)
    assert res.crds[1]["rewritten"] == 100 and one["started_from"] is None and one["min_limit"] == 1
    assert one["final_limit"] == 8 and two["started_from"] == {"limit": 8.0, "baseline_ms": pytest.approx(one["baseline_ms"], abs=0.006)}
    assert two["min_limit"] == 8   # never back to one write in flight
    assert res.pace_learned == {"limit": 8.0, "baseline_ms": pytest.approx(two["baseline_ms"], abs=0.006)}


def test_a_confirming_pass_writes_at_the_pace_its_pass_reached(monkeypatch):
    """Without etcd the proof is a confirming pass of no-op writes: it starts where the pass before it ended (the
    same latency probe holding it), not again at one write in flight; its round says at what pace it wrote."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (
        ProgressFile, RunOptions, run_migration)
    never_congested(monkeypatch)
    c, _state = slow_cluster(300, per_in_flight=0.0, base=0.001)
    options = RunOptions(restore=RestoreOptions(page_size=100, workers=8), lease_wait=0, latency_budget=0)
    res = run_migration(c, [get_crd(c, NAME)], options, {c.base_url: c}, ProgressFile(None, "t", False, print))
    crd = res.crds[0]
    assert crd["rewritten"] == 300 and crd["pace"]["final_limit"] == 8 and crd["proof"]["ok"], crd["proof"]
    first = crd["proof"]["passes"][0]
    assert first["confirmed"] == 300 and first["changed"] == 0
    assert first["pace"] == {"mode": "gentle", "min_limit": 8, "max_limit_reached": 8, "probe_cuts": 0}, first

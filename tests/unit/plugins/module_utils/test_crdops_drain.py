# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Drain before the proof: the window's start (flip on the apiserver's clock plus its admission margin, or the barrier's
catch-up, or a lag an earlier run saw), the wait, stop, the Lease announcement a second run waits for, and the barrier
that polls nobody (a refusal)."""
from __future__ import annotations

import json
import threading
import time

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.barrier import (
    BarrierPlan, BarrierResult, wait_for_storage_version)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.drain import Drain, spec_changed_at
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import (
    CrdOpsError, OutcomeError, RefusalError)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.lag_note import LAGGED_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import RunOptions, before_writes
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.pass_lease import PassLease
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.stop import StopSignal
from tests.unit.crdops_fakes import Clock, FakeCluster, _micro_time

NAME = "crontabs.stable.example.com"


def flipped(c: FakeCluster, seconds_ago: float) -> None:
    """The CRD's spec last changed ``seconds_ago`` by the fake apiserver's clock; status entries do not count."""
    c.crds[NAME]["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Apply", "time": "2020-01-01T00:00:00Z", "fieldsV1": {"f:spec": {}}},
        {"manager": "helm", "operation": "Update", "time": _micro_time(c.now - seconds_ago)[:19] + "Z",
         "fieldsV1": {"f:spec": {"f:versions": {}}}},
        {"manager": "kube-apiserver", "operation": "Update", "subresource": "status", "time": _micro_time(c.now)[:19] + "Z",
         "fieldsV1": {"f:status": {}}}]


def cluster(seconds_ago: float) -> FakeCluster:
    c = FakeCluster()
    c.add_crd()
    flipped(c, seconds_ago)
    return c


def test_the_flip_time_is_the_latest_spec_owner_not_a_status_write():
    c = cluster(10)
    assert spec_changed_at(c.crds[NAME]) == pytest.approx(c.now - 10, abs=1)
    assert spec_changed_at({"metadata": {"managedFields": [{"fieldsV1": {"f:status": {}}, "time": "2026-01-01T00:00:00Z"}]}}) is None


# the flip's stamp + 1 s of grain + 10 s for its admission and commit (ADMISSION_MARGIN_S) + the 65 s window
@pytest.mark.parametrize("ago,waits", [(3, 73), (64, 12), (500, 0)])
def test_the_window_counts_from_the_flip_on_the_apiserver_clock(ago, waits):
    c, clock = cluster(ago), Clock()
    result = Drain(c, 65, clock=clock, sleep=clock.sleep).wait(NAME)
    assert result.anchor == "flip" and result.waited_s == pytest.approx(waits, abs=1.01)  # one second of grain


def test_a_late_barrier_catch_up_moves_the_window_and_no_spec_owner_waits_it_whole():
    c, clock = cluster(500), Clock()
    result = Drain(c, 65, clock=clock, sleep=clock.sleep).wait(NAME, caught_up_at=clock() - 5)
    assert result.anchor == "barrier" and result.waited_s == pytest.approx(60)
    c.crds[NAME]["metadata"]["managedFields"] = []
    result = Drain(c, 65, clock=clock, sleep=clock.sleep).wait(NAME)
    assert result.anchor == "unknown" and result.waited_s == pytest.approx(65) and "unknown" in result.note


def test_a_stop_request_ends_the_drain_at_once_and_nothing_is_written():
    c, stop = cluster(0), StopSignal()
    threading.Timer(0.2, stop.request, ("stopped by signal SIGTERM",)).start()
    with pytest.raises(OutcomeError) as err:
        Drain(c, 65, stop=stop).wait(NAME)
    assert err.value.kind == "stopped" and "SIGTERM" in str(err.value) and "draining" in str(err.value)
    assert c.writes() == []


def test_a_second_run_waits_for_the_holders_drain_then_its_lease_wait():
    c = cluster(0)
    holder = PassLease(c, NAME, identity="run-a").acquire(0)
    holder.announce_drain(50)
    clock = Clock()

    def sleep(s):  # the apiserver's clock moves with the waiter's
        clock.sleep(s)
        c.now += s
        holder.renew_once()  # the holder stays alive
    waiter = PassLease(c, NAME, identity="run-b", clock=clock, sleep=sleep)
    with pytest.raises(Exception) as err:
        waiter.acquire(10)
    assert "run-a" in str(err.value) and 59 <= clock.t - 100 <= 63  # 50 s of drain, then the 10 s of lease_wait
    holder.end_drain()
    assert "migration.crdops.io/draining-until" not in c.leases[("default", "crdops-pass-" + NAME)]["metadata"]["annotations"]


def test_a_barrier_with_nothing_to_poll_is_a_refusal():
    c = cluster(0)
    with pytest.raises(RefusalError) as err:
        wait_for_storage_version({}, get_crd(c, NAME), timeout=5)
    assert "no apiserver to poll" in str(err.value) and NAME in str(err.value)


def test_the_barrier_says_when_the_last_lagging_apiserver_caught_up():
    a, lagging = cluster(0), cluster(0)
    lagging.stale_storage_view[NAME] = "v1"
    clock = Clock()

    def sleep(s):
        clock.sleep(s)
        if clock.t >= 103:
            lagging.stale_storage_view.clear()
    result = wait_for_storage_version({"a": a, "b": lagging}, get_crd(a, NAME), timeout=30, clock=clock, sleep=sleep)
    assert result.lagged == ["b"] and result.caught_up_at == pytest.approx(103) and result.to_dict()["caught_up_after_s"] == 3
    on_time = wait_for_storage_version({"a": a}, get_crd(a, NAME), timeout=30, clock=clock, sleep=clock.sleep)
    assert on_time.caught_up_at is None  # nobody lagged: the flip time alone starts the window


def test_a_stop_request_ends_the_barrier_wait():
    a, lagging = cluster(0), cluster(0)
    lagging.stale_storage_view[NAME] = "v1"
    stop = StopSignal()
    stop.request("stopped by signal SIGINT")
    with pytest.raises(OutcomeError) as err:
        wait_for_storage_version({"a": a, "b": lagging}, get_crd(a, NAME), timeout=600, stop=stop)
    assert err.value.kind == "stopped" and "SIGINT" in str(err.value)


def test_the_window_counts_from_the_flips_commit_not_from_its_stamp():
    """The managedFields time is stamped before the CRD write's admission and commit: a flip stamped 70 s ago may
    have committed 10 s later, so 6 s of the window are left. A barrier that ran for this generation bounds the commit
    from above (the CRD it was given already had it): then the window counts from the barrier's start."""
    c, clock = cluster(70), Clock()
    result = Drain(c, 65, clock=clock, sleep=clock.sleep).wait(NAME)
    assert result.anchor == "flip" and result.waited_s == pytest.approx(6, abs=1.01), result
    assert result.admission_margin_s == 10
    c, clock = cluster(30), Clock()
    barrier = BarrierResult(crd=NAME, storage_version="v2", generation=get_crd(c, NAME).generation,
                            started_at=clock() - 27)  # the role's barrier: 3 s after its flip
    result = Drain(c, 65, clock=clock, sleep=clock.sleep).wait(NAME, barrier=barrier)
    assert result.waited_s == pytest.approx(38, abs=0.01) and result.admission_margin_s == pytest.approx(2, abs=1)


def test_a_flip_stamped_by_an_apiserver_whose_clock_is_behind_is_not_taken_as_older():
    """Apiserver b's clock is 20 s behind a's; b took the flip 50 s ago and stamped it by its clock; the drain reads
    the CRD through a. Compared with a's Date alone the flip looks 70 s old and nothing is waited; with the clocks
    the barrier read (b's among them) it is 50 s old, and what is left of the window is waited."""
    a, b, clock = cluster(0), cluster(0), Clock()
    b.now = a.now - 20
    flipped(a, 70)  # b's stamp, 50 s ago by b's clock, is 70 s ago by a's
    plan = BarrierPlan({"a": a, "b": b})
    barrier = wait_for_storage_version(plan, get_crd(a, NAME), timeout=5, clock=clock, sleep=clock.sleep)
    assert barrier.clock_offsets["a"] - barrier.clock_offsets["b"] == pytest.approx(20, abs=1)
    result = Drain(a, 65, clock=clock, sleep=clock.sleep).wait(NAME, barrier=barrier)
    # committed by min(stamp + 1 + 10, barrier start) = 39 s ago; 65 - 39 = 26 s left
    assert result.waited_s == pytest.approx(26, abs=1.01) and result.clock_allowance_s == pytest.approx(20, abs=1)
    # a barrier that could not read every apiserver's clock (settle-fallback) allows SKEW_ALLOWANCE_S more
    settle = wait_for_storage_version(BarrierPlan({"a": a}, mode="settle-fallback"), get_crd(a, NAME), timeout=5,
                                      clock=clock, sleep=clock.sleep)
    result = Drain(a, 65, clock=clock, sleep=clock.sleep).wait(NAME, barrier=settle)
    assert result.clock_allowance_s == pytest.approx(5, abs=1)


def options(**kw):
    return RunOptions(restore=RestoreOptions(), confirm_passes=0, skip_current=False, **kw)


def test_a_lag_seen_by_an_earlier_run_drains_a_whole_window_after_the_rerun_sees_every_member_current():
    """Run 1: member b lags, the barrier times out, the lag is noted on the CRD. b catches up before run 2's first
    poll, and the flip is long past: run 2 still drains a whole window from its first all-current round (b swapped its
    storage at some unknown moment since run 1), reports why, and then removes the note."""
    a, b = cluster(500), cluster(500)
    b.stale_storage_view[NAME] = "v1"
    plan = BarrierPlan({"https://a": a, "https://b": b})
    with pytest.raises(CrdOpsError) as err:
        before_writes(a, get_crd(a, NAME), options(barrier_timeout=0.4, drain_window=2), plan, None)
    assert "https://b" in str(err.value) and LAGGED_ANNOTATION in str(err.value), str(err.value)
    note = json.loads(a.crds[NAME]["metadata"]["annotations"][LAGGED_ANNOTATION])
    assert note["members"] == ["https://b"] and note["storageVersion"] == "v2" and note["seenAt"], note
    assert note["crdUid"] == get_crd(a, NAME).uid
    b.stale_storage_view.clear()
    started = time.monotonic()
    barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=2), plan, None)
    assert barrier["lagged"] == [] and barrier["lagged_before"] == ["https://b"], barrier
    assert drain["anchor"] == "earlier lag" and drain["lagged_before"] == ["https://b"], drain
    assert drain["waited_s"] == pytest.approx(2, abs=0.3) and time.monotonic() - started >= 1.9, drain
    assert LAGGED_ANNOTATION not in a.crds[NAME]["metadata"]["annotations"]  # removed once the drain was over
    _barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=2), plan, None)
    assert drain["anchor"] == "flip" and drain["waited_s"] == 0, drain  # the next run: nothing left to wait


def test_a_lag_note_for_another_storage_version_or_crd_is_not_honoured_and_is_removed():
    a = cluster(500)
    a.crds[NAME]["metadata"].setdefault("annotations", {})[LAGGED_ANNOTATION] = json.dumps(
        {"crdUid": get_crd(a, NAME).uid, "storageVersion": "v1", "members": ["https://b"], "seenAt": "x"})
    barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=2), {"https://a": a}, None)
    assert barrier["lagged_before"] == [] and drain["waited_s"] == 0, drain
    assert LAGGED_ANNOTATION not in a.crds[NAME]["metadata"]["annotations"]

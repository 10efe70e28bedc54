# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Drain before the proof: the window's start (flip on the apiserver's clock, or the barrier's catch-up), the wait,
stop, the Lease announcement a second run waits for, and the barrier that polls nobody (a refusal)."""
from __future__ import annotations

import threading

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.barrier import wait_for_storage_version
from ansible_collections.crdops.migration.plugins.module_utils._crdops.drain import Drain, spec_changed_at
from ansible_collections.crdops.migration.plugins.module_utils._crdops.errors import OutcomeError, RefusalError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.pass_lease import PassLease
from ansible_collections.crdops.migration.plugins.module_utils._crdops.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.stop import StopSignal
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


@pytest.mark.parametrize("ago,waits", [(3, 63), (64, 2), (500, 0)])
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

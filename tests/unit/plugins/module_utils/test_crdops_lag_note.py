# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lag note is written in the barrier round that first sees a member lag, not only when a pass fails (issue #38
item 1): a run killed inside its drain runs no exception path, and the next run, finding every member current and the
flip old, would drain nothing. It is removed only after a complete drain, and only as this run last saw it."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.barrier import (
    BarrierPlan, wait_for_storage_version)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.lag_note import (
    LAGGED_ANNOTATION, LagKeeper, LagNote)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import RunOptions, before_writes
from tests.unit.crdops_fakes import Clock, FakeCluster, status
from tests.unit.plugins.module_utils.test_crdops_drain import NAME, cluster

A, B = "https://a", "https://b"


class Killed(BaseException):
    """SIGKILL of the run: no ``except`` of the engine sees it, no exception path runs."""


class FakeLease:
    """What before_writes uses of a pass Lease; ``on_drain(seconds)`` runs when the drain is announced."""

    def __init__(self, on_drain=None):
        self.on_drain = on_drain
        self.announced: list[float] = []

    def lost_reason(self):
        return None

    def announce_drain(self, seconds):
        self.announced.append(seconds)
        if self.on_drain is not None:
            self.on_drain(seconds)

    def end_drain(self):
        pass


def options(**kw):
    return RunOptions(restore=RestoreOptions(), confirm_passes=0, skip_current=False, **kw)


def note_of(c: FakeCluster):
    text = (c.crds[NAME]["metadata"].get("annotations") or {}).get(LAGGED_ANNOTATION)
    return json.loads(text) if text else None


def lags_for(b: FakeCluster, polls: int) -> None:
    """Apiserver ``b`` reports the old storage version to its first ``polls`` discovery reads, then the new one."""
    b.stale_storage_view[NAME] = "v1"
    seen = []

    def hook(method, path, _q, _body):
        if method == "GET" and path.startswith("/apis/stable.example.com/"):
            seen.append(path)
            if len(seen) > polls:
                b.stale_storage_view.clear()
        return None
    b.hooks.append(hook)


def test_the_barrier_calls_on_lag_in_the_round_that_first_sees_a_member_lag_once_per_member():
    a, b, c = cluster(0), cluster(0), cluster(0)
    b.stale_storage_view[NAME] = "v1"
    clock = Clock()
    calls = []

    def sleep(s):
        clock.sleep(s)
        if clock.t >= 102:
            c.stale_storage_view[NAME] = "v1"  # c lags from the fifth round on
        if clock.t >= 104:
            b.stale_storage_view.clear()
            c.stale_storage_view.clear()

    def on_lag(members):
        calls.append((clock.t, list(members)))
    result = wait_for_storage_version({"a": a, "b": b, "c": c}, get_crd(a, NAME), timeout=30, clock=clock,
                                      sleep=sleep, on_lag=on_lag)
    assert calls == [(100, ["b"]), (102, ["c"])] and result.lagged == ["b", "c"], calls
    assert result.caught_up_at == pytest.approx(104)


def test_a_run_killed_inside_its_drain_leaves_the_note_its_barrier_wrote():
    """Run 1: b lags in the first round, catches up, the drain starts and the run is killed (no exception path).
    The note is on the CRD all the same. Run 2 finds every member current and the flip long past: it drains a whole
    window from its first round (anchor earlier lag), then removes the note. Before, run 2 drained nothing."""
    a, b = cluster(500), cluster(500)
    lags_for(b, 1)
    plan = BarrierPlan({A: a, B: b})
    at_drain = []

    def kill(_seconds):
        at_drain.append(note_of(a))
        raise Killed()
    with pytest.raises(Killed):
        before_writes(a, get_crd(a, NAME), options(drain_window=5), plan, FakeLease(kill))
    assert at_drain[0] is not None and at_drain[0]["members"] == [B], at_drain  # written before the drain began
    note = note_of(a)
    assert note["members"] == [B] and note["storageVersion"] == "v2" and note["crdUid"] == get_crd(a, NAME).uid, note
    lease = FakeLease()
    barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=0.6), plan, lease)
    assert barrier["lagged"] == [] and barrier["lagged_before"] == [B], barrier
    assert drain["anchor"] == "earlier lag" and drain["waited_s"] == pytest.approx(0.6, abs=0.3), drain
    assert lease.announced and note_of(a) is None  # drained, then removed


def test_a_complete_drain_removes_the_note_this_run_widened():
    """An earlier run's note names c; this run sees b lag: the note is widened in the barrier (the text differs from
    the one read before it) and that text is removed after the drain; the next run drains nothing."""
    a, b = cluster(500), cluster(500)
    a.crds[NAME]["metadata"].setdefault("annotations", {})[LAGGED_ANNOTATION] = LagNote(
        get_crd(a, NAME).uid, "v2", ["https://c"], "Thu, 01 Jan 2026 00:00:00 GMT").to_annotation()
    lags_for(b, 2)
    plan = BarrierPlan({A: a, B: b})
    at_drain = []
    lease = FakeLease(lambda _s: at_drain.append(note_of(a)))
    barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=0.6), plan, lease)
    assert barrier["lagged"] == [B] and barrier["lagged_before"] == ["https://c"], barrier
    assert at_drain == [dict(at_drain[0], members=[B, "https://c"])], at_drain
    assert note_of(a) is None and drain["note"] is None, drain
    _barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=0.6), plan, None)
    assert drain["anchor"] == "flip" and drain["waited_s"] == 0, drain


def test_a_note_the_barrier_could_not_write_is_written_when_the_pass_ends_early():
    """The write in the barrier round fails (HTTP 500): the barrier goes on; when it times out, the exception path
    writes the note and says so."""
    a, b = cluster(500), cluster(500)
    b.stale_storage_view[NAME] = "v1"
    failures = []

    def fail_once(method, path, _q, _body):
        if method == "PATCH" and path.endswith("/" + NAME) and not failures:
            failures.append(path)
            return status(500, "etcdserver: request timed out", "InternalError")
        return None
    a.hooks.append(fail_once)
    with pytest.raises(CrdOpsError) as err:
        before_writes(a, get_crd(a, NAME), options(barrier_timeout=0.4, drain_window=2), BarrierPlan({A: a, B: b}),
                      None)
    assert failures and note_of(a)["members"] == [B], note_of(a)
    assert "noted on the CRD (%s)" % LAGGED_ANNOTATION in str(err.value), str(err.value)


def test_the_keeper_writes_nothing_in_check_mode_and_leaves_a_note_another_run_rewrote():
    a = cluster(500)
    crd = get_crd(a, NAME)
    dry = LagKeeper(a, crd, check_mode=True)
    dry.seen([B])
    assert dry.keep([B]) and dry.forget() is None and a.writes() == []
    keeper = LagKeeper(a, crd)
    keeper.seen([B])
    assert keeper.noted == [B] and keeper.covers([B]) and note_of(a)["members"] == [B]
    writes = len(a.writes())
    keeper.seen([B])  # already noted: no second write
    assert len(a.writes()) == writes
    a.crds[NAME]["metadata"]["annotations"][LAGGED_ANNOTATION] = LagNote(
        crd.uid, "v2", [B, "https://c"], "Thu, 01 Jan 2026 00:00:00 GMT").to_annotation()
    why = keeper.forget()  # the note is not the text this run wrote: it stays
    assert why and LAGGED_ANNOTATION in why and note_of(a)["members"] == [B, "https://c"], why


def test_a_drain_window_of_0_leaves_the_note_for_a_run_that_drains():
    a, b = cluster(500), cluster(500)
    lags_for(b, 1)
    barrier, drain, _revision = before_writes(a, get_crd(a, NAME), options(drain_window=0), BarrierPlan({A: a, B: b}),
                                              None)
    assert barrier["lagged"] == [B] and drain["anchor"] == "none", drain
    assert note_of(a)["members"] == [B] and LAGGED_ANNOTATION in drain["note"], drain


def test_a_note_write_that_raises_does_not_stop_the_barrier():
    """A transport error (not an HTTP answer) in the barrier's write is kept as the keeper's problem."""
    a = cluster(500)

    def broken(method, _path, _q, _body):
        if method == "PATCH":
            raise CrdOpsError("connection reset by peer")
        return None
    a.hooks.append(broken)
    keeper = LagKeeper(a, get_crd(a, NAME))
    keeper.seen([B])
    assert keeper.problem and "connection reset" in keeper.problem and not keeper.covers([B])
    assert "connection reset" in (keeper.keep([B]) or "")

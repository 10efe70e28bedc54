# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pass Lease (acquire, conflict, takeover by the apiserver's clock, races, renewal, loss, release) and its
use by a run: one pass per CRD at a time, none in check mode, writes stop when the Lease is lost."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import events
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import (
    ProgressFile, RunOptions, run_migration)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.pass_lease import (
    LeaseError, LeaseHeldError, PassLease, lease_name)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, migrate_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import Clock, FakeCluster, status

NAME = "crontabs.stable.example.com"
KEY = ("default", "crdops-pass-" + NAME)


def cluster(n=6):
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, n, namespaces=("a",))
    return c


def lease(c, who, clock=None, **kw):
    clock = clock or Clock()
    return PassLease(c, NAME, identity=who, clock=clock, sleep=clock.sleep, **kw)


def test_lease_name_is_stable_short_and_distinct_for_long_crd_names():
    assert lease_name(NAME) == "crdops-pass-" + NAME
    a, b = "x" * 50 + ".one.example.com", "x" * 50 + ".two.example.com"
    assert len(lease_name(a)) == 63 and lease_name(a) == lease_name(a) and lease_name(a) != lease_name(b)
    assert not lease_name("a" * 50 + "-.b" * 10).split("-")[-2].endswith(".")


def test_acquire_creates_the_lease_in_server_time_and_release_deletes_it():
    c = cluster()
    a = lease(c, "run-a").acquire(0)
    body = c.leases[KEY]
    assert body["spec"]["holderIdentity"] == "run-a" and body["spec"]["leaseDurationSeconds"] == 30
    assert body["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "crdops.migration"
    # renewTime is the apiserver's clock (the fake's Date header), not the local one
    assert body["spec"]["renewTime"].startswith("2026-12-01T")  # fake now = 1796099600 = 2026-12-01T...
    assert a.release() is None and KEY not in c.leases


def test_a_live_holder_keeps_a_second_run_out_and_it_fails_naming_the_holder():
    c = cluster()
    lease(c, "crdops@host-a/pid-1/aaaa").acquire(0)
    c.now += 12  # 12 s later by the apiserver's clock: still live (30 s)
    clock = Clock()
    b = lease(c, "run-b", clock)
    with pytest.raises(LeaseHeldError) as err:
        b.acquire(6)
    msg = str(err.value)
    assert "crdops@host-a/pid-1/aaaa" in msg and "last renewed 2026-12-01T" in msg and "12 s ago" in msg
    assert "waited 6 s (lease_wait 6)" in msg and err.value.kind == "lease_held" and NAME in msg
    assert clock.t == pytest.approx(106.0)  # it waited lease_wait on its own clock, polling
    assert c.leases[KEY]["spec"]["holderIdentity"] == "crdops@host-a/pid-1/aaaa"


@pytest.mark.parametrize("wait", [0, -5])
def test_lease_wait_zero_or_negative_fails_at_once(wait):
    c = cluster()
    lease(c, "run-a").acquire(0)
    clock = Clock()
    with pytest.raises(LeaseHeldError) as err:
        lease(c, "run-b", clock).acquire(wait)
    assert clock.t == 100.0 and "(lease_wait 0)" in str(err.value)


def test_a_lease_not_renewed_for_its_duration_is_taken_over():
    c = cluster()
    lease(c, "run-a").acquire(0)
    c.now += 31  # run-a was killed: renewTime + 30 s is past by the apiserver's clock
    b = lease(c, "run-b").acquire(0)
    spec = c.leases[KEY]["spec"]
    assert spec["holderIdentity"] == "run-b" and spec["leaseTransitions"] == 1
    assert "holder run-a" in b.took_over_from and "31 s ago" in b.took_over_from


def test_expiry_is_judged_by_the_apiserver_clock_not_a_skewed_local_clock():
    c = cluster()
    lease(c, "run-a").acquire(0)
    import time as _t
    skewed = PassLease(c, NAME, identity="run-b", wall=lambda: _t.time() + 3600)  # local clock 1 h ahead
    with pytest.raises(LeaseHeldError):
        skewed.acquire(0)


def test_waiting_run_takes_over_once_the_killed_holder_expires():
    c = cluster()
    lease(c, "run-a").acquire(0)
    clock = Clock()

    def sleep(s):  # the apiserver's clock moves with the waiter's
        clock.sleep(s)
        c.now += s
    b = PassLease(c, NAME, identity="run-b", clock=clock, sleep=sleep).acquire(60)
    assert c.leases[KEY]["spec"]["holderIdentity"] == "run-b"
    assert 30 <= b.waited_s <= 32.5  # polled every 2 s until renewTime + 30 s was past


def test_two_contenders_for_an_expired_lease_cannot_both_win():
    c = cluster()
    lease(c, "run-a").acquire(0)
    c.now += 40
    stale_view = c.request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + KEY[1])
    lease(c, "run-b").acquire(0)  # b takes over first
    served = []

    def old_view(method, path, q, body):  # c read the Lease before b's takeover
        if method == "GET" and path.endswith(KEY[1]) and not served:
            served.append(1)
            return stale_view
    c.hooks.append(old_view)
    with pytest.raises(LeaseHeldError) as err:
        lease(c, "run-c").acquire(0)
    assert "run-b" in str(err.value)
    assert c.leases[KEY]["spec"]["holderIdentity"] == "run-b"
    puts = [m for m, p, _q in c.calls if m == "PUT" and p.endswith(KEY[1])]
    assert len(puts) == 2  # b's takeover, c's refused one (409)


def test_create_race_409_means_the_other_run_holds_it():
    c = cluster()
    raced = []

    def create_first(method, path, q, body):  # another run creates the Lease between our GET and POST
        if method == "POST" and path.endswith("/leases") and not raced:
            raced.append(1)
            lease(c, "run-other").acquire(0)
    c.hooks.append(create_first)
    with pytest.raises(LeaseHeldError) as err:
        lease(c, "run-me").acquire(0)
    assert "run-other" in str(err.value)


def test_renewal_moves_renew_time_and_a_takeover_marks_the_lease_lost():
    c = cluster()
    a = lease(c, "run-a").acquire(0)
    rv = c.leases[KEY]["metadata"]["resourceVersion"]
    c.now += 10
    assert a.renew_once() and a.renewals == 1 and c.leases[KEY]["metadata"]["resourceVersion"] != rv
    assert a.lost_reason() is None
    c.leases[KEY]["spec"]["holderIdentity"] = "run-b"  # someone else wrote it (takeover)
    c.leases[KEY]["metadata"]["resourceVersion"] = c.next_rv()
    assert not a.renew_once()
    assert "lost" in a.lost_reason() and "HTTP 409" in a.lost_reason()
    assert a.release() is None and c.leases[KEY]["spec"]["holderIdentity"] == "run-b"  # not deleted


def test_renewal_failing_until_close_to_expiry_marks_the_lease_lost():
    c = cluster()
    clock = Clock()
    a = lease(c, "run-a", clock).acquire(0)

    def down(method, path, q, body):
        if "leases" in path:
            raise OSError("connection refused")
    c.hooks.append(down)
    clock.t += 20
    assert not a.renew_once() and a.lost_reason() is None  # 20 s: still ours
    clock.t += 6
    assert "not renewed for 26 s" in a.lost_reason()  # > 30 - 5 s margin: stop writing before anyone may take over


def test_forbidden_lease_names_the_rbac_to_grant():
    c = cluster()
    c.hooks.append(lambda m, p, q, b: status(403, 'leases.coordination.k8s.io is forbidden: User "x" cannot get',
                                             "Forbidden") if "leases" in p else None)
    with pytest.raises(LeaseError) as err:
        lease(c, "run-a").acquire(0)
    assert "grant get, create, update and delete on leases.coordination.k8s.io in namespace default" in str(err.value)
    assert err.value.status == 403


def _run(c, check_mode=False, **kw):
    kw = dict(dict(drain_window=0, confirm_passes=0), **kw)  # the drain and the proof have tests of their own
    options = RunOptions(restore=RestoreOptions(page_size=2, workers=1, check_mode=check_mode), **kw)
    return run_migration(c, [get_crd(c, NAME)], options, {c.base_url: c}, ProgressFile(None, "t", check_mode, print))


def test_a_run_holds_the_lease_during_its_pass_and_releases_it():
    c = cluster()
    held = []

    def watch(method, path, q, body):
        if method == "PATCH" and "/namespaces/a/" in path:
            held.append(KEY in c.leases)
    c.hooks.append(watch)
    res = _run(c)
    assert held == [True] * 6 and KEY not in c.leases
    assert res.crds[0]["lease"]["name"] == KEY[1] and res.crds[0]["lease"]["release_error"] is None
    assert res.crds[0]["rewritten"] == 6


def test_check_mode_takes_no_lease():
    c = cluster()
    res = _run(c, check_mode=True)
    assert not [p for _m, p, _q in c.calls if "/leases" in p] and res.crds[0]["lease"] is None


def test_a_second_run_fails_before_writing_and_leaves_a_warning_event():
    c = cluster()
    lease(c, "crdops@other/pid-7/bbbb").acquire(0)
    with pytest.raises(LeaseHeldError) as err:
        _run(c, lease_wait=0)
    assert "crdops@other/pid-7/bbbb" in str(err.value) and c.object_writes == 0
    assert [e["reason"] for e in c.events] == [events.PASS_FAILED] and c.events[0]["type"] == "Warning"


def test_a_lost_lease_stops_the_writes():
    c = cluster(10)
    crd = get_crd(c, NAME)
    r = migrate_crd(c, crd, RestoreOptions(page_size=2, workers=1),
                    stop_check=lambda: "pass lease default/x lost: test" if c.object_writes >= 3 else None)
    assert c.object_writes == 3 and not r.complete and r.aborted_kind == "lease_lost"
    assert "pass lease default/x lost" in r.aborted_reason and not r.record_written
    assert r.rewritten == 3 and r.listed - r.rewritten - r.not_attempted <= 2  # at most one more page listed


def test_the_run_rereads_the_crd_after_taking_the_lease():
    """A run that waited for another run's pass sees that pass's record and does not redo it."""
    c = cluster()
    stale = get_crd(c, NAME)
    _run(c)  # the other run's complete pass
    options = RunOptions(restore=RestoreOptions(page_size=2, workers=1), drain_window=0, confirm_passes=0)
    writes = c.object_writes
    res = run_migration(c, [stale], options, {c.base_url: c}, ProgressFile(None, "t", False, print))
    assert res.crds[0]["skipped"] and c.object_writes == writes
    assert json.loads(c.crds[NAME]["metadata"]["annotations"]["migration.crdops.io/storage-migration"])["listed"] == 6

"""A lag one run saw is honoured by the next (DESIGN invariant 12, issue #30 finding 3), on two real apiservers.

Run 1: apiserver B is stopped (SIGSTOP) while the storage flips through A, so it keeps the old storage; the barrier
times out naming B and notes the lag on the CRD. B resumes and catches up before run 2's first poll, and the flip is
older than the drain window and its admission margin: run 2 counts the window from its first all-current round all
the same (B swapped its storage at some unknown moment since run 1), says why, and removes the note afterwards.

A run killed inside its drain (issue #38 item 1) runs no exception path: the note is written in the barrier round
that first sees B lag, so the next run still drains after B, and an update B began with its old storage and held
across both runs commits before the next run's writes, not after them.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import time

import pytest

from tests.controlplane.cluster import admin_kube, start_ha_pair
from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import Kube, KubeError, objects_path
from tests.controlplane.webhook import Holds, WebhookServer, hold_updates_webhook
from tests.integration.modrun import ModuleRun, auth_args, run_module
from tests.integration.seed import Seeded, create_objects, crd_at, flip_storage, seed_old_objects
from tests.integration.test_drain import WEBHOOKS, HeldUpdates

NOTE = "migration.crdops.io/lagged"
WINDOW = 3


def test_a_rerun_drains_a_whole_window_after_a_member_the_last_run_saw_lagging(ha):
    a, b = admin_kube(ha, 0), ha.apiservers[1]
    both = [kas.url for kas in ha.apiservers]
    s = seed_old_objects(a, "lagnote.crdops.test", 20, flip=False)
    args = dict(auth_args(ha, "ha-0"), names=[s.crd_name], apiserver_endpoints=both, drain_window=WINDOW,
                barrier_settle=0, confirm_passes=0)
    os.kill(b.process.pid, signal.SIGSTOP)  # B keeps its old view of the CRD while stopped
    try:
        flip_storage(a, s, "v1beta1")
        flipped = time.monotonic()
        blocked = run_module("crd_storage_migrate", dict(args, barrier_timeout=3))
    finally:
        os.kill(b.process.pid, signal.SIGCONT)
    assert blocked["failed"] is True and b.url in blocked["msg"], blocked["msg"]
    crd = a.get_crd(s.crd_name)
    assert NOTE in (crd["metadata"].get("annotations") or {}), blocked["msg"]
    note = json.loads(crd["metadata"]["annotations"][NOTE])
    assert note["members"] == [b.url] and note["storageVersion"] == "v1beta1", note
    assert note["crdUid"] == crd["metadata"]["uid"] and note["seenAt"], note
    assert NOTE in blocked["msg"], blocked["msg"]
    assert scan_storage(ha.etcd_url, s.group, s.plural).counts == {s.old(): 20}  # nothing was written

    # B catches up before run 2 starts; the flip is then older than window + 10 s margin + 1 s grain
    b_kube = admin_kube(ha, 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not reports_current(b_kube, s):
        time.sleep(0.2)
    assert reports_current(b_kube, s), "B never reported the new storage version"
    time.sleep(max(0.0, flipped + WINDOW + 12 - time.monotonic()))
    passed = run_module("crd_storage_migrate", dict(args, barrier_timeout=30))
    assert not passed.get("failed"), passed.get("msg")
    entry = passed["crds"][0]
    assert entry["barrier"]["lagged"] == [] and entry["barrier"]["lagged_before"] == [b.url], entry["barrier"]
    drain = entry["drain"]
    assert drain["anchor"] == "earlier lag" and drain["lagged_before"] == [b.url], drain
    assert drain["waited_s"] >= WINDOW - 1, drain  # the barrier's own rounds count towards the window
    assert NOTE not in (a.get_crd(s.crd_name)["metadata"].get("annotations") or {})  # removed after the drain
    assert scan_storage(ha.etcd_url, s.group, s.plural).counts == {s.new(): 20}


def reports_current(kube, s) -> bool:
    """B's discovery names the storage version hash of v1beta1 (barrier.py's formula)."""
    want = base64.b64encode(hashlib.sha256(("%s/v1beta1/%s" % (s.group, s.kind)).encode()).digest()[:8]).decode()
    try:
        found = kube.get("/apis/%s/v1beta1" % s.group)
    except KubeError as exc:  # B does not serve v1beta1 yet right after SIGCONT: its 404 is "not current"
        if exc.status == 404:
            return False
        raise
    for resource in found.get("resources") or []:
        if resource.get("name") == s.plural:
            return resource.get("storageVersionHash") == want
    return False


# B learns every etcd change this late: longer than run 1 takes from the flip to its barrier's first round on a loaded
# machine, under the etcd client's 10 s keepalive timeout (delay_proxy.py)
LAG_S = 8.0
KILL_WINDOW = 4  # drain window of both runs: run 1 is killed inside it, run 2 lets the held update commit inside it
# drain.py's ADMISSION_MARGIN_S + CLOCK_GRAIN_S, and a second for the Date header's whole seconds
FLIP_MARGIN_S = 10 + 1 + 1
DRAINING = "migration.crdops.io/draining-until"
HELD = "obj-000003"


@pytest.fixture()
def lagging_ha(binaries, tmp_path):
    """Two apiservers on one etcd; B (ha-1) reaches etcd through a DelayProxy: it keeps answering, with an old view."""
    pair = start_ha_pair("ha", tmp_path / "ha", binaries, lagging_member=True)
    webhook = WebhookServer(pair.pki, tmp_path / "webhook").start()
    webhook.holds.max_hold = 28.0  # the webhook's timeoutSeconds is 30: the hold spans both runs
    try:
        yield pair, webhook
    finally:
        pair.etcd_link.lag(0)
        webhook.stop()
        pair.stop()


def lease_of(kube: Kube, s: Seeded) -> dict | None:
    try:
        return kube.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/crdops-pass-" + s.crd_name)
    except KubeError as exc:
        if exc.status == 404:
            return None
        raise


def draining(lease: dict | None) -> bool:
    return DRAINING in ((lease or {}).get("metadata", {}).get("annotations") or {})


def until_run_1_drains(a: Kube, b: Kube, s: Seeded, run: ModuleRun, flipped: float) -> tuple[dict, float, float]:
    """Poll run 1's pass Lease and B's discovery until run 1 announces its drain: (its Lease then, seconds after the
    flip it first held the Lease, seconds after the flip B first reported the new storage version)."""
    took = caught_up = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        assert run.proc.poll() is None, "run 1 ended before its drain:\n" + run.proc.stdout.read()
        lease = lease_of(a, s)
        now = time.monotonic() - flipped
        took = now if took is None and lease is not None else took
        caught_up = now if caught_up is None and reports_current(b, s) else caught_up
        if draining(lease) and caught_up is not None and took is not None:
            return lease, took, caught_up
        time.sleep(0.05)
    raise AssertionError("run 1 never announced a drain in its pass Lease")


def release_in_run_2s_drain(a: Kube, s: Seeded, run: ModuleRun, holds: Holds, gate: str, run_1: str) -> str:
    """Open ``gate`` when run 2 announces its drain in the Lease it took over from run 1, or else once run 2 has
    ended (the code before issue #38 drains nothing here: the held update then commits after its writes)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        lease = lease_of(a, s)
        if draining(lease) and lease["spec"]["holderIdentity"] != run_1:
            holds.open(gate)
            return "run 2's drain"
        if run.proc.poll() is not None:
            holds.open(gate)
            return "run 2's end"
        time.sleep(0.05)
    raise AssertionError("run 2 neither drained nor ended")


def hold_an_update_through_b(a: Kube, b: Kube, webhook: WebhookServer, group: str) -> tuple[Seeded, HeldUpdates]:
    """20 objects at v1alpha1 (release N-1, v1beta1 served too), and a label update of HELD begun through B and held
    by the webhook: it has B's old storage for its whole life. v1beta1 is served before the flip so that B's old
    storage reads what A writes after it: a retry of the update after a write of its object commits too, at
    v1alpha1."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    a.apply_crd(crd_at(s, "v1alpha1"))
    create_objects(a, s, "v1alpha1", 20, ["ns-a"])
    a.post(WEBHOOKS, hold_updates_webhook("hold-" + group.split(".")[0], webhook, group, s.plural))
    deadline = time.monotonic() + 30
    while True:  # B serves the CRD (and, a little after, knows the webhook)
        try:
            b.get(objects_path(group, "v1alpha1", s.plural), limit=1)
            break
        except KubeError as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    time.sleep(1.5)  # the admission plugins load webhook configurations from their informers
    updates = HeldUpdates(b, s, {HELD: "late"})
    webhook.holds.wait_held(1)
    return s, updates


def test_a_run_killed_inside_its_drain_leaves_the_lag_for_the_next_run(lagging_ha, group):
    """B sees etcd LAG_S late. An update of one object is begun through B before the storage flips through A and is
    held by a webhook (it keeps B's old storage for its whole life). Run 1's barrier sees B lag, B catches up, run 1
    announces its drain and is SIGKILLed inside it (a lost controller host). The flip is then let grow older than the
    window and its admission margin; run 2 (confirm_passes 0) finds every member current. It must still drain a whole
    window after its first all-current round, because run 1's note says B lagged: the held update is let go inside
    that drain and commits old-version bytes, which run 2's pass then re-stores. On the code before, the note was
    written only on the exception path: run 2 drained nothing, and the update, let go after run 2, left its object
    at the old version behind a record."""
    pair, webhook = lagging_ha
    a, b = admin_kube(pair, 0), admin_kube(pair, 1)
    b_url = pair.apiservers[1].url
    s, updates = hold_an_update_through_b(a, b, webhook, group)
    held = time.monotonic()
    pair.etcd_link.lag(LAG_S)
    flip_storage(a, s, "v1beta1")  # through A; B learns it LAG_S late
    flipped = time.monotonic()
    args = dict(auth_args(pair, "ha-0"), names=[s.crd_name], apiserver_endpoints=[k.url for k in pair.apiservers],
                drain_window=KILL_WINDOW, barrier_settle=0, barrier_timeout=60, confirm_passes=0,
                latency_budget=0)  # no idle probe: the hold must last from before the flip into run 2's drain
    try:
        run_1 = ModuleRun("crd_storage_migrate", args)
        lease, took, caught_up = until_run_1_drains(a, b, s, run_1, flipped)
        os.kill(run_1.proc.pid, signal.SIGKILL)  # inside the drain: no exception path, no end_drain, no release
        run_1.proc.wait(10)
        run_1.proc.communicate()
        run_1._forget()
        pair.etcd_link.lag(0)
        assert caught_up - took > 1.0, (
            "run 1 held its Lease %.1f s after the flip and B caught up at %.1f s: too late for run 1's barrier to see "
            "B lag (raise LAG_S)" % (took, caught_up))
        note_after_kill = (a.get_crd(s.crd_name)["metadata"].get("annotations") or {}).get(NOTE)
        # a dead run's Lease expires 30 s after its last renewal; the held update cannot wait that long (the webhook
        # timeout), so it is aged as that time would: run 2 takes it over as it would then
        a.merge_patch("/apis/coordination.k8s.io/v1/namespaces/default/leases/crdops-pass-" + s.crd_name,
                      {"spec": {"renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 120))}})
        # without the note, run 2 would drain nothing: the flip is older than window, admission margin and grain
        time.sleep(max(0.0, flipped + KILL_WINDOW + FLIP_MARGIN_S + 0.5 - time.monotonic()))
        started_2 = time.monotonic() - flipped
        run_2 = ModuleRun("crd_storage_migrate", dict(args, barrier_timeout=30))
        released_by = release_in_run_2s_drain(a, s, run_2, webhook.holds, "late", lease["spec"]["holderIdentity"])
        released = time.monotonic() - flipped
        out = run_2.result()
    finally:
        refused = updates.finish(webhook.holds)
        a.delete(WEBHOOKS + "/hold-" + group.split(".")[0])
    counts = dict(scan_storage(pair.etcd_url, s.group, s.plural).counts)
    timeline = ("update held from %.1f s; flip at 0 s; run 1 held its Lease at %.1f s, B current at %.1f s; run 2 "
                "started at %.1f s; the held update was let go at %.1f s (on %s)"
                % (held - flipped, took, caught_up, started_2, released, released_by))
    print(timeline)
    assert not out.get("failed"), out.get("msg")
    assert not refused and webhook.holds.released >= 1, (refused, timeline)  # the held update committed
    assert counts == {s.new(): 20}, (counts, timeline)  # before: {v1alpha1: 1, v1beta1: 19}, behind a record
    assert note_after_kill and json.loads(note_after_kill)["members"] == [b_url], (note_after_kill, timeline)
    entry = out["crds"][0]
    assert entry["lease"]["took_over_from"] and entry["record_written"], entry["lease"]
    assert entry["barrier"]["lagged_before"] == [b_url] and entry["barrier"]["lagged"] == [], entry["barrier"]
    assert entry["drain"]["anchor"] == "earlier lag" and entry["drain"]["waited_s"] >= KILL_WINDOW - 1, entry["drain"]
    assert released_by == "run 2's drain", timeline
    assert NOTE not in (a.get_crd(s.crd_name)["metadata"].get("annotations") or {})  # removed after run 2's drain
    labelled = a.get(objects_path(group, "v1beta1", s.plural, "ns-a", HELD))["metadata"].get("labels") or {}
    assert labelled.get(Holds.HOLD_LABEL) == "late-w1", labelled

"""A lag one run saw is honoured by the next (DESIGN invariant 12, issue #30 finding 3), on two real apiservers.

Run 1: apiserver B is stopped (SIGSTOP) while the storage flips through A, so it keeps the old storage; the barrier
times out naming B and notes the lag on the CRD. B resumes and catches up before run 2's first poll, and the flip is
older than the drain window and its admission margin: run 2 counts the window from its first all-current round all
the same (B swapped its storage at some unknown moment since run 1), says why, and removes the note afterwards.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import time


from tests.controlplane.cluster import admin_kube
from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import flip_storage, seed_old_objects

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

"""One pass per CRD at a time (DESIGN invariant 11), on a real kube-apiserver + etcd.

Two crd_storage_migrate runs started 1 s apart on one CRD: the second waits for the first's pass Lease and writes
only after it was released (or, with lease_wait 0, fails at once naming the holder). A SIGKILLed holder stops
renewing; the second run takes its Lease over within ~30 s and completes. Each test ends with an etcd read and
exact counts. Also: crd_storage_verify with a wrong etcd prefix reads zero keys and fails, naming it.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError
from tests.integration import reliability
from tests.integration.modrun import ModuleRun, auth_args, run_module, wait_for_progress
from tests.integration.seed import seed_old_objects

COUNT = 300
QPS = 20  # ~15 s per pass: long enough for a second run to arrive in the middle


def _lease_path(crd_name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/default/leases/crdops-pass-{crd_name}"


def _migrate(cluster, s, progress: Path, **extra) -> ModuleRun:
    return ModuleRun("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=50, workers=2,
                                                 max_qps=QPS, progress_file=str(progress), **extra))


def _done(progress: Path) -> int:
    try:
        return (json.loads(progress.read_text()).get("current") or {}).get("done", 0)
    except (OSError, ValueError):
        return 0


class Sampler(threading.Thread):
    """Every 50 ms: (monotonic time, Lease holder or None, writes done by run A, by run B)."""

    def __init__(self, kube, crd_name: str, progress_a: Path, progress_b: Path):
        super().__init__(daemon=True)
        self.kube, self.path, self.pa, self.pb = kube, _lease_path(crd_name), progress_a, progress_b
        self.samples: list[tuple[float, str | None, int, int]] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.05):
            try:
                holder = self.kube.get(self.path)["spec"].get("holderIdentity")
            except KubeError:
                holder = None
            self.samples.append((time.monotonic(), holder, _done(self.pa), _done(self.pb)))


def test_second_run_waits_for_the_first_and_never_interleaves(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, COUNT)
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    sampler = Sampler(kube, s.crd_name, pa, pb)
    sampler.start()
    a = _migrate(cluster, s, pa)
    wait_for_progress(pa, lambda st: (st.get("current") or {}).get("done", 0) >= 1)
    time.sleep(1)
    # force: the second run re-stores every object again (a real pass, not a skip), once it holds the Lease
    b = _migrate(cluster, s, pb, force=True, lease_wait=120)
    ra, rb = a.result(), b.result()
    sampler.stop.set()
    sampler.join()
    assert not ra.get("failed"), ra.get("msg")
    assert not rb.get("failed"), rb.get("msg")
    ea, eb = ra["crds"][0], rb["crds"][0]
    holder_a, holder_b = ea["lease"]["holder"], eb["lease"]["holder"]
    assert holder_a != holder_b and eb["lease"]["took_over_from"] is None and ea["lease"]["release_error"] is None
    # exact counts: A re-stored every object; B found every one already stored at the new version
    assert (ea["rewritten"], ea["unchanged"], ea["failed"]) == (COUNT, 0, 0)
    assert (eb["rewritten"], eb["unchanged"], eb["failed"], eb["skipped"]) == (0, COUNT, 0, None)
    # B's writes started only after A released: no sample shows B writing while A held the Lease
    holders = [h for _t, h, _a, _b in sampler.samples if h]
    assert holder_a in holders and holder_b in holders
    last_a = max(t for t, h, _a, _b in sampler.samples if h == holder_a)
    first_b_write = min(t for t, _h, _a, b_done in sampler.samples if b_done > 0)
    assert first_b_write > last_a
    assert not [x for x in sampler.samples if x[1] == holder_a and x[3] > 0]
    # and A's holding ran up to its end: A had written everything before B wrote anything
    assert all(a_done == COUNT for t, _h, a_done, _b in sampler.samples if t >= first_b_write)
    assert eb["lease"]["waited_s"] >= 5
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): COUNT}
    # both Leases released
    try:
        kube.get(_lease_path(s.crd_name))
        raise AssertionError("pass Lease left behind")
    except KubeError as exc:
        assert exc.status == 404
    reliability.record("two runs on one CRD, the second started 1 s into the first's pass",
                       f"the second waited {eb['lease']['waited_s']} s for the pass Lease and wrote only after the "
                       f"first released it; never two passes at once", COUNT, final.total, True)


def test_second_run_with_lease_wait_zero_fails_naming_the_holder(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, COUNT)
    pa = tmp_path / "a.json"
    a = _migrate(cluster, s, pa)
    wait_for_progress(pa, lambda st: (st.get("current") or {}).get("done", 0) >= 1)
    b = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], lease_wait=0))
    ra = a.result()
    assert b["failed"] and b["error"]["kind"] == "lease_held", b.get("msg")
    assert ra["crds"][0]["lease"]["holder"] in b["msg"] and "last renewed" in b["msg"]
    assert "default/crdops-pass-" + s.crd_name in b["msg"] and b["crds"] == []
    assert not ra.get("failed") and ra["crds"][0]["rewritten"] == COUNT
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): COUNT}


def test_killed_holder_is_taken_over_and_the_rerun_completes(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, COUNT)
    pa = tmp_path / "a.json"
    a = _migrate(cluster, s, pa)
    wait_for_progress(pa, lambda st: (st.get("current") or {}).get("done", 0) >= 60)
    holder_a = kube.get(_lease_path(s.crd_name))["spec"]["holderIdentity"]
    os.kill(a.proc.pid, signal.SIGKILL)
    a.proc.wait(10)
    killed = time.monotonic()
    rb = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=50, lease_wait=60))
    took = time.monotonic() - killed
    assert not rb.get("failed"), rb.get("msg")
    eb = rb["crds"][0]
    assert holder_a in eb["lease"]["took_over_from"] and eb["lease"]["holder"] != holder_a
    assert 15 <= eb["lease"]["waited_s"] <= 33, eb["lease"]  # renewTime + 30 s, polled every 2 s
    assert eb["resumed_from"] and eb["record_written"]
    record = eb["record"]
    # the record covers the whole pass (A's counts carried by the checkpoint), each object once
    assert record["listed"] == COUNT and record["skippedByCheckpoint"] == 0
    assert record["rewritten"] + record["unchanged"] + record["gone"] + record["alreadyCurrent"] == COUNT
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): COUNT}
    reliability.record("holder of the pass Lease SIGKILLed; a second run started at once",
                       f"the second took the Lease over after {eb['lease']['waited_s']} s ({took:.0f} s in all), "
                       "resumed from the checkpoint and recorded the whole pass", COUNT, final.total, True)


def test_verify_with_a_wrong_etcd_prefix_fails_naming_it(cluster, kube, group):
    s = seed_old_objects(kube, group, 40)
    for fail_on_mismatch in (True, False):
        r = run_module("crd_storage_verify", dict(auth_args(cluster), names=[s.crd_name], etcd_url=cluster.etcd_url,
                                                  etcd_prefix="/kubernetes.io", fail_on_mismatch=fail_on_mismatch))
        assert r["failed"] and r["verified"] is False and r["error"]["kind"] == "etcd_prefix"
        c = r["crds"][0]
        assert (c["keys"], c["api_objects"], c["verified"]) == (0, 40, False)
        assert f"etcd has no key under /kubernetes.io/{group}/widgets/ while the API lists 40 objects" in r["msg"]
        assert "set etcd_prefix (crd_upgrade_etcd_prefix) to /registry" in r["msg"]
    ok = run_module("crd_storage_verify", dict(auth_args(cluster), names=[s.crd_name], etcd_url=cluster.etcd_url,
                                               fail_on_mismatch=False))
    assert not ok.get("failed") and ok["crds"][0]["keys"] == 40 and ok["crds"][0]["problem"] is None

"""The adaptive pace on a real kube-apiserver: it backs off when the apiserver gets slow and the pass stays exact.

Two ways to make the apiserver slow while a pass runs: a real competing client (another process LISTing every
object of a big CRD in a loop, on the same two cores), and a TCP proxy in front of the apiserver that delays its
answers (tests/controlplane/delay_proxy.py; a fault injector, for a latency step no real load produces on cue).
Each pass must still end with exact counts and every etcd key at the new version. These passes run without the
latency probe (``latency_budget: 0``): what is tested here is the writes' own latency signal, which a probe cutting
the pace below one write in flight on a loaded machine would mask; test_latency_budget.py tests the probe.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.controlplane.delay_proxy import DelayProxy
from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import objects_path
from tests.integration.modrun import REPO, ModuleRun, auth_args
from tests.integration.seed import seed_old_objects


class PaceWatch:
    """Reads a module's progress_file every 50 ms and keeps each new pace snapshot with the phase it fell in.

    With ``restore_pass_only``, a confirming pass's snapshots are left out: that pass has a limiter of its own (started
    from where the re-store pass ended), so its counters and limits do not compare with the re-store pass's."""

    def __init__(self, path: Path, restore_pass_only: bool = False) -> None:
        self.path = path
        self.restore_pass_only = restore_pass_only
        self.phase = "before"
        self.samples: list[tuple[str, dict, int]] = []  # (phase, pace, objects answered)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "PaceWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _poll(self) -> None:
        last = None
        while not self._stop.wait(0.05):
            try:
                cur = json.loads(self.path.read_text()).get("current") or {}
            except (OSError, ValueError):
                continue
            pace = cur.get("pace")
            if self.restore_pass_only and cur.get("confirming"):
                continue
            if pace and pace != last:
                last = pace
                self.samples.append((self.phase, pace, int(cur.get("answered") or 0)))

    def wait(self, predicate, timeout: float = 120) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.samples and predicate(self.samples[-1][1], self.samples[-1][2]):
                return self.samples[-1][1]
            time.sleep(0.05)
        probed = [sample for sample in self.samples if "probe" in sample[1]][-1:]
        raise AssertionError(f"pace never reached the condition; last samples: {self.samples[-3:]}; "
                             f"the last with a latency probe: {probed}")

    def limits(self, phase: str) -> list[int]:
        return [p["limit"] for ph, p, _n in self.samples if ph == phase]

    def latencies(self, phase: str) -> list[float]:
        return [p["latency_ms"] for ph, p, _n in self.samples if ph == phase and p.get("latency_ms") is not None]


def exact_and_migrated(cluster, s, result: dict, count: int) -> dict:
    assert not result.get("failed"), result.get("msg")
    crd = result["crds"][0]
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["gone"], crd["failed"]) == (count, count, 0, 0, 0)
    assert crd["complete"] is True and crd["record_written"] is True
    assert scan_storage(cluster.etcd_url, s.group, s.plural).counts == {s.new(): count}
    return crd


def start_list_load(cluster, path: str, threads: int, stop_file: Path) -> subprocess.Popen:
    pki = cluster.pki
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.list_load", cluster.server, str(pki.ca_cert), str(pki.admin_cert),
         str(pki.admin_key), path, str(threads), str(stop_file)],
        cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_gentle_backs_off_under_a_competing_list_load_and_the_pass_stays_exact(cluster, kube, group, tmp_path):
    count = 6000
    s = seed_old_objects(kube, group, count, namespaces=["ns-a", "ns-b", "ns-c"], payload_bytes=200)
    progress = tmp_path / "progress.json"
    stop_file = tmp_path / "stop-load"
    run = ModuleRun("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=100, workers=8,
                                                progress_file=str(progress), latency_budget=0))
    load = None
    with PaceWatch(progress) as watch:
        try:
            # steady state first: the idle baseline learned and the limit grown past one
            steady = watch.wait(lambda p, n: p["windows"] >= 20 and n >= 800)
            watch.phase = "load"
            # every object of the CRD (full content) in one LIST, from 3 threads of another process
            load = start_list_load(cluster, objects_path(group, "v1beta1", s.plural), 3, stop_file)
            loaded = watch.wait(lambda p, n: p["limit"] == 1 and p["backoffs"] > steady["backoffs"], timeout=60)
            time.sleep(2)
            stop_file.write_text("stop")
            summary = json.loads(load.communicate(timeout=60)[0])
            watch.phase = "after"
            result = run.result(timeout=600)
        finally:
            stop_file.write_text("stop")
            if load is not None and load.poll() is None:
                load.kill()
    crd = exact_and_migrated(cluster, s, result, count)
    before, during = watch.limits("before"), watch.limits("load")
    assert max(before) >= 2, watch.samples[:40]
    assert min(during) == 1 and min(during) < max(before)
    assert max(watch.latencies("load")) > 1.5 * loaded["baseline_ms"]
    assert summary["lists"] > 0
    pace = crd["pace"]
    assert pace["mode"] == "gentle" and pace["min_limit"] == 1 and pace["backoffs"] >= 1 and pace["workers"] == 8
    print(f"\npace under a competing LIST load: limit {max(before)} -> {min(during)}; write p50 idle "
          f"{loaded['baseline_ms']} ms, under load up to {max(watch.latencies('load'))} ms; competing LISTs "
          f"{summary['lists']} (p50 {summary['p50_ms']} ms); pass {crd['duration_s']} s, {crd['objects_per_s']} obj/s; "
          f"final {json.dumps(pace)}")


def test_gentle_backs_off_on_a_latency_step_recovers_and_max_does_not_move(cluster, kube, group, tmp_path):
    count = 3000
    s = seed_old_objects(kube, group, count, namespaces=["ns-a", "ns-b"])
    m = seed_old_objects(kube, group, 400, namespaces=["ns-a"], plural="gizmos", kind="Gizmo")
    apiserver = cluster.apiservers[0]
    proxy = DelayProxy(apiserver.address, apiserver.port).start()
    auth = dict(auth_args(cluster), host=f"https://{proxy.host}:{proxy.port}")
    progress = tmp_path / "progress.json"
    try:
        run = ModuleRun("crd_storage_migrate", dict(auth, names=[s.crd_name], page_size=100, workers=8,
                                                    progress_file=str(progress), latency_budget=0))
        with PaceWatch(progress) as watch:
            watch.wait(lambda p, n: p["windows"] >= 15 and p["limit"] >= 2 and n >= 500)
            watch.phase = "slow"
            proxy.lag(0.03)  # every answer 30 ms late: ten times an idle write here
            slow = watch.wait(lambda p, n: p["limit"] == 1, timeout=30)
            time.sleep(1.5)
            watch.phase = "after"
            proxy.lag(0)
            watch.wait(lambda p, n: p["limit"] >= 2, timeout=60)
            gentle = run.result(timeout=600)
        proxy.lag(0.01)
        full = ModuleRun("crd_storage_migrate", dict(auth, names=[m.crd_name], page_size=100, workers=8,
                                                     pace="max")).result(timeout=300)
    finally:
        proxy.stop()
    crd = exact_and_migrated(cluster, s, gentle, count)
    before, during, after = watch.limits("before"), watch.limits("slow"), watch.limits("after")
    assert max(before) >= 2 and min(during) == 1 and max(after) >= 2
    assert max(watch.latencies("slow")) > 30 and slow["baseline_ms"] < 15  # the step is seen, the idle baseline kept
    assert crd["pace"]["min_limit"] == 1 and crd["pace"]["backoffs"] >= 1
    other = exact_and_migrated(cluster, m, full, 400)
    assert other["pace"]["mode"] == "max" and other["pace"]["final_limit"] == 8 and other["pace"]["min_limit"] == 8
    assert other["pace"]["backoffs"] == 0 and other["pace"]["peak_in_flight"] == 8
    print(f"\npace on a 30 ms latency step: limit {max(before)} -> {min(during)} -> {max(after)}; write p50 idle "
          f"{slow['baseline_ms']} ms, delayed up to {max(watch.latencies('slow'))} ms; max mode: {json.dumps(other['pace'])}")

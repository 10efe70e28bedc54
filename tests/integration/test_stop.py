"""Stop means stop (DESIGN invariant 11): Ctrl-C, SIGTERM and SIGKILL of ansible-playbook during a
re-store stop the writes within 10 s, trim nothing, and a rerun resumes and completes.

One CRD of COUNT objects (seeded straight into etcd, as the benchmark does), a playbook calling
crdops.migration.crd_storage_migrate (the controller-side action) with a low max_qps so one pass lasts ~40 s.
Each signal interrupts a run; the next run resumes from the checkpoint. The proof is etcd: the number of
keys stored at the new version is sampled every 0.5 s after the signal and must stop growing within 10 s.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.crdops_bench.data import seed as seed_via_etcd
from tests.controlplane.etcd_reader import scan_storage
from tests.integration import reliability
from tests.integration.modrun import ansible_env
from tests.integration.seed import Seeded

COUNT = 6000
MAX_QPS = 150          # ~40 s for the whole pass
START_AT = 600         # signal once this many objects are at the new version (a few pages in)
STOP_WITHIN = 10.0
QUIET_FOR = 4.0        # the count must then stay unchanged this long
RERUN_QPS = 600
DRAIN_S = 1            # the CRD was just created: the default drain would hold the first run's writes 75 s


def _new_count(cluster, s: Seeded) -> int:
    return scan_storage(cluster.etcd_url, s.group, s.plural).counts.get(s.new(), 0)


def _playbook(tmp_path: Path, cluster, s: Seeded, name: str = "stop", **extra) -> Path:
    inventory = {"all": {"hosts": {"stop-cluster": {"ansible_connection": "local",
                                                    "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [{"hosts": "all", "gather_facts": False, "tasks": [{
        "name": "re-store", "crdops.migration.crd_storage_migrate": {
            "kubeconfig": str(cluster.kubeconfig), "context": cluster.contexts()[0], "names": [s.crd_name],
            "page_size": 100, "workers": 4, "max_qps": MAX_QPS, "progress_interval": 1, "drain_window": DRAIN_S,
            **extra}}]}]
    path = tmp_path / f"{name}-playbook.yml"
    path.write_text(yaml.safe_dump(play))
    return path


def _start(tmp_path: Path, playbook: Path, log: str) -> subprocess.Popen:
    """ansible-playbook as the leader of its own process group, like a shell's foreground job."""
    out = open(tmp_path / log, "w")
    return subprocess.Popen([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                             str(playbook)], stdout=out, stderr=subprocess.STDOUT, env=ansible_env(),
                            start_new_session=True)


def _leftovers(marker: str) -> list[int]:
    """Processes whose command line names this test's playbook (workers outlive a killed parent in 2.19)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def _interrupt(cluster, s, tmp_path, playbook, name: str, send) -> dict:
    """Run, wait until the pass is writing, send the signal, then sample etcd until the count is quiet."""
    before = _new_count(cluster, s)
    proc = _start(tmp_path, playbook, f"{name}.log")
    deadline = time.monotonic() + 120
    while _new_count(cluster, s) < before + START_AT:
        assert proc.poll() is None, (tmp_path / f"{name}.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the pass did not start writing"
        time.sleep(0.2)
    signalled = time.monotonic()
    at_signal = _new_count(cluster, s)
    send(proc)
    samples = [(0.0, at_signal)]
    last_growth = 0.0
    while True:
        time.sleep(0.5)
        t = time.monotonic() - signalled
        n = _new_count(cluster, s)
        if n != samples[-1][1]:
            last_growth = t
        samples.append((round(t, 2), n))
        if t - last_growth >= QUIET_FOR and t >= 2 * QUIET_FOR or t > STOP_WITHIN + QUIET_FOR:
            break
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    time.sleep(1)
    return dict(name=name, before=before, at_signal=at_signal, last_growth_s=round(last_growth, 2),
                after=samples[-1][1], samples=samples, rc=proc.returncode,
                log=(tmp_path / f"{name}.log").read_text(), leftovers=_leftovers(str(playbook)))


def test_signals_stop_the_writes(cluster, kube, group, tmp_path):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    seed_via_etcd(kube, cluster.etcd_url, group, COUNT)
    playbook = _playbook(tmp_path, cluster, s)
    runs = [
        _interrupt(cluster, s, tmp_path, playbook, "sigint", lambda p: os.killpg(p.pid, signal.SIGINT)),
        _interrupt(cluster, s, tmp_path, playbook, "sigterm", lambda p: os.kill(p.pid, signal.SIGTERM)),
        _interrupt(cluster, s, tmp_path, playbook, "sigkill", lambda p: os.killpg(p.pid, signal.SIGKILL)),
    ]
    report = [{k: r[k] for k in ("name", "before", "at_signal", "last_growth_s", "after", "rc")} for r in runs]
    print("stop latencies:", json.dumps(report))
    (tmp_path / "stop-report.json").write_text(json.dumps(runs, indent=1))
    for r in runs:
        assert r["last_growth_s"] <= STOP_WITHIN, (r["name"], r["samples"], r["log"][-3000:])
        assert r["leftovers"] == [], (r["name"], "processes still running", r["leftovers"])
        assert r["after"] < COUNT, (r["name"], "the pass finished before the signal stopped it")
        assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1alpha1", "v1beta1"], "trimmed"
    # ansible-playbook itself ends at once on Ctrl-C (its own message); its worker stops the pass meanwhile
    assert "User interrupted execution" in runs[0]["log"], runs[0]["log"][-3000:]
    # progress lines were printed while the pass ran (percent of the discovered count)
    assert f"/{COUNT} objects (" in runs[0]["log"], runs[0]["log"][-3000:]
    # every interrupted run after the first resumed from the previous one's checkpoint
    assert runs[1]["before"] >= runs[0]["after"] - 1 and runs[2]["before"] >= runs[1]["after"] - 1

    # a time limit stops the pass the same way, and ansible-playbook (still there) shows the task's message; the
    # limit leaves room for writes after the latency probe's idle baseline (3 s before the first write)
    limited = _start(tmp_path, _playbook(tmp_path, cluster, s, "limited", time_limit=8), "limited.log")
    assert limited.wait(timeout=120) == 2
    limited_log = (tmp_path / "limited.log").read_text()
    assert "stopped: time_limit of 8 s reached: no write was started after it" in limited_log, limited_log[-3000:]
    assert "Run again to resume" in limited_log
    assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]

    final_before = _new_count(cluster, s)
    assert final_before > runs[2]["after"]  # the limited run wrote before its limit
    # the rerun is not interrupted: it may go faster (its pass and the confirming pass each list all COUNT objects),
    # at pace max: what it shows is that it resumes and completes, not how gently
    proc = _start(tmp_path, _playbook(tmp_path, cluster, s, "rerun", max_qps=RERUN_QPS, pace="max"), "rerun.log")
    assert proc.wait(timeout=300) == 0, (tmp_path / "rerun.log").read_text()[-3000:]
    final = scan_storage(cluster.etcd_url, s.group, s.plural)
    assert final.counts == {s.new(): COUNT}
    record = json.loads(kube.get_crd(s.crd_name)["metadata"]["annotations"]["migration.crdops.io/storage-migration"])
    assert record["failed"] == 0 and record["listed"] == COUNT
    assert (record["rewritten"] + record["unchanged"] + record["gone"] + record["skippedByCheckpoint"]
            + record["alreadyCurrent"]) == COUNT
    rerun_log = (tmp_path / "rerun.log").read_text()
    assert f"{COUNT}/{COUNT} objects (100.0%)" in rerun_log, rerun_log[-3000:]
    # resumed, not started over: the checkpoint of the last stopped run is at most the pages in flight behind it
    # (the pass's own lines: the confirming pass after it lists every object again, with no checkpoint)
    restore_lines = [ln for ln in rerun_log.splitlines() if "skipped by checkpoint" in ln and "confirming pass" not in ln]
    skipped = int(re.findall(r"skipped by checkpoint (\d+);", restore_lines[-1])[0])
    before_rerun = final_before
    assert before_rerun - 2 * 100 <= skipped <= before_rerun, (skipped, before_rerun)
    reliability.record(
        "ansible-playbook stopped mid-pass (SIGINT to its process group, SIGTERM, SIGKILL of its process group)",
        "writes stopped after " + ", ".join("%s %.1f s" % (r["name"], r["last_growth_s"]) for r in runs)
        + "; storedVersions untouched; the rerun resumed from the checkpoint and completed",
        COUNT, final.total, True)

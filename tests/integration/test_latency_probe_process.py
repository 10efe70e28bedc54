"""The latency probe measures the apiserver, not us (issue #39), on a real kube-apiserver.

- Its GETs come from a process of its own: with this interpreter's GIL held the way our writers hold it (C calls
  that never let go, as a JSON decode of a page does), its latencies stay near an outside client's, while a probe
  on a thread of this interpreter (the old way) reads the hold as the apiserver's latency. It authenticates as the
  run's transport does (a ServiceAccount token here: the same FlowSchema as our own requests), and the token is
  never on its command line.
- A noisy idle still holds a budget: latency spikes injected into the idle (a delay proxy in front of the
  apiserver) no longer switch the budget off ("baseline noisy, budget not applied"); once other clients' GETs
  slow down during the pass, the probe cuts the pace.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from benchmarks.crdops_bench.data import seed as seed_via_etcd
from tests.controlplane.delay_proxy import DelayProxy
from tests.controlplane.etcd_reader import scan_storage
from tests.integration.engine import connection  # first: it puts the collection on sys.path
from tests.integration.modrun import REPO, ModuleRun, ansible_playbook, auth_args
from tests.integration.seed import Seeded
from tests.integration.test_pace import PaceWatch
from tests.integration.test_security import service_account_token, shipped_rules

from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.pass_lease import PassLease
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.latency_probe import LatencyProbe
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.pace import PaceCarry
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import RunOptions, start_probe

HOG_S = 6.0
FLOW_HEADER = "X-Kubernetes-PF-FlowSchema-UID"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(round(pct / 100.0 * len(ordered) + 0.5)) - 1)]


def hold_the_interpreter(stop: threading.Event) -> None:
    """What our writers do to the interpreter while they decode a page: C calls that hold the GIL ~20-40 ms each."""
    while not stop.is_set():
        sum(range(1_500_000))


def outside_client(cluster, path: str, seconds: float) -> subprocess.Popen:
    pki = cluster.pki
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.outside_get", cluster.server, str(pki.ca_cert), str(pki.admin_cert),
         str(pki.admin_key), path, str(seconds)], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_probe_measures_the_apiserver_not_the_interpreter_that_holds_our_writers(cluster, kube, group):
    token = service_account_token(kube, f"probe-{group.split('.')[0]}", shipped_rules(group))
    transport = connection.connect(connection.ConnectionOptions(host=cluster.server, api_key=token,
                                                                ca_cert=str(cluster.pki.ca_cert)), retry_deadline=20)
    lease = PassLease(transport, f"widgets.{group}").acquire(30.0)
    probe = start_probe(transport, lease, RunOptions(restore=RestoreOptions(), latency_budget=2.0),
                        PaceCarry("gentle", 8))
    conn = transport.for_endpoint(transport.base_url)

    def fetch() -> None:
        assert conn.request("GET", lease.path).ok
    old_way = LatencyProbe(fetch, 2.0).start()  # the yardstick: a probe on a thread of this interpreter
    stop, cmdline = threading.Event(), b""
    try:
        probe.measure_idle(lambda: False)
        old_way.measure_idle(lambda: False)
        pid = probe.summary().get("pid")
        if pid and pid != os.getpid():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        outside = outside_client(cluster, lease.path, HOG_S + 1.0)
        time.sleep(0.5)  # the outside client's interpreter is up
        probe.writes_begin(lambda: False)
        old_way.writes_begin(lambda: False)
        held_from = time.monotonic()
        hogs = [threading.Thread(target=hold_the_interpreter, args=(stop,), daemon=True) for _i in range(2)]
        for hog in hogs:
            hog.start()
        time.sleep(HOG_S)
        stop.set()
        for hog in hogs:
            hog.join()
        held_to = time.monotonic()
        time.sleep(0.5)  # the probe's reader catches up with what the child sent meanwhile
        ours, theirs = probe.summary(), old_way.summary()
        flow = transport.request("GET", lease.path).header(FLOW_HEADER)
        out, err = outside.communicate(timeout=60)  # before the Lease it reads goes
    finally:
        stop.set()
        probe.stop()
        old_way.stop()
        lease.release()
        transport.close()
    assert outside.returncode == 0 and out, err[-3000:]
    seen = [lat * 1000.0 for started, lat in json.loads(out)["samples"] if held_from <= started <= held_to]
    o50, o90 = percentile(seen, 50), percentile(seen, 90)
    print("\nGIL held %.1f s: outside client GET p50/p90 %.1f/%.1f ms (%d samples); probe %s; in-process probe %s"
          % (held_to - held_from, o50, o90, len(seen), json.dumps(ours), json.dumps(theirs)))
    assert len(seen) >= 40 and ours["during"]["samples"] >= 40, (len(seen), ours)
    # the probe sees what the outside client sees, not the interpreter's hold
    assert ours["during"]["p50_ms"] <= 2 * o50 + 3 and ours["during"]["p90_ms"] <= 2 * o90 + 5, (ours, o50, o90)
    # ... which a thread of this interpreter does see: the hold was real
    assert theirs["during"]["p50_ms"] >= ours["during"]["p50_ms"] + 5, (theirs, ours)
    assert ours["process"] == "separate" and ours["pid"] != os.getpid() and ours["errors"] == 0, ours
    assert b"-I" in cmdline and token.encode() not in cmdline and token not in json.dumps(ours)
    assert flow and ours["flow_schema"] == flow  # authenticated as our own requests are: the same APF flow


COUNT = 1500


def spikes(proxy: DelayProxy, until: threading.Event, lag: float = 0.2, every: float = 0.4, width: float = 0.03):
    """Idle latency spikes: every ``every`` s, answers read in the next ``width`` s arrive ``lag`` s late."""
    while not until.wait(every):
        proxy.lag(lag)
        time.sleep(width)
        proxy.lag(0.0)


def test_a_noisy_idle_still_holds_the_budget_and_the_probe_slows_the_pass(cluster, kube, group, tmp_path):
    seed_via_etcd(kube, cluster.etcd_url, group, COUNT)
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    server = urlsplit(cluster.server)
    proxy = DelayProxy(server.hostname, server.port).start()
    progress, writing, slowed = tmp_path / "progress.json", threading.Event(), False
    noise = threading.Thread(target=spikes, args=(proxy, writing), daemon=True)
    noise.start()
    try:
        # every request of the run, the probe's own process included, goes through the proxy
        run = ModuleRun("crd_storage_migrate", dict(auth_args(cluster), host=f"https://127.0.0.1:{proxy.port}",
                                                    names=[s.crd_name], page_size=100, confirm_passes=0,
                                                    progress_file=str(progress)))
        with PaceWatch(progress) as watch:
            watch.wait(lambda p, n: n >= 1, timeout=120)  # the pass writes: the idle is over
            writing.set()
            noise.join()
            proxy.lag(0.04)  # other clients' GETs now take 40 ms more, many times the idle
            watch.wait(lambda p, n: p.get("probe_cuts", 0) >= 1 or n >= COUNT, timeout=120)
            proxy.lag(0.0)
            slowed = True
        result = run.result(timeout=600)
    finally:
        writing.set()
        proxy.lag(0.0)
        proxy.stop()
    assert slowed and not result.get("failed"), result.get("msg")
    crd = result["crds"][0]
    assert (crd["listed"], crd["rewritten"], crd["failed"]) == (COUNT, COUNT, 0), crd
    assert scan_storage(cluster.etcd_url, s.group, s.plural).counts == {s.new(): COUNT}
    pace, probe = crd["pace"], crd["pace"]["probe"]
    print("\nnoisy idle: probe %s; pace %s" % (json.dumps(probe), json.dumps({k: v for k, v in pace.items()
                                                                              if k != "probe"})))
    # the idle had its spikes (its p99 is one of them), and the budget held all the same
    assert probe["idle"]["p99_ms"] >= 5 * probe["idle"]["p50_ms"], probe
    assert probe["baseline"] in ("ok", "noisy") and probe["multiple"] is not None, probe
    assert pace["probe_cuts"] >= 1, pace
    assert probe["process"] == "separate", probe


PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: As a module, from AnsiballZ's zip
      crdops.migration.crd_storage_migrate: &args
        kubeconfig: %(kubeconfig)s
        context: %(context)s
        names: [%(crd)s]
        drain_window: 1
        confirm_passes: 0
        force: true
        run_on_controller: never
      register: as_module
    - name: In ansible-playbook's worker (the action plugin)
      crdops.migration.crd_storage_migrate:
        <<: *args
        run_on_controller: auto
      register: in_worker
    - name: What their probes said
      ansible.builtin.copy:
        content: "{{ {'module': as_module.crds[0].pace.probe, 'worker': in_worker.crds[0].pace.probe} | to_json }}"
        dest: %(out)s
        mode: "0600"
"""


def test_the_probe_has_its_own_process_under_ansiballz_and_in_the_worker(cluster, kube, group, tmp_path):
    """The child's program is read through the module's loader: from AnsiballZ's zip for a module, from the file
    in ansible-playbook's worker."""
    seed_via_etcd(kube, cluster.etcd_url, group, 200)
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    out = tmp_path / "probes.json"
    playbook = tmp_path / "probe.yml"
    playbook.write_text(PLAYBOOK % {"kubeconfig": cluster.kubeconfig, "context": cluster.contexts()[0],
                                    "crd": s.crd_name, "out": out})
    proc = ansible_playbook(str(playbook))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    probes = json.loads(out.read_text())
    print("\nprobes: %s" % json.dumps(probes))
    for where, probe in probes.items():
        assert probe["process"] == "separate" and probe["flow_schema"], (where, probe)
        assert probe["baseline"] in ("ok", "noisy") and probe["errors"] == 0, (where, probe)
    assert probes["module"]["pid"] != probes["worker"]["pid"]

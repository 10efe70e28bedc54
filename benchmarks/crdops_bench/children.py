"""The engine and the ceiling client, each in a fresh interpreter (clean RSS, same footing).

    python -m benchmarks.crdops_bench.children engine|ceiling  < spec.json

prints one JSON line; `t0`/`t1` are time.monotonic() (one clock for every process on Linux), so the probe's
"during" window is exactly the contender's work. Both import the engine from the run's snapshot (spec["collections"]); the ceiling
uses only the engine's wire constants (media types), not its code.
"""
from __future__ import annotations

import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from . import REPO, engine


def rss_kb(pid: int | str = "self") -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB from /proc."""
    rss = hwm = 0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


def split_pace(options: dict, restore_options: type) -> tuple[dict, str | None, str]:
    """`pace` goes to RestoreOptions when this engine has it; else it is dropped and said so (an engine from
    before the option: ours-gentle and ours-max then run the same defaults)."""
    options = dict(options)
    pace = options.pop("pace", None)
    if pace is None:
        return options, None, ""
    if "pace" in {f.name for f in dataclasses.fields(restore_options)}:
        return dict(options, pace=pace), pace, ""
    return options, None, f"engine has no pace option (asked {pace})"


# crd_storage_migrate's probe samples the idle through the pass's barrier and drain (65 s by default), so a real
# pass starts writing with over a thousand idle samples, enough for the idle p99 its budget also holds. The child
# samples this long before it writes, and does not count it as work: the in-tree migrator's wait is not counted
# either (intree.py). 20 s at 20 GETs a second: 400 samples.
PROBE_IDLE_S = 20.0


def gentle_gate(transport, crd, opts, budget: float, idle_s: float = PROBE_IDLE_S):
    """As crd_storage_migrate runs a gentle pass: under its pass Lease, with the latency probe on that Lease
    holding ``budget`` after ``idle_s`` of idle samples (an engine from before the probe, or pace max: no gate of
    our own). (gate, cleanup)."""
    if opts.pace != "gentle" or not budget or not engine.has_module("restore.latency_probe"):
        return None, lambda: None
    pace_mod, lease_mod, probe_mod, transport_mod = (
        engine.module(m) for m in ("restore.pace", "ha.pass_lease", "restore.latency_probe", "kube.transport"))
    lease = lease_mod.PassLease(transport, crd.name).acquire(30.0)
    conn = transport.for_endpoint(transport.base_url)

    def fetch() -> None:
        resp = conn.request("GET", lease.path)
        if not resp.ok:
            raise transport_mod.error_from_response(resp, "latency probe GET")
    probe = probe_mod.LatencyProbe(fetch, budget, target=lease.where, **own_process(transport, lease.path))
    probe.start()
    time.sleep(idle_s)
    probe.measure_idle(lambda: False)

    def cleanup() -> None:
        probe.stop()
        lease.release()
    return pace_mod.pace_gate(opts.pace, opts.workers, probe=probe), cleanup


def own_process(transport, path: str) -> dict:
    """The probe's GETs from a process of their own, as crd_storage_migrate sends them (an engine from before
    probe_process.py: none, its probe runs on a thread beside the writers)."""
    if not engine.has_module("restore.probe_process") or not hasattr(transport, "wire"):
        return {}
    return {"sampler": engine.module("restore.probe_process").ProcessSampler(transport.wire(), path)}


def child_engine(spec: dict) -> dict:
    """migrate_crd over one CRD with RestoreOptions(**spec["options"]) (``latency_budget`` aside: the probe's, see
    gentle_gate), timed from the pass's start (its LIST) to the result; ``wait_s``: connecting and the probe's idle
    before it."""
    engine.use(spec["collections"])
    connection, restore, selection = (engine.module(m) for m in ("kube.connection", "restore.restore", "kube.selection"))
    options = dict(spec.get("options", {}))
    budget = float(options.pop("latency_budget", 2.0))
    options, pace, note = split_pace(options, restore.RestoreOptions)
    opts = restore.RestoreOptions(**options)
    rss_before = rss_kb()[0]
    t_connect = time.monotonic()
    transport = connection.connect(connection.ConnectionOptions(**spec["auth"]), pool_size=opts.workers + 2,
                                   max_qps=spec.get("max_qps"))
    crd = selection.get_crd(transport, spec["crd"])
    gate, cleanup = gentle_gate(transport, crd, opts, budget, float(spec.get("probe_idle_s", PROBE_IDLE_S)))
    gated = {"pace": gate} if gate is not None else {}
    t0 = time.monotonic()
    try:
        if spec.get("profile"):
            import cProfile
            prof = cProfile.Profile()
            result = prof.runcall(restore.migrate_crd, transport, crd, opts, **gated)
            prof.dump_stats(spec["profile"])
        else:
            result = restore.migrate_crd(transport, crd, opts, **gated)
    finally:
        cleanup()
    t1 = time.monotonic()
    transport.close()
    return {"seconds": t1 - t0, "t0": t0, "t1": t1, "wait_s": t0 - t_connect, "result": result.to_dict(),
            "rss_before_kb": rss_before, "pace": pace,
            "pace_note": note, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "hwm_kb": rss_kb()[1]}


def child_ceiling(spec: dict) -> dict:
    """Fastest honest client: list names page by page (metadata only) and patch `{}` concurrently, pages
    overlapping; one urllib3 pool sized to the workers; no result bookkeeping beyond a count."""
    import urllib3

    engine.use(spec["collections"])
    wire = engine.module("kube.transport")
    workers, server = spec["workers"], spec["server"].rstrip("/")
    pool = urllib3.PoolManager(maxsize=workers + 2, cert_reqs="CERT_REQUIRED", ca_certs=spec["ca"], retries=False)
    auth = {"Authorization": f"Bearer {spec['token']}"}
    base, plural = f"/apis/{spec['group']}/v1beta1", spec["plural"]
    patch_headers = dict(auth, **{"Content-Type": wire.MERGE_PATCH, "Accept": wire.ACCEPT_PARTIAL})
    bad = [0]

    def patch(path: str) -> None:
        if pool.request("PATCH", server + path, body=b"{}", headers=patch_headers).status != 200:
            bad[0] += 1

    t0 = time.monotonic()
    futures, token = [], ""
    with ThreadPoolExecutor(workers) as ex:
        while True:
            url = f"{server}{base}/{plural}?limit=500" + (f"&continue={urllib.parse.quote(token)}" if token else "")
            body = json.loads(pool.request("GET", url, headers=dict(auth, Accept=wire.ACCEPT_PARTIAL_LIST)).data)
            for item in body["items"]:
                m = item["metadata"]
                futures.append(ex.submit(patch, f"{base}/namespaces/{m['namespace']}/{plural}/{m['name']}"))
            token = body["metadata"].get("continue")
            if not token:
                break
    t1 = time.monotonic()
    return {"seconds": t1 - t0, "t0": t0, "t1": t1, "patched": len(futures), "bad": bad[0],
            "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def run_child(kind: str, spec: dict, timeout: float = 3600) -> dict:
    """Run a child; the spec (it holds a token) goes in on stdin, never on a command line."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.crdops_bench.children", kind], input=json.dumps(spec),
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} child failed rc={proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    CHILDREN = {"engine": child_engine, "ceiling": child_ceiling}
    print(json.dumps(CHILDREN[sys.argv[1]](json.loads(sys.stdin.read()))))

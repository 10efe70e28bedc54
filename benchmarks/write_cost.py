"""What one re-store writer costs another client's GET, against how often it writes: no engine, no probe.

    . tools/env.sh && python benchmarks/write_cost.py                    # 3 reps, 30 s per window
    . tools/env.sh && python benchmarks/write_cost.py --reps 5 --duties 0.1,0.5,1

One quiet kube-apiserver + etcd. Two outside observers, each a process of its own on one kept-alive connection with
the admin certificate (APF-exempt, so no queueing is measured), GET one ConfigMap every 50 ms: one with no
resourceVersion (read from etcd) and one with resourceVersion=0 (answered from the watch cache). Meanwhile, in
turn, a bare client does what a migration's pass does, at one pace at a time, each after a quiet window of the same
length: nothing (idle against idle: how far two quiet windows differ), metadata-only LIST pages of 500 at 135
objects/s (the listing of a pass at the in-tree migrator's speed, no writes), an annotation patch of the CRD once per
such page (what a pass's checkpoint writes: a CRD update wakes the apiserver's CRD controllers), and no-op merge
patches of CRs whose storage version was flipped (each one re-encoded and written to etcd, as the re-store writes
them) at one write in flight a fraction of the time (0.1 = one write, then nine times its latency of nothing) or at
N in flight (N >= 1). A pace written hold<pace> (hold1) holds each write while the writer's own GET, in a thread
of its own, is slow (over three times the median of its last ones; hold0.5x2: twice): what pausing through the
apiserver's garbage collections, which decide the observers' slowest answers at a gentle pace (noise_sources.py),
would buy.
`--phases idle` leaves out the LIST and checkpoint phases. The phases rotate between repetitions, so no pace always
meets the same minute.

Prints, per phase, objects/s and each observer's GET p99 during over its own quiet window before (median and range
of the repetitions) and the p99 in ms. A script, not a test: docs/performance.md reads its output.
"""
from __future__ import annotations

import argparse
import collections
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for entry in (str(REPO), str(REPO / "benchmarks")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import urllib3  # noqa: E402

from crdops_bench.probe import percentile  # noqa: E402  (nearest rank, NaN for none: as the calibration reads)

INTERVAL = 0.05
NAMESPACE = "default"
CONFIGMAP = "write-cost-probe"
READS = {"etcd": "", "cache": "?resourceVersion=0"}  # observer -> query of its GET
ACCEPT_PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
LIST_PAGE, LIST_RATE = 500, 135.0  # objects per page, objects/s: a pass at the in-tree migrator's speed
CHECKPOINT_ANNOTATION = "crdops.io/write-cost-checkpoint"
NO_WRITES = ("idle", "list", "checkpoint")  # phases that write no CR
SETTLE_S = 10.0  # after start-up and after seeding (tens of thousands of objects through etcd): not a quiet window


# ---- the observer process --------------------------------------------------------------------------------------
def observe(spec: dict) -> None:
    """GET spec["url"] every INTERVAL s until SIGTERM; one line per answer (`sent_at ms status`)."""
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    pool = urllib3.PoolManager(maxsize=1, cert_reqs="CERT_REQUIRED", ca_certs=spec["ca"], retries=False,
                               cert_file=spec["cert"], key_file=spec["key"])
    with open(spec["out"], "a", buffering=1) as out:
        tick = time.monotonic()
        while not stop:
            t0 = time.monotonic()
            status = pool.request("GET", spec["url"], headers={"Accept": "application/json"}).status
            out.write(f"{t0:.6f} {(time.monotonic() - t0) * 1000:.3f} {status}\n")
            tick = max(tick + INTERVAL, time.monotonic() - INTERVAL)
            time.sleep(max(0.0, tick - time.monotonic()))


class Observer:
    def __init__(self, cluster, name: str, query: str, workdir: Path) -> None:
        self.name, self.out = name, workdir / f"observer-{name}.txt"
        pki = cluster.pki
        spec = {"ca": str(pki.ca_cert), "cert": str(pki.admin_cert), "key": str(pki.admin_key), "out": str(self.out),
                "url": f"{cluster.server}/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}{query}"}
        self.proc = subprocess.Popen([sys.executable, __file__, "--observe", json.dumps(spec)])

    def p99(self, t0: float, t1: float) -> tuple[float, int]:
        """The p99 (ms) of the answers to GETs sent in [t0, t1), and how many there were."""
        ms = []
        for line in self.out.read_text().splitlines():
            at, took, status = line.split()
            if t0 <= float(at) < t1 and status == "200":
                ms.append(float(took))
        return percentile(ms, 99), len(ms)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


# ---- the bare client --------------------------------------------------------------------------------------------
HOLD = "hold"  # a pace prefixed so (hold1, hold0.5) holds each write while the writer's own GET is slow
HOLD_FACTOR = 3.0  # slow: over this many times the median of the writer's recent GETs (hold0.5x2: 2 times)
HOLD_MIN_S = 0.004  # and over this many seconds (below it a spike is this process's own scheduling)


def pace_of(phase: str) -> tuple[float, float | None]:
    """(pace, None, or the multiple of its recent median over which the writer's own GET holds the writes) of a
    writing phase: 0.5, hold0.5 (HOLD_FACTOR), hold0.5x2."""
    if not phase.startswith(HOLD):
        return float(phase), None
    pace, _x, factor = phase[len(HOLD):].partition("x")
    return float(pace), float(factor) if factor else HOLD_FACTOR


class SpikeWatch:
    """The writer's own GET of the observers' ConfigMap every INTERVAL s, on a connection of its own, in a thread:
    is the apiserver answering slowly right now? A GET still in flight past the threshold says so before it is
    answered, which catches a garbage collection of the apiserver a few tens of milliseconds into its mark."""

    def __init__(self, cluster, factor: float = HOLD_FACTOR) -> None:
        pki = cluster.pki
        self.factor = factor
        self.pool = urllib3.PoolManager(maxsize=1, cert_reqs="CERT_REQUIRED", ca_certs=str(pki.ca_cert), retries=False,
                                        cert_file=str(pki.admin_cert), key_file=str(pki.admin_key))
        self.url = f"{cluster.server}/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"
        self.recent: collections.deque[float] = collections.deque(maxlen=200)
        self.sent_at: float | None = None
        self.last = (0.0, 0.0)  # (answered at, seconds it took)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.is_set():
            sent = self.sent_at = time.monotonic()
            self.pool.request("GET", self.url, headers={"Accept": "application/json"})
            took = time.monotonic() - sent
            self.sent_at = None
            self.recent.append(took)
            self.last = (time.monotonic(), took)
            self.stopped.wait(max(0.0, INTERVAL - took))

    def slow_now(self) -> bool:
        if len(self.recent) < 20:
            return False
        limit = max(HOLD_MIN_S, self.factor * statistics.median(self.recent))
        now, sent, (answered, took) = time.monotonic(), self.sent_at, self.last
        return (sent is not None and now - sent > limit) or (took > limit and now - answered < 2 * INTERVAL)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)


class Client:
    """No-op re-store writes of one seeded group's objects, each object once, and its metadata-only LIST pages."""

    def __init__(self, cluster, group: str, objects: int, plural: str, namespaces: tuple) -> None:
        self.cluster = cluster
        pki = cluster.pki
        self.pool = urllib3.PoolManager(maxsize=16, cert_reqs="CERT_REQUIRED", ca_certs=str(pki.ca_cert), retries=False,
                                        cert_file=str(pki.admin_cert), key_file=str(pki.admin_key))
        self.base = f"{cluster.server}/apis/{group}/v1beta1"
        self.plural = plural
        self.paths = [f"/namespaces/{namespaces[i % len(namespaces)]}/{plural}/obj-{i:06d}" for i in range(objects)]
        self.crd_url = f"{cluster.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}"
        self.lock = threading.Lock()
        self.token: str | None = None
        self.held = 0.0  # seconds a holding phase waited for the apiserver to answer quickly again

    def _next(self) -> str | None:
        with self.lock:
            return self.paths.pop() if self.paths else None

    def write_at(self, duty: float, until: float, watch: SpikeWatch | None = None) -> int:
        """One write in flight ``duty`` of the time (after a write of L s, L * (1/duty - 1) s of nothing); with a
        ``watch``, no write starts while it sees the apiserver answer slowly."""
        done = 0
        while time.monotonic() < until and (path := self._next()) is not None:
            while watch is not None and watch.slow_now() and time.monotonic() < until:
                time.sleep(0.005)
                self.held += 0.005
            t0 = time.monotonic()
            resp = self.pool.request("PATCH", self.base + path, body=b"{}",
                                     headers={"Content-Type": "application/merge-patch+json"})
            if resp.status != 200:
                raise RuntimeError(f"PATCH {path}: {resp.status} {resp.data[:200]!r}")
            done += 1
            if duty < 1.0:
                time.sleep((time.monotonic() - t0) * (1.0 / duty - 1.0))
        return done

    def write_in_flight(self, n: int, until: float) -> int:
        counts: list[int] = []
        threads = [threading.Thread(target=lambda: counts.append(self.write_at(1.0, until))) for _writer in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if len(counts) != n:
            raise RuntimeError("a writer thread failed")
        return sum(counts)

    def list_pages(self, until: float) -> int:
        listed, tick = 0, time.monotonic()
        while time.monotonic() < until:
            query = f"?limit={LIST_PAGE}" + (f"&continue={self.token}" if self.token else "")
            resp = self.pool.request("GET", f"{self.base}/{self.plural}{query}", headers={"Accept": ACCEPT_PARTIAL_LIST})
            self.token = json.loads(resp.data)["metadata"].get("continue") or None
            listed += LIST_PAGE
            tick += LIST_PAGE / LIST_RATE
            time.sleep(max(0.0, tick - time.monotonic()))
        return listed

    def checkpoints(self, until: float) -> int:
        """An annotation patch of the CRD once per LIST page at LIST_RATE: what a pass's checkpoint writes."""
        pages, tick = 0, time.monotonic()
        while time.monotonic() < until:
            body = json.dumps({"metadata": {"annotations": {CHECKPOINT_ANNOTATION: str(pages)}}}).encode()
            resp = self.pool.request("PATCH", self.crd_url, body=body,
                                     headers={"Content-Type": "application/merge-patch+json"})
            if resp.status != 200:
                raise RuntimeError(f"PATCH {self.crd_url}: {resp.status} {resp.data[:200]!r}")
            pages += 1
            tick += LIST_PAGE / LIST_RATE
            time.sleep(max(0.0, tick - time.monotonic()))
        return pages * LIST_PAGE

    def run(self, phase: str, seconds: float) -> int:
        """Objects written (listed, for ``list``) during ``seconds`` of ``phase``."""
        until = time.monotonic() + seconds
        if phase == "idle":
            time.sleep(seconds)
            return 0
        if phase == "list":
            return self.list_pages(until)
        if phase == "checkpoint":
            return self.checkpoints(until)
        pace, hold = pace_of(phase)
        if pace > 1.0:
            return self.write_in_flight(int(pace), until)
        watch = SpikeWatch(self.cluster, hold) if hold else None
        try:
            return self.write_at(pace, until, watch)
        finally:
            if watch is not None:
                watch.stop()


# ---- the run ----------------------------------------------------------------------------------------------------
def objects_needed(phases: list[str], seconds: float) -> int:
    """Enough objects that no phase runs out: up to 200 writes a second at one write in flight, 500 at more (two
    cores), with a margin."""
    paces = [pace_of(p)[0] for p in phases if p not in NO_WRITES]
    per_s = sum(200.0 * pace if pace <= 1.0 else 500.0 for pace in paces)
    return int(per_s * seconds * 1.3) + 1000


def one_rep(bench, observers: list[Observer], phases: list[str], seconds: float) -> list[dict]:
    from crdops_bench import data

    group = bench.seed("w", objects_needed(phases, seconds))
    client = Client(bench.cluster, group, objects_needed(phases, seconds), data.PLURAL, data.NAMESPACES)
    time.sleep(SETTLE_S)
    rows = []
    for phase in phases:
        i0 = time.monotonic()
        time.sleep(seconds)
        i1 = time.monotonic()
        done = client.run(phase, seconds)
        d1 = time.monotonic()
        row = {"phase": phase, "objects_s": done / (d1 - i1), "held_share": client.held / (d1 - i1)}
        client.held = 0.0
        for obs in observers:
            (idle, n_idle), (during, n_during) = obs.p99(i0, i1), obs.p99(i1, d1)
            row[obs.name] = {"idle_p99": idle, "during_p99": during, "multiple": during / idle,
                             "n": [n_idle, n_during]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    bench.drop(group)
    return rows


def report(rows: list[dict], phases: list[str]) -> None:
    print("\n| phase | objects/s | GET from etcd: p99 multiple (range) | p99 ms | GET from the watch cache: p99 multiple "
          "(range) | p99 ms |")
    print("|---|---:|---|---:|---|---:|")
    for phase in phases:
        mine = [r for r in rows if r["phase"] == phase]
        cells = [f"{statistics.median(r['objects_s'] for r in mine):.0f}"]
        if phase.startswith(HOLD):
            cells[0] += f" (held {statistics.median(r.get('held_share', 0.0) for r in mine):.0%} of the time)"
        for name in READS:
            mult = [r[name]["multiple"] for r in mine]
            cells.append(f"x{statistics.median(mult):.2f} ({min(mult):.2f}-{max(mult):.2f})")
            cells.append(f"{statistics.median(r[name]['during_p99'] for r in mine):.1f}")
        print(f"| {label(phase)} | " + " | ".join(cells) + " |")


def label(phase: str) -> str:
    if phase in NO_WRITES:
        return {"idle": "nothing (idle against idle)", "list": f"LIST pages of {LIST_PAGE}, {LIST_RATE:g} objects/s",
                "checkpoint": f"a CRD annotation patch per page of {LIST_PAGE} at {LIST_RATE:g} objects/s"}[phase]
    pace, hold = pace_of(phase)
    text = (f"one write in flight {pace:.0%} of the time" if pace < 1.0 else "one write in flight all of the time"
            if pace == 1.0 else f"{int(pace)} writes in flight")
    return text + (f", held while the writer's own GET takes over x{hold:g} its median" if hold else "")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0, help="each quiet window and each phase (default 30)")
    ap.add_argument("--duties", default="0.1,0.25,0.5,1,8",
                    help="writer paces: below 1 the fraction of the time one write is in flight, else writes in flight; "
                    f"{HOLD}<pace>[x<factor>] (pace up to 1) holds each write while the writer's own GET takes "
                    f"over <factor> (default {HOLD_FACTOR:g}) times its recent median")
    ap.add_argument("--phases", default=",".join(NO_WRITES),
                    help=f"the phases without CR writes to run beside the paces (default {','.join(NO_WRITES)})")
    ap.add_argument("--observe", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.observe:
        observe(json.loads(args.observe))
        return 0
    from crdops_bench.contenders import Bench

    quiet = [p.strip() for p in args.phases.split(",") if p.strip()]
    if set(quiet) - set(NO_WRITES):
        ap.error(f"--phases: {sorted(set(quiet) - set(NO_WRITES))} not among {', '.join(NO_WRITES)}")
    paces = [d.strip() for d in args.duties.split(",") if d.strip()]
    for d in paces:
        try:
            pace, hold = pace_of(d)
        except ValueError:
            pace, hold = 0.0, None
        if pace <= 0.0 or (hold is not None and (pace > 1.0 or hold <= 1.0)):
            ap.error(f"--duties: {d} is not a pace; give fractions of the time (0.1), writes in flight (1, 8) or "
                     f"{HOLD}<fraction up to 1>[x<factor over 1>]")
    base = quiet + paces
    workdir = Path(tempfile.mkdtemp(prefix="crdops-write-cost-"))
    bench = Bench(workdir, kubectl=False, kcm=False)
    bench.kube.post(f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CONFIGMAP}, "data": {"k": "v" * 200}})
    observers = [Observer(bench.cluster, name, query, workdir) for name, query in READS.items()]
    rows: list[dict] = []
    try:
        time.sleep(SETTLE_S)
        for rep in range(args.reps):
            shift = rep % len(base)
            rows += one_rep(bench, observers, base[shift:] + base[:shift], args.seconds)
    finally:
        for obs in observers:
            obs.stop()
        bench.close()
    (workdir / "rows.json").write_text(json.dumps(rows))
    report(rows, base)
    print(f"\nrows: {workdir / 'rows.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

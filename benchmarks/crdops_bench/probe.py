"""An outside observer: a client of its own, in a process of its own, timing what every other user of the cluster
feels while a migration runs.

Every 50 ms it sends `GET` of one ConfigMap, and every 50 ms `LIST` of the 50 ConfigMaps of its namespace: each
kind on a thread, a schedule and a kept-alive connection of its own, under an identity of its own (identities.py):
a ServiceAccount, which API Priority and Fairness queues, or the admin certificate (system:masters), which APF
exempts. The kinds do not wait for each other because a consistent LIST waits for the watch cache to catch up with
etcd while anyone writes (benchmarks/list_wait.py: ~95 ms instead of 2.4 ms); sent one after the other, the
GETs fell to ~10 a second during every fast pass and a pass's GET p99 was its 3rd-5th largest sample. In a process
of its own, so no thread of the harness, nor of another observer, holds its interpreter while an answer waits. It
writes one line per sample to a file; the harness reads them and summarises a window of them (idle: before a
contender starts; during: while it runs). `time.monotonic()` is one clock for every process on Linux.

    python -m benchmarks.crdops_bench.probe < spec.json   # spec: server, ca_cert, token | cert_file + key_file, out
"""
from __future__ import annotations

import bisect
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import REPO
from .identities import NAMESPACE

INTERVAL = 0.05
CONFIGMAPS = 50
FLOW_SCHEMA_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PERCENTILES = (50, 90, 95, 99)
FLOW_SCHEMA_LINE = "# flowschema "


def percentile(values: list, q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def pct_key(q: float) -> str:
    """The window's key of a percentile: p99, p90, p97.5."""
    return f"p{q:g}"


def create_configmaps(kube) -> None:
    from tests.controlplane.kube import KubeError

    for i in range(CONFIGMAPS):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"probe-{i:03d}"},
                "data": {"k": "v" * 200}}
        try:
            kube.post(f"/api/v1/namespaces/{NAMESPACE}/configmaps", body)
        except KubeError as exc:
            if exc.status != 409:
                raise


@dataclass(frozen=True)
class Sample:
    at: float  # time.monotonic() when the request was sent
    kind: str  # "get" or "list"
    ms: float
    status: int


def summarize(samples: list, extra_percentiles: tuple = ()) -> dict:
    """Per request kind: samples sent, errors, percentiles of the answered ones (ms), max."""
    out = {}
    for kind in ("get", "list"):
        rows = [s for s in samples if s.kind == kind]
        ok = [s.ms for s in rows if s.status == 200]
        stats = {pct_key(q): percentile(ok, q) for q in sorted(set(PERCENTILES) | set(extra_percentiles))}
        out[kind] = dict(stats, n=len(rows), errors=len(rows) - len(ok), max=max(ok, default=float("nan")))
    return out


class Probe:
    """The observer process from start() to stop(); window(t0, t1) summarises the samples sent in [t0, t1)."""

    def __init__(self, identity, out: Path) -> None:
        self.identity, self.out = identity, out
        self.samples: list[Sample] = []
        self._sent: list[float] = []  # the samples' `at`, for bisect
        self._offset = 0
        self.flow_schema_uid = ""
        self._proc: subprocess.Popen | None = None
        self._log = None

    def start(self, timeout: float = 30.0) -> "Probe":
        spec = dict(self.identity.probe_auth(), server=self.identity.server, ca_cert=self.identity.ca_cert,
                    out=str(self.out))
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self._log = open(self.out.with_suffix(".log"), "w")
        self._proc = subprocess.Popen([sys.executable, "-m", "benchmarks.crdops_bench.probe"], stdin=subprocess.PIPE,
                                      stderr=self._log, env=env, cwd=str(REPO), text=True)
        self._proc.stdin.write(json.dumps(spec))  # it holds a token: never on a command line
        self._proc.stdin.close()
        deadline = time.monotonic() + timeout
        while not self.read():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"observer {self.identity.name} sent nothing; see {self.out.with_suffix('.log')}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
        self.read()

    def read(self) -> int:
        """Take the samples written since the last read; how many."""
        if not self.out.exists():
            return 0
        with open(self.out) as fh:
            fh.seek(self._offset)
            chunk = fh.read()
        complete = chunk[:chunk.rfind("\n") + 1]
        self._offset += len(complete.encode())
        before = len(self.samples)
        for line in complete.splitlines():
            if line.startswith(FLOW_SCHEMA_LINE):
                self.flow_schema_uid = line[len(FLOW_SCHEMA_LINE):].strip()
                continue
            at, kind, ms, status = line.split()
            self.samples.append(Sample(float(at), kind, float(ms), int(status)))
            self._sent.append(float(at))
        return len(self.samples) - before

    def window(self, t0: float, t1: float, extra_percentiles: tuple = ()) -> dict:
        self.read()
        lo, hi = bisect.bisect_left(self._sent, t0), bisect.bisect_left(self._sent, t1)
        return summarize(self.samples[lo:hi], extra_percentiles)


# ---- the observer process ----------------------------------------------------------------------------------
class SampleFile:
    """The observer's output: whole lines from both threads, flushed as written; the FlowSchema line once."""

    def __init__(self, out) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.flow_schema = ""

    def write(self, t0: float, kind: str, ms: float, status: int, flow_schema: str) -> None:
        with self.lock:
            if flow_schema and not self.flow_schema:
                self.flow_schema = flow_schema
                self.out.write(f"{FLOW_SCHEMA_LINE}{flow_schema}\n")
            self.out.write(f"{t0:.6f} {kind} {ms:.3f} {status}\n")


def sample_every(interval: float, kind: str, url: str, spec: dict, samples: SampleFile, stop: threading.Event) -> None:
    """One request kind on its own connection, every ``interval`` s until ``stop``; late: no burst to catch up."""
    import urllib3

    pool = urllib3.PoolManager(maxsize=1, cert_reqs="CERT_REQUIRED", ca_certs=spec["ca_cert"], retries=False,
                               cert_file=spec.get("cert_file"), key_file=spec.get("key_file"),
                               timeout=urllib3.Timeout(connect=5, read=30))
    headers = {"Accept": "application/json"}
    if spec.get("token"):
        headers["Authorization"] = f"Bearer {spec['token']}"
    tick = time.monotonic()
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            resp = pool.request("GET", url, headers=headers)
            status, uid = resp.status, resp.headers.get(FLOW_SCHEMA_HEADER, "")
        except urllib3.exceptions.HTTPError:
            status, uid = 0, ""
        samples.write(t0, kind, (time.monotonic() - t0) * 1000, status, uid)
        tick = max(tick + interval, time.monotonic() - interval)
        stop.wait(max(0.0, tick - time.monotonic()))


def observe(spec: dict) -> None:
    """Sample until SIGTERM; one line per sample (`at kind ms status`), GET and LIST each on a thread of its own."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    base = f"{spec['server']}/api/v1/namespaces/{NAMESPACE}/configmaps"
    with open(spec["out"], "a", buffering=1) as out:
        samples = SampleFile(out)
        threads = [threading.Thread(target=sample_every, args=(INTERVAL, kind, url, spec, samples, stop), daemon=True)
                   for kind, url in (("get", f"{base}/probe-000"), ("list", base))]
        for thread in threads:
            thread.start()
        while not stop.is_set():
            stop.wait(0.5)
        for thread in threads:
            thread.join(timeout=35)


if __name__ == "__main__":
    observe(json.loads(sys.stdin.read()))

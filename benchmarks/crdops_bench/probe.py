"""An outside observer: a client of its own, in a process of its own, timing what every other user of the cluster
feels while a migration runs.

Every 50 ms it sends `GET` of one ConfigMap, and every 50 ms `LIST` of the 50 ConfigMaps of its namespace, under
an identity of its own (identities.py): a ServiceAccount, which API Priority and Fairness queues, or the admin
certificate (system:masters), which APF exempts. Each request kind runs in a process of its own, on its own
schedule and kept-alive connection: a consistent LIST waits for the watch cache to catch up with etcd while
anyone writes (benchmarks/list_wait.py: ~95 ms instead of 2.4 ms), so sent in turn the GETs fell to ~10 a second
during every fast pass and a pass's GET p99 was its 3rd-5th largest sample; and no thread of the harness, of
another observer or of the other kind holds the interpreter while an answer waits. Each process writes one line
per sample to a file of its own; the harness reads them and summarises a window of them (idle: before a contender
starts; during: while it runs). `time.monotonic()` is one clock for every process on Linux.

    python -m benchmarks.crdops_bench.probe < spec.json   # spec: server, ca_cert, token | cert_file + key_file, kind, out
"""
from __future__ import annotations

import bisect
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import REPO
from .identities import NAMESPACE

INTERVAL = 0.05
CONFIGMAPS = 50
FLOW_SCHEMA_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PERCENTILES = (50, 90, 95, 99)
# of a window's GETs kept by value: a p99 pooled over windows of different lengths needs more than each one's 1 %
SLOWEST_SHARE = 0.10
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
    """Per request kind: samples sent, errors, percentiles of the answered ones (ms), max; for GETs also the
    slowest answers by value."""
    out = {}
    for kind in ("get", "list"):
        sent = [s for s in samples if s.kind == kind]
        ok = [s.ms for s in sent if s.status == 200]
        stats = {pct_key(q): percentile(ok, q) for q in sorted(set(PERCENTILES) | set(extra_percentiles))}
        out[kind] = dict(stats, n=len(sent), errors=len(sent) - len(ok), max=max(ok, default=float("nan")))
        if kind == "get":
            out[kind]["slowest_ms"] = slowest(ok)
    return out


def slowest(values: list[float]) -> list[float]:
    """The slowest SLOWEST_SHARE of a window's answers, slowest first: enough to pool several windows' p99
    (calibration.pooled_multiple) without keeping every sample in the rows."""
    keep = math.ceil(SLOWEST_SHARE * len(values))
    return [round(v, 3) for v in sorted(values, reverse=True)[:keep]]


KINDS = ("get", "list")


def parse_samples(text: str) -> tuple[list[Sample], str]:
    """A sampler's complete lines (`sent-at kind ms status`) as samples, and the FlowSchema uid it reported ('' if
    it reported none)."""
    samples, flow_schema_uid = [], ""
    for line in text.splitlines():
        if line.startswith(FLOW_SCHEMA_LINE):
            flow_schema_uid = line[len(FLOW_SCHEMA_LINE):].strip()
            continue
        at, kind, ms, status = line.split()
        samples.append(Sample(float(at), kind, float(ms), int(status)))
    return samples, flow_schema_uid


class SampleStream:
    """One request kind's sampler process from start() to stop(); window(t0, t1): its samples sent in [t0, t1)."""

    def __init__(self, identity, kind: str, out: Path) -> None:
        self.identity, self.kind, self.out = identity, kind, out
        self.samples: list[Sample] = []
        self._sent: list[float] = []  # the samples' `at`, in order: one request at a time
        self._offset = 0
        self.flow_schema_uid = ""
        self._proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> None:
        spec = dict(self.identity.probe_auth(), server=self.identity.server, ca_cert=self.identity.ca_cert,
                    kind=self.kind, out=str(self.out))
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self._log = open(self.out.with_suffix(".log"), "w")
        self._proc = subprocess.Popen([sys.executable, "-m", "benchmarks.crdops_bench.probe"], stdin=subprocess.PIPE,
                                      stderr=self._log, env=env, cwd=str(REPO), text=True)
        self._proc.stdin.write(json.dumps(spec))  # it holds a token: never on a command line
        self._proc.stdin.close()

    def failed(self) -> bool:
        return self._proc is None or self._proc.poll() is not None

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
        fresh, flow_schema_uid = parse_samples(complete)
        self.flow_schema_uid = flow_schema_uid or self.flow_schema_uid
        self.samples.extend(fresh)
        self._sent.extend(s.at for s in fresh)
        return len(fresh)

    def window(self, t0: float, t1: float) -> list[Sample]:
        self.read()
        lo, hi = bisect.bisect_left(self._sent, t0), bisect.bisect_left(self._sent, t1)
        return self.samples[lo:hi]


class Probe:
    """One observer: a sampler process per request kind (SampleStream), from start() to stop(); window(t0, t1)
    summarises the samples sent in [t0, t1)."""

    def __init__(self, identity, out: Path) -> None:
        self.identity = identity
        self.streams = {kind: SampleStream(identity, kind, out.with_name(f"{out.stem}-{kind}{out.suffix}"))
                        for kind in KINDS}

    @property
    def flow_schema_uid(self) -> str:
        return next((s.flow_schema_uid for s in self.streams.values() if s.flow_schema_uid), "")

    def start(self, timeout: float = 30.0) -> "Probe":
        for stream in self.streams.values():
            stream.start()
        deadline = time.monotonic() + timeout
        for stream in self.streams.values():
            while not stream.read():
                if time.monotonic() > deadline or stream.failed():
                    self.stop()
                    raise RuntimeError(f"observer {self.identity.name} sent no {stream.kind.upper()}; see "
                                       f"{stream.out.with_suffix('.log')}")
                time.sleep(0.1)
        return self

    def stop(self) -> None:
        for stream in self.streams.values():
            stream.stop()

    def window(self, t0: float, t1: float, extra_percentiles: tuple = ()) -> dict:
        return summarize([s for stream in self.streams.values() for s in stream.window(t0, t1)], extra_percentiles)


# ---- the observer process ----------------------------------------------------------------------------------
def observe(spec: dict) -> None:
    """Sample one request kind every INTERVAL s until SIGTERM; one line per sample (`at kind ms status`), flushed
    as it is written; the FlowSchema the apiserver named, once. Late: no burst to catch up."""
    import urllib3

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    pool = urllib3.PoolManager(maxsize=1, cert_reqs="CERT_REQUIRED", ca_certs=spec["ca_cert"], retries=False,
                               cert_file=spec.get("cert_file"), key_file=spec.get("key_file"),
                               timeout=urllib3.Timeout(connect=5, read=30))
    headers = {"Accept": "application/json"}
    if spec.get("token"):
        headers["Authorization"] = f"Bearer {spec['token']}"
    kind, url = spec["kind"], f"{spec['server']}/api/v1/namespaces/{NAMESPACE}/configmaps"
    url += "/probe-000" if kind == "get" else ""
    flow_schema = ""
    with open(spec["out"], "a", buffering=1) as out:
        tick = time.monotonic()
        while not stop:
            t0 = time.monotonic()
            try:
                resp = pool.request("GET", url, headers=headers)
                status, uid = resp.status, resp.headers.get(FLOW_SCHEMA_HEADER, "")
            except urllib3.exceptions.HTTPError:
                status, uid = 0, ""
            ms = (time.monotonic() - t0) * 1000
            if uid and not flow_schema:
                flow_schema = uid
                out.write(f"{FLOW_SCHEMA_LINE}{uid}\n")
            out.write(f"{t0:.6f} {kind} {ms:.3f} {status}\n")
            tick = max(tick + INTERVAL, time.monotonic() - INTERVAL)
            time.sleep(max(0.0, tick - time.monotonic()))


if __name__ == "__main__":
    observe(json.loads(sys.stdin.read()))

"""A second client that times what every other user of the cluster feels while a migration runs.

Every 50 ms it sends `GET` of one ConfigMap and `LIST` of the 50 ConfigMaps of its namespace, one after the
other on one kept-alive connection, as its own ServiceAccount (identities.py). The latencies of a window
before a contender starts (idle) are compared with those while it runs (during).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import urllib3

from .identities import NAMESPACE

INTERVAL = 0.05
CONFIGMAPS = 50
FLOW_SCHEMA_HEADER = "X-Kubernetes-PF-FlowSchema-UID"


def percentile(values: list, q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


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


class Probe:
    """Runs in a thread from start() to stop(); window(t0, t1) summarises the samples sent in [t0, t1)."""

    def __init__(self, identity) -> None:
        self.identity = identity
        self.pool = urllib3.PoolManager(maxsize=1, cert_reqs="CERT_REQUIRED", ca_certs=identity.ca_cert,
                                        retries=False, timeout=urllib3.Timeout(connect=5, read=30))
        self.headers = {"Authorization": f"Bearer {identity.token}", "Accept": "application/json"}
        self.samples: list[Sample] = []
        self.flow_schema_uid = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="probe", daemon=True)

    def start(self) -> "Probe":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.pool.clear()

    def _request(self, kind: str, path: str) -> None:
        t0 = time.monotonic()
        try:
            resp = self.pool.request("GET", self.identity.server + path, headers=self.headers)
            status = resp.status
            self.flow_schema_uid = self.flow_schema_uid or resp.headers.get(FLOW_SCHEMA_HEADER, "")
        except urllib3.exceptions.HTTPError:
            status = 0
        self.samples.append(Sample(t0, kind, (time.monotonic() - t0) * 1000, status))

    def _loop(self) -> None:
        base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        tick = time.monotonic()
        while not self._stop.is_set():
            self._request("get", f"{base}/probe-000")
            self._request("list", base)
            tick += INTERVAL
            self._stop.wait(max(0.0, tick - time.monotonic()))
            tick = max(tick, time.monotonic() - INTERVAL)  # late: do not burst to catch up

    def window(self, t0: float, t1: float) -> dict:
        out = {}
        for kind in ("get", "list"):
            rows = [s for s in self.samples if s.kind == kind and t0 <= s.at < t1]
            ok = [s.ms for s in rows if s.status == 200]
            out[kind] = {"n": len(rows), "errors": len(rows) - len(ok),
                         "p50": percentile(ok, 50), "p90": percentile(ok, 90), "p99": percentile(ok, 99),
                         "max": max(ok, default=float("nan"))}
        return out

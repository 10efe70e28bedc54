"""What any writer costs another client's consistent LIST: one quiet kube-apiserver + etcd, no migration.

    . tools/env.sh && python benchmarks/list_wait.py                 # 30 s per write rate, rates 0,1,10,100
    . tools/env.sh && python benchmarks/list_wait.py --seconds 60 --rates 0,5,10

A probe sends, every 50 ms on one kept-alive connection, a GET of one ConfigMap, a LIST of the 50 ConfigMaps of
its namespace with resourceVersion unset (a consistent read, what `kubectl get` sends) and the same LIST with
resourceVersion=0 (the watch cache as it is). Meanwhile a second client patches one Secret in another namespace
at each rate in turn. A consistent LIST is answered from the watch cache only once the cache has caught up with
etcd's current revision, which any write anywhere moves on: the benchmark shows from which write rate the LIST
waits for that, whoever writes. Prints one line per rate (n, p50, p99 per request kind). A script, not a test.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import urllib3  # noqa: E402

from tests.controlplane.cluster import admin_kube, start_cluster  # noqa: E402

PROBE_INTERVAL = 0.05
REQUESTS = (("get", "/api/v1/namespaces/default/configmaps/p-000"),
            ("list", "/api/v1/namespaces/default/configmaps"),
            ("list-rv0", "/api/v1/namespaces/default/configmaps?resourceVersion=0"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def seed(cluster) -> None:
    kube = admin_kube(cluster)
    kube.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "writer"}})
    for i in range(50):
        kube.post("/api/v1/namespaces/default/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"p-{i:03d}"}, "data": {"k": "v" * 200}})
    kube.post("/api/v1/namespaces/writer/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})


def client(cluster) -> urllib3.PoolManager:
    return urllib3.PoolManager(maxsize=1, cert_reqs="CERT_REQUIRED", ca_certs=str(cluster.pki.ca_cert),
                               cert_file=str(cluster.pki.admin_cert), key_file=str(cluster.pki.admin_key))


class Writer(threading.Thread):
    """Patches one Secret `rate` times a second until stopped."""

    def __init__(self, cluster, rate: float):
        super().__init__(daemon=True)
        self.http, self.url, self.rate = client(cluster), cluster.server + "/api/v1/namespaces/writer/secrets/s", rate
        self.stopped = threading.Event()

    def run(self) -> None:
        n, due = 0, time.monotonic()
        while self.rate and not self.stopped.is_set():
            n += 1
            self.http.request("PATCH", self.url, body=b'{"metadata":{"labels":{"n":"%d"}}}' % n,
                              headers={"Content-Type": "application/merge-patch+json"})
            due += 1 / self.rate
            time.sleep(max(0.0, due - time.monotonic()))


def probe(cluster, seconds: float) -> dict[str, list[float]]:
    http, got = client(cluster), {kind: [] for kind, _path in REQUESTS}
    end, due = time.monotonic() + seconds, time.monotonic()
    while time.monotonic() < end:
        for kind, path in REQUESTS:
            t0 = time.monotonic()
            http.request("GET", cluster.server + path)
            got[kind].append((time.monotonic() - t0) * 1000)
        due += PROBE_INTERVAL
        time.sleep(max(0.0, due - time.monotonic()))
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--seconds", type=float, default=30, help="probe window per write rate")
    ap.add_argument("--rates", default="0,1,10,100", help="writes per second of the second client, in turn")
    args = ap.parse_args()
    cluster = start_cluster("listwait", Path(tempfile.mkdtemp(prefix="crdops-listwait-")))
    try:
        seed(cluster)
        time.sleep(15)  # the seeding's aftermath
        for rate in (float(r) for r in args.rates.split(",")):
            writer = Writer(cluster, rate)
            writer.start()
            time.sleep(1)
            got = probe(cluster, args.seconds)
            writer.stopped.set()
            writer.join()
            print(f"writes/s {rate:5g}: " + " | ".join(
                f"{kind} n={len(v)} p50={percentile(v, 50):.1f} p99={percentile(v, 99):.1f} ms" for kind, v in got.items()),
                flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

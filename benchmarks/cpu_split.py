"""Where the time goes: CPU-seconds of kube-apiserver, etcd and the client during one 10k-object pass.

    python benchmarks/cpu_split.py

Runs the benchmark's ceiling client and the engine (default settings) on fresh data, reading the
apiserver's and etcd's CPU time from /proc and the client's from its rusage. On a 2-core machine the
sum is capped at 2 x wall time: when the apiserver takes most of it, no client can go faster.
"""
from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import run as bench_run  # noqa: E402  (the benchmark module, found through the path set above)

OBJECTS = 10_000


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    bench = bench_run.Bench(types.SimpleNamespace(best_workers=16), Path(tempfile.mkdtemp(prefix="crdops-cpu-")))
    try:
        kas, etcd = bench.cluster.apiserver.process.pid, bench.cluster.etcd.process.pid
        print("| client | wall s | apiserver CPU-s | etcd CPU-s | client CPU-s | CPU-s available (2 cores) |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, run in (("ceiling (8 threads)", lambda g: bench.ceiling(g, 8)),
                           ("ours, default settings", lambda g: bench.engine(g, {}))):
            group = bench.seed("p", OBJECTS)
            time.sleep(2)  # let the watch cache settle after seeding
            a0, e0 = cpu_seconds(kas), cpu_seconds(etcd)
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = run(group)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            client = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
            ok, _counts = bench.verify(group, OBJECTS)
            if not ok:
                print(f"{label}: etcd check FAILED")
                return 1
            print(f"| {label} | {out['seconds']:.1f} | {cpu_seconds(kas) - a0:.1f} | {cpu_seconds(etcd) - e0:.1f} | "
                  f"{client:.1f} | {2 * out['seconds']:.1f} |")
            bench.drop(group)
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

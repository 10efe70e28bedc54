"""A competing client for the pace tests: threads LISTing a big set of objects (full objects, no paging) until
told to stop, in a process of its own (not sharing the test's GIL). Prints a JSON summary on stdout at the end.

    python -m tests.integration.list_load SERVER CA CERT KEY PATH THREADS STOP_FILE
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

from tests.controlplane.kube import Kube


def hammer(kube: Kube, path: str, stop: Path, latencies: list[float], lock: threading.Lock) -> None:
    while not stop.exists():
        start = time.monotonic()
        kube.get(path)
        with lock:
            latencies.append(time.monotonic() - start)


def main(argv: list[str]) -> int:
    server, ca, cert, key, path, threads, stop_file = argv
    kube = Kube(server, Path(ca), Path(cert), Path(key), maxsize=int(threads) + 2)
    stop = Path(stop_file)
    latencies: list[float] = []
    lock = threading.Lock()
    workers = [threading.Thread(target=hammer, args=(kube, path, stop, latencies, lock), daemon=True)
               for _i in range(int(threads))]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.monotonic() - started
    lat = sorted(latencies)
    print(json.dumps({"lists": len(lat), "seconds": round(elapsed, 2), "pid": os.getpid(),
                      "p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
                      "max_ms": round(lat[-1] * 1000, 1) if lat else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

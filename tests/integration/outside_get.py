"""An outside client for the latency probe's tests: GETs of one path every 50 ms for a number of seconds, in a process
of its own (not sharing the test's interpreter). Prints one JSON line: {"pid": ..., "samples": [[started, seconds]]},
``started`` on time.monotonic() (the same clock as the test's on Linux).

    python -m tests.integration.outside_get SERVER CA CERT KEY PATH SECONDS
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from tests.controlplane.kube import Kube


def main(argv: list[str]) -> int:
    server, ca, cert, key, path, seconds = argv
    kube = Kube(server, Path(ca), Path(cert), Path(key), maxsize=2)
    kube.get(path)  # the connection's TLS handshake is not a sample
    samples = []
    end = time.monotonic() + float(seconds)
    next_at = time.monotonic()
    while time.monotonic() < end:
        started = time.monotonic()
        kube.get(path)
        samples.append([started, time.monotonic() - started])
        next_at = max(next_at + 0.05, time.monotonic() - 0.05)
        time.sleep(max(0.0, next_at - time.monotonic()))
    print(json.dumps({"pid": os.getpid(), "samples": samples}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

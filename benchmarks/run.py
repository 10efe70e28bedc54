"""Side-by-side storage-migration benchmark on a real local control plane (kube-apiserver + etcd 1.37).

    python benchmarks/run.py                  # the performance targets: suites gentle + role, 2 repetitions (make bench)
    python benchmarks/run.py --quick          # smoke run: small N, one repetition, prints only
    python benchmarks/run.py --suites throughput,fleet    # every contender side by side (ceiling, ours, ansible, ...)
    python benchmarks/run.py --suites calibrate --gentle-n 5000 --reps 3   # speed against gentleness, two observers

The code is the package benchmarks/crdops_bench/ (its docstring lists the modules); `--help` lists the options.
Every result is checked in etcd (100% of the keys at v1beta1); a wrong answer is reported as FAILED.
Results: printed, and written into the generated block of docs/performance.md (a calibration run also writes its
first-screen block and docs/performance-calibration.svg). This is a script, not a test.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.crdops_bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

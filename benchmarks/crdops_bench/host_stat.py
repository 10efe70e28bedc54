"""What the machine's CPU did, once a second, from /proc/stat: above all the time the hypervisor gave to others.

The benchmark runs in a virtual machine of two cores; when the host runs something else, the guest's processes
wait with nothing of theirs to show for it and the kernel counts the wait as *steal*. An observer's slow samples
in such a period are the host's, not the contender's. A sampler thread writes ``monotonic user nice system idle
iowait irq softirq steal`` (clock ticks since boot) once a second; a window's share is read back from the file.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

FILE_NAME = "host-stat.txt"  # in a run's workdir, through the gentle and calibrate suites
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


class HostStat:
    """A daemon thread appending the machine's CPU counters to ``out`` every ``interval`` s until stop()."""

    def __init__(self, out: Path, interval: float = 1.0) -> None:
        self.out, self.interval = Path(out), interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="host-stat", daemon=True)

    def start(self) -> "HostStat":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        with open(self.out, "a", buffering=1, encoding="ascii") as out:
            while not self._stop.is_set():
                with open("/proc/stat", encoding="ascii") as stat:
                    ticks = stat.readline().split()[1:1 + len(FIELDS)]
                out.write(f"{time.monotonic():.3f} " + " ".join(ticks) + "\n")
                self._stop.wait(self.interval)


def read(path: Path) -> list[tuple[float, list[int]]]:
    """The samples of a HostStat file, in order (lines of other formats are skipped)."""
    samples = []
    for line in Path(path).read_text(encoding="ascii").splitlines():
        parts = line.split()
        if len(parts) == 1 + len(FIELDS) and all(p.isdigit() for p in parts[1:]):
            samples.append((float(parts[0]), [int(p) for p in parts[1:]]))
    return samples


def share(samples: list[tuple[float, list[int]]], t0: float, t1: float, field: str = "steal") -> float:
    """The share of all CPU time in [t0, t1] that went to ``field`` (NaN without two samples in it)."""
    inside = [ticks for at, ticks in samples if t0 <= at <= t1]
    if len(inside) < 2:
        return float("nan")
    delta = [b - a for a, b in zip(inside[0], inside[-1])]
    total = sum(delta)
    return delta[FIELDS.index(field)] / total if total else float("nan")

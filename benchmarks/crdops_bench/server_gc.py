"""The apiserver's garbage collections, from its log, on the observers' clock.

With GODEBUG=gctrace=1 in its environment (the control plane's processes inherit the benchmark's), the Go runtime
prints one line per collection to stderr: ``gc 12 @34.567s 1%: 0.1+250+0.02 ms clock, ... 450->460->160 MB, ...``,
the time since the process started and the wall-clock milliseconds of the stop-the-world start, the concurrent
mark and the stop-the-world end. On two cores the mark takes what CPU is idle, so the observers' requests that
arrive during a mark of 200-650 ms wait: the apiserver's allocations, not only its work per request, reach other
clients' tail. The line carries no wall time; the process start does (klog's first line), and the monotonic clock
the observers use differs from the wall clock by a constant on one machine.
"""
from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass
from pathlib import Path

_GC = re.compile(r"^gc \d+ @(?P<at>[\d.]+)s [\d.]+%: (?P<stw1>[\d.]+)\+(?P<mark>[\d.]+)\+(?P<stw2>[\d.]+) ms clock.*?"
                 r"(?P<before>\d+)->\d+->(?P<live>\d+) MB")
_KLOG = re.compile(r"^[IWEF](?P<month>\d\d)(?P<day>\d\d) (?P<clock>\d\d:\d\d:\d\d\.\d+)")


@dataclass(frozen=True)
class Collection:
    start: float  # time.monotonic() of the collection's start
    seconds: float  # both stop-the-world phases and the mark between them, wall clock
    heap_before_mb: int
    live_mb: int

    @property
    def end(self) -> float:
        return self.start + self.seconds


def process_start(log: Path, year: int) -> float:
    """time.monotonic() at the apiserver's first log line (its start, to a few ms)."""
    with open(log, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            found = _KLOG.match(line)
            if found:
                wall = datetime.datetime.strptime(f"{year}-{found['month']}-{found['day']} {found['clock']}",
                                                  "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
                return wall.timestamp() - (time.time() - time.monotonic())
    raise ValueError(f"{log}: no klog line to place the process start")


def collections(log: Path, year: int) -> list[Collection]:
    """Every collection the log traces, in order (none without GODEBUG=gctrace=1)."""
    start = process_start(log, year)
    found = []
    with open(log, encoding="utf-8", errors="replace") as lines:
        for line in lines:
            gc = _GC.match(line)
            if gc:
                seconds = (float(gc["stw1"]) + float(gc["mark"]) + float(gc["stw2"])) / 1000.0
                found.append(Collection(start + float(gc["at"]), seconds, int(gc["before"]), int(gc["live"])))
    return found


def within(found: list[Collection], t0: float, t1: float) -> list[Collection]:
    """The collections that started in [t0, t1)."""
    return [gc for gc in found if t0 <= gc.start < t1]


def during_any(found: list[Collection], at: float, margin: float = 0.05) -> bool:
    """Whether ``at`` (a request's send time) falls in a collection, or ``margin`` s before one (it was answered in
    it)."""
    return any(gc.start - margin <= at < gc.end for gc in found)

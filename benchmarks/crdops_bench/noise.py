"""Where the observers' slowest answers of a gentle or calibrate run came from (benchmarks/noise_sources.py, and a
sentence of the calibration's first screen): the apiserver's garbage collections (server_gc.py), the host taking the
CPU away (host_stat.py), or neither. Reads what the run left in its workdir: rows.json, the observers' GET samples,
the apiserver's log and the host's counters.
"""
from __future__ import annotations

import bisect
import datetime
import json
import math
import statistics
from pathlib import Path

from . import host_stat, observers, server_gc
from .probe import parse_samples, percentile

IDLE_SEARCH_S = 600.0  # how far before the work an old row's idle window is looked for


def get_samples(workdir: Path, observer: str) -> list[tuple[float, float]]:
    """(sent at, ms) of an observer's answered GETs, in order."""
    text = observers.sample_file(workdir, observer).read_text()
    samples, _uid = parse_samples(text[:text.rfind("\n") + 1])  # a sampler stopped mid-line leaves half a line
    return [(s.at, s.ms) for s in samples if s.kind == "get" and s.status == 200]


def inside(samples: list[tuple[float, float]], t0: float, t1: float) -> list[tuple[float, float]]:
    """The samples sent in [t0, t1); ``samples`` are in the order they were sent."""
    lo = bisect.bisect_left(samples, t0, key=lambda s: s[0])
    hi = bisect.bisect_left(samples, t1, key=lambda s: s[0])
    return samples[lo:hi]


def idle_span(row: dict, samples: list[tuple[float, float]], observer: str) -> tuple[float, float] | None:
    """The row's idle window: as recorded, or else the last span before the work whose samples give the recorded
    count, percentiles and max (rows of runs before the windows carried their times), which places it to within
    the few samples at its edges that leave the summary as it is."""
    idle = observers.row_window(row, observer, "idle")
    if "t0" in idle:
        return idle["t0"], idle["t1"]
    want = idle.get("get") or {}
    n = int(want.get("n") or 0)
    if n == 0:
        return None
    keys = [k for k in want if k.startswith("p") and k[1:].replace(".", "", 1).isdigit()]
    found = None
    for first in range(len(samples) - n):
        start = samples[first][0]
        if not row["t0"] - IDLE_SEARCH_S <= start < row["t0"]:
            continue
        values = [ms for _at, ms in samples[first:first + n]]
        if max(values) == want["max"] and all(percentile(values, float(k[1:])) == want[k] for k in keys):
            found = (start, samples[first + n][0])
    return found


class Sources:
    """What one run left behind: the collections, the host's counters and each observer's GETs."""

    def __init__(self, workdir: Path, host_file: Path | None = None) -> None:
        rows = json.loads((workdir / "rows.json").read_text())
        self.rows = [r for r in rows["raw"] if r.get("suite") in ("gentle", "calibrate")]
        year = datetime.datetime.fromtimestamp(rows["started"], datetime.timezone.utc).year
        log = next((workdir / "bench" / "logs").glob("kube-apiserver-*.log"))
        self.collections = server_gc.collections(log, year)
        host = host_file or workdir / host_stat.FILE_NAME
        self.host = host_stat.read(host) if host.exists() else []
        self.samples = {obs: get_samples(workdir, obs) for obs in observers.OBSERVERS}

    def flagged(self, observer: str, t0: float, t1: float) -> list[tuple[float, bool]]:
        """One observer's GET latencies (ms) in [t0, t1), each with whether it was sent inside a collection."""
        # a collection that began up to a second before the window may still run in it
        near = server_gc.within(self.collections, t0 - 1.0, t1)
        return [(ms, server_gc.during_any(near, at)) for at, ms in inside(self.samples[observer], t0, t1)]

    def window(self, observer: str, t0: float, t1: float) -> dict:
        """One observer's GETs in [t0, t1) beside the collections and the host's steal over it."""
        mine = self.flagged(observer, t0, t1)
        gcs = server_gc.within(self.collections, t0, t1)
        ranked = sorted(mine, reverse=True)
        slowest = ranked[:max(1, math.ceil(len(ranked) / 100))]
        minutes = (t1 - t0) / 60.0
        return {"n": len(mine), "p99": percentile([ms for ms, _gc in mine], 99),
                "p99_outside_gc": percentile([ms for ms, gc in mine if not gc], 99),
                "gc_per_min": len(gcs) / minutes if minutes else math.nan,
                "gc_time_share": sum(gc.seconds for gc in gcs) / (t1 - t0) if t1 > t0 else math.nan,
                "slowest_in_gc": sum(gc for _ms, gc in slowest) / len(slowest) if slowest else math.nan,
                "steal": host_stat.share(self.host, t0, t1)}

    def split(self, observer: str, t0: float, t1: float) -> tuple[list[float], list[float]]:
        """One observer's GET latencies (ms) in [t0, t1): those sent inside a collection, and the others."""
        mine = self.flagged(observer, t0, t1)
        return [ms for ms, gc in mine if gc], [ms for ms, gc in mine if not gc]

    def row(self, row: dict) -> dict:
        """Per observer: the idle window and the work's, and their p99 multiples with and without collections."""
        out = {}
        for obs in observers.OBSERVERS:
            span = idle_span(row, self.samples[obs], obs)
            if span is None:
                continue
            idle, during = self.window(obs, *span), self.window(obs, row["t0"], row["t1"])
            out[obs] = {"idle": idle, "during": during, "multiple": during["p99"] / idle["p99"],
                        "multiple_outside_gc": during["p99_outside_gc"] / idle["p99_outside_gc"]}
        return out


def median_of(cells: list[dict], *keys: str) -> float:
    """The median of ``cell[keys[0]][keys[1]]...`` over the cells that have a number there (NaN for none)."""
    values = []
    for cell in cells:
        for key in keys:
            cell = cell[key]
        values.append(cell)
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


DEFAULT, IN_TREE = "ours-gentle", "in-tree"
STEAL_NOTED = 0.05  # a window in which the host took more than this share of the CPU is counted


def sentence(workdir: Path, rows: list[dict]) -> str:
    """For the first screen: where the observers' slowest GETs came from, in the default's passes and the in-tree
    migrator's ('' when the run traced no collection)."""
    try:
        sources = Sources(workdir)
    except (OSError, StopIteration, ValueError, KeyError):
        return ""
    if not sources.collections:
        return ""
    analysed = [(r, sources.row(r)) for r in rows]
    cells = {name: [c for r, found in analysed if r["contender"] == name for c in found.values()]
             for name in (DEFAULT, IN_TREE)}
    every = [c for _r, found in analysed for c in found.values()]
    if not cells[DEFAULT] or not every:
        return ""
    text = (f"Where the observers' slowest GETs came from (`python benchmarks/noise_sources.py <workdir>`, medians "
            f"over windows and both observers): the apiserver collected garbage {median_of(every, 'idle', 'gc_per_min'):.1f} "
            f"times a minute at idle, {median_of(cells[DEFAULT], 'during', 'gc_per_min'):.1f} during the default's passes")
    if cells[IN_TREE]:
        text += f" and {median_of(cells[IN_TREE], 'during', 'gc_per_min'):.1f} during the in-tree migrator's"
    text += (f"; {_pct(median_of(cells[DEFAULT], 'during', 'slowest_in_gc'))} of the slowest 1 % of GETs during the "
             f"default's passes were sent in a collection")
    if cells[IN_TREE]:
        text += f" ({_pct(median_of(cells[IN_TREE], 'during', 'slowest_in_gc'))} in the in-tree migrator's)"
    text += (f"; without those GETs the default's multiples read x{median_of(cells[DEFAULT], 'multiple_outside_gc'):.2f} "
             f"instead of x{median_of(cells[DEFAULT], 'multiple'):.2f}.")
    return text + " " + _steal_text(every)


def _steal_text(every: list[dict]) -> str:
    steal = [c[w]["steal"] for c in every for w in ("idle", "during") if not math.isnan(c[w]["steal"])]
    if not steal:
        return "The host's steal was not recorded."
    noted = sum(1 for s in steal if s > STEAL_NOTED)
    return (f"The host took at most {_pct(max(steal))} of the CPU in a window (steal); {noted} of {len(steal)} "
            f"windows over {STEAL_NOTED:.0%}.")


def _pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.0%}"

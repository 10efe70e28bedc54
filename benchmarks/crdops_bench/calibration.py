"""The calibrate suite's points: per contender, the median and spread (min–max over the repetitions) of its
objects/s, of each observer's GET p99 multiple (during ÷ idle), of our probe's multiple and of our probe ÷ each
observer. Our probe's multiple is set against the observer's multiple at our probe's percentile (own_probe.py):
like against like.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import observers, own_probe
from .observers import OBSERVERS
from .probe import pct_key
from .stats import NAN, div, rows, summarize
from .suites import AGAINST, APF, DEFAULT_BUDGET, budget_of

SUITE = "calibrate"
MIN_IDLE_SAMPLES = 1000  # the floor for each observer's idle window
MIN_REPS = 3


@dataclass(frozen=True)
class Spread:
    median: float
    lo: float
    hi: float
    n: int

    @classmethod
    def of(cls, values: list) -> "Spread":
        s = summarize(values)
        return cls(s["median"], s["min"], s["max"], s["n"])


@dataclass
class Point:
    contender: str
    budget: float
    runs: int
    ok: bool
    rate: Spread
    multiple: dict[str, Spread] = field(default_factory=dict)  # observer -> GET p99 multiple
    own: Spread = Spread(NAN, NAN, NAN, 0)  # our probe's multiple
    own_tail: Spread = Spread(NAN, NAN, NAN, 0)  # our probe's p99 multiple, where the engine holds the tail
    own_percentile: float = own_probe.DEFAULT_PERCENTILE
    own_vs: dict[str, Spread] = field(default_factory=dict)  # observer -> our probe ÷ observer, same percentile
    pooled: dict[str, float] = field(default_factory=dict)  # observer -> GET p99 multiple over every repetition
    idle_samples: dict[str, int] = field(default_factory=dict)  # observer -> fewest idle GET samples of a window

    @property
    def ours(self) -> bool:
        return self.contender != "in-tree"

    @property
    def earlier(self) -> str | None:
        """The git commit whose engine this is (`--against`), None for this tree's."""
        return self.contender[len(AGAINST):] if self.contender.startswith(AGAINST) else None

    @property
    def this_engine(self) -> bool:
        """Ours at a budget, as this tree has it: the points the checks judge and the chart joins."""
        return self.ours and self.contender != APF and self.earlier is None

    @property
    def label(self) -> str:
        if not self.ours:
            return "in-tree"
        text = f"{self.budget:g}" + (" (default)" if self.budget == DEFAULT_BUDGET else "")
        if self.earlier is not None:
            return f"{text}, engine of {self.earlier}"
        return f"{text} + APF" if self.contender == APF else text


def observer_multiple(row: dict, obs: str, stat: str = "p99") -> float:
    return div(observers.get_stat(row, obs, "during", stat), observers.get_stat(row, obs, "idle", stat))


def own_ratio(row: dict, obs: str) -> float:
    """Our probe's multiple ÷ the observer's multiple at our probe's percentile."""
    mine = own_probe.summary(row)
    if not mine:
        return NAN
    return div(own_probe.multiple(mine), observer_multiple(row, obs, pct_key(own_probe.percentile(mine))))


def pooled_multiple(rs: list, obs: str) -> float:
    """One p99 over every GET an observer sent during a contender's passes, each answer over the idle p99 of its
    own repetition: with passes of 30-100 s, a single pass's p99 is its 5-20 slowest answers, and the median of
    three such spreads wider than the differences between contenders. From each window's slowest answers
    (probe.slowest); NaN where a window kept too few of them to know the pooled p99 exactly, or rows lack them."""
    kept, answered, floors = [], 0, []
    for r in rs:
        during, idle = observers.row_window(r, obs, "during").get("get") or {}, observers.get_stat(r, obs, "idle")
        slow = during.get("slowest_ms")
        if slow is None or not idle > 0:
            return NAN
        ok = int(during["n"] - during["errors"])
        answered += ok
        kept += [ms / idle for ms in slow]
        if len(slow) < ok and slow:  # a window's unkept answers are no slower than the last one it kept
            floors.append(slow[-1] / idle)
    rank = answered - math.ceil(0.99 * answered) + 1  # the p99 is the rank-th slowest (nearest rank)
    if not answered or rank > len(kept):
        return NAN
    value = sorted(kept, reverse=True)[rank - 1]
    return value if all(f <= value for f in floors) else NAN


def point(raw: list, contender: str, n: int) -> Point | None:
    rs = rows(raw, SUITE, contender, n)
    if not rs:
        return None
    mine = [own_probe.summary(r) for r in rs]
    budget = next((own_probe.budget(m) for m in mine if m and own_probe.budget(m) == own_probe.budget(m)),
                  budget_of(contender))
    return Point(
        contender, budget, len(rs), all(r["ok"] for r in rs), Spread.of([r.get("objects_per_s") for r in rs]),
        multiple={o: Spread.of([observer_multiple(r, o) for r in rs]) for o in OBSERVERS},
        own=Spread.of([own_probe.multiple(m) if m else NAN for m in mine]),
        own_tail=Spread.of([own_probe.tail_multiple(m) if m else NAN for m in mine]),
        own_percentile=next((own_probe.percentile(m) for m in mine if m), own_probe.DEFAULT_PERCENTILE),
        own_vs={o: Spread.of([own_ratio(r, o) for r in rs]) for o in OBSERVERS},
        pooled={o: pooled_multiple(rs, o) for o in OBSERVERS},
        idle_samples={o: fewest([observers.get_stat(r, o, "idle", "n") for r in rs]) for o in OBSERVERS})


def fewest(counts: list) -> int:
    known = [c for c in counts if not math.isnan(c)]  # NaN: a row without that observer
    return int(min(known)) if known else 0


def contenders(raw: list) -> list[str]:
    """The calibrate contenders of a run: in-tree first, then ours by budget, APF, then earlier engines (--against)."""
    names = {r["contender"] for r in raw if r["suite"] == SUITE}
    return sorted(names, key=lambda c: (c != "in-tree", c.startswith(AGAINST), c == APF,
                                        budget_of(c) if c != "in-tree" else 0, c))


def points(raw: list, n: int) -> list[Point]:
    return [p for p in (point(raw, c, n) for c in contenders(raw)) if p is not None]


def suite_rows(raw: list, n: int) -> list:
    """Every row of the calibrate suite at N objects, of every contender."""
    return [r for r in raw if r["suite"] == SUITE and r["n"] == n]


def sizes(raw: list) -> list[int]:
    return sorted({r["n"] for r in raw if r["suite"] == SUITE})


def idle_floor(pts: list[Point]) -> int:
    """The fewest idle GET samples any observer had in any window of the run."""
    counts = [c for p in pts for c in p.idle_samples.values()]
    return min(counts) if counts else 0

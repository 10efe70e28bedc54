"""The calibrate suite's pass/fail ratios (issue #39), from the points of one run (calibration.py):

  - the run counts: ≥ 3 repetitions per contender, ≥ 1,000 idle GET samples per observer and window;
  - at the default budget both observers' GET p99 multiple ≤ ×2.0;
  - our probe's multiple within ±25 % of each observer's (ours at every budget);
  - ours on or above the in-tree migrator's point: at least its objects/s at no more than its multiple, per
    observer (without and with the shipped APF objects; an earlier engine run beside ours, `--against`, is not
    judged);
  - the default at least the in-tree migrator's objects/s, else how far short and why, in figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .calibration import MIN_IDLE_SAMPLES, MIN_REPS, Point
from .observers import OBSERVERS, SHORT
from .stats import NAN, div, fmt
from .suites import APF, DEFAULT_BUDGET

GENTLE_MULTIPLE = 2.0
PROBE_TOLERANCE = 0.25


@dataclass(frozen=True)
class Check:
    name: str
    value: float
    target: str
    met: bool | None  # None: no target, shown beside the others
    detail: str = ""
    digits: int = 2  # for the value on the page


def find(pts: list[Point], contender: str) -> Point | None:
    return next((p for p in pts if p.contender == contender), None)


def spread_text(s, digits: int = 2) -> str:
    """median (min–max)"""
    return f"{fmt(s.median, digits)} ({fmt(s.lo, digits)}–{fmt(s.hi, digits)})"


def validity(pts: list[Point], required_samples: int) -> list[Check]:
    runs = min((p.runs for p in pts), default=0)
    out = [Check("repetitions per contender (fewest)", runs, f"≥ {MIN_REPS}", runs >= MIN_REPS, digits=0)]
    for obs in OBSERVERS:
        fewest = min((p.idle_samples.get(obs, 0) for p in pts), default=0)
        relaxed = "" if required_samples >= MIN_IDLE_SAMPLES else f" (RELAXED by --min-idle-samples {required_samples})"
        out.append(Check(f"idle GET samples per window, {SHORT[obs]} observer (fewest)", fewest,
                         f"≥ {MIN_IDLE_SAMPLES:,}{relaxed}", fewest >= MIN_IDLE_SAMPLES, digits=0))
    return out


def gentleness(default: Point) -> list[Check]:
    return [Check(f"{SHORT[obs]} observer's GET p99 multiple at the default budget", default.multiple[obs].median,
                  f"≤ {GENTLE_MULTIPLE}", default.multiple[obs].median <= GENTLE_MULTIPLE,
                  f"median (min–max) {spread_text(default.multiple[obs])}") for obs in OBSERVERS]


def probe_agreement(pts: list[Point]) -> list[Check]:
    """Per budget of ours: our probe ÷ each observer (medians), the one further from 1 judged."""
    lo, hi = 1 - PROBE_TOLERANCE, 1 + PROBE_TOLERANCE
    out = []
    for p in (p for p in pts if p.ours):
        ratios = {obs: p.own_vs[obs].median for obs in OBSERVERS}
        known = [v for v in ratios.values() if not math.isnan(v)]
        worst = max(known, key=lambda v: abs(v - 1), default=NAN)
        detail = "; ".join(f"{SHORT[o]} {spread_text(p.own_vs[o])}" for o in OBSERVERS)
        out.append(Check(f"our probe ÷ observers (p{p.own_percentile:g} multiples), budget {p.label}", worst,
                         f"{lo:g}–{hi:g} for both", len(known) == len(ratios) and all(lo <= v <= hi for v in known),
                         f"our probe ×{fmt(p.own.median)}; ÷ {detail}"))
    return out


def best_at_or_below(candidates: list[Point], intree: Point, obs: str) -> Point | None:
    """Of `candidates`, the fastest at no more than the in-tree migrator's multiple for `obs` (medians)."""
    gentle = [p for p in candidates if p.multiple[obs].median <= intree.multiple[obs].median]
    return max(gentle, key=lambda p: p.rate.median, default=None)


def dominance(pts: list[Point], intree: Point) -> list[Check]:
    out = []
    groups = (("ours", [p for p in pts if p.this_engine]),
              ("ours with the shipped APF objects", [p for p in pts if p.contender == APF]))
    for what, candidates in groups:
        for obs in OBSERVERS:
            best = best_at_or_below(candidates, intree, obs)
            value = div(best.rate.median, intree.rate.median) if best else NAN
            detail = (f"budget {best.label}: {fmt(best.rate.median, 0)} obj/s at ×{fmt(best.multiple[obs].median)}"
                      if best else "no point at or below its multiple")
            out.append(Check(f"{what} ÷ in-tree objects/s at ≤ its {SHORT[obs]} multiple "
                             f"(×{fmt(intree.multiple[obs].median)})", value, "≥ 1", value >= 1 if best else False,
                             detail))
    return out


def multiples_text(p: Point) -> str:
    return " and ".join(f"×{fmt(p.multiple[o].median)} ({SHORT[o]})" for o in OBSERVERS)


def shortfall(pts: list[Point], default: Point, intree: Point) -> str:
    """Why the default falls short of the in-tree migrator's objects/s, in the run's own figures."""
    d, i = default.rate.median, intree.rate.median
    text = (f"At the default budget ours reached {fmt(d, 0)} obj/s, {1 - div(d, i):.0%} short of the in-tree migrator's "
            f"{fmt(i, 0)} obj/s: it kept the observers' GET p99 at {multiples_text(default)}, where the in-tree "
            f"migrator took them to {multiples_text(intree)}.")
    faster = [p for p in pts if p.this_engine and p.rate.median >= i]
    if faster:
        p = min(faster, key=lambda p: p.budget)
        text += f" The lowest budget that reached its objects/s: {p.label}, at {multiples_text(p)}."
    else:
        top = max((p.budget for p in pts if p.this_engine), default=DEFAULT_BUDGET)
        text += f" No budget up to {top:g} reached it without APF."
    apf = find(pts, APF)
    if apf is not None:
        text += (f" With the shipped APF objects ours reached {fmt(apf.rate.median, 0)} obj/s "
                 f"({fmt(div(apf.rate.median, i))}× the in-tree migrator's) at {multiples_text(apf)}.")
    return text


def speed(pts: list[Point], default: Point, intree: Point) -> list[Check]:
    ratio = div(default.rate.median, intree.rate.median)
    detail = "" if ratio >= 1 else shortfall(pts, default, intree)
    out = [Check("default ÷ in-tree objects/s", ratio, "≥ 1", ratio >= 1, detail)]
    apf = find(pts, APF)
    if apf is not None:
        out.append(Check("ours + shipped APF ÷ ours without, objects/s (default budget)",
                         div(apf.rate.median, default.rate.median), "", None,
                         f"{fmt(apf.rate.median, 0)} vs {fmt(default.rate.median, 0)} obj/s; GET p99 "
                         f"{multiples_text(apf)} vs {multiples_text(default)}"))
    return out


def checks(pts: list[Point], required_samples: int = MIN_IDLE_SAMPLES) -> list[Check]:
    out = validity(pts, required_samples)
    default, intree = find(pts, "ours-gentle"), find(pts, "in-tree")
    if default is not None:
        out += gentleness(default)
    out += probe_agreement(pts)
    if intree is not None:
        out += dominance(pts, intree)
        if default is not None:
            out += speed(pts, default, intree)
    return out


def is_calibration(pts: list[Point]) -> tuple[bool, str]:
    """Does this run count as a calibration (≥ 3 repetitions, ≥ 1,000 idle samples), and if not, why."""
    why = [c.name for c in validity(pts, MIN_IDLE_SAMPLES) if not c.met]
    if not pts:
        why.append("no calibrate rows")
    return not why, "; ".join(why)

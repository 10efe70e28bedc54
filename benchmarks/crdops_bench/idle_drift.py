"""How far an observer's GET p99 multiple moves with nothing writing: the noise floor under every during ÷ idle.

Each contender's idle window (51 s, nobody migrating) set against the idle window of the contender that ran before
it, per observer: the same ratio a row's multiple is, with no work in between that belongs to either window. Where
these ratios spread from x0.5 to x2, a single pass's multiple cannot tell x2.0 from x2.1, and a budget tuned on one
calibration is tuned on that noise. The first screen prints it beside the multiples it qualifies.
"""
from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from . import observers
from .calibration import Spread
from .observers import OBSERVERS

FAR = 2.0  # a ratio beyond x2.0 either way (or under x0.5): as far as the default budget allows a pass to go
REPS = 3  # the calibration's repetitions: a contender's cell is the median of this many multiples


@dataclass(frozen=True)
class Drift:
    ratios: Spread  # over every pair of adjacent idle windows and observer
    far: int  # pairs beyond FAR either way
    medians_lo: float  # the 5th and 95th percentiles of the median of REPS ratios (every choice of REPS pairs)
    medians_hi: float


def ratios(rows: list) -> list[float]:
    """Idle p99 over the previous row's idle p99, per observer, in the order the rows ran."""
    out = []
    for before, after in zip(rows, rows[1:]):
        for o in OBSERVERS:
            earlier, later = (observers.get_stat(r, o, "idle") for r in (before, after))
            if earlier > 0 and not math.isnan(later):
                out.append(later / earlier)
    return out


def medians_range(values: list) -> tuple[float, float]:
    """Where the median of REPS of these ratios falls, 5th to 95th percentile over every choice of REPS of them:
    how far a contender's cell (a median of REPS multiples) moves with nothing writing. Every choice, not a random
    sample: the page renders the same from the same rows."""
    if len(values) < REPS:
        return math.nan, math.nan
    meds = sorted(statistics.median(c) for c in itertools.combinations(values, REPS))
    return meds[int(0.05 * (len(meds) - 1))], meds[int(0.95 * (len(meds) - 1))]


def drift(rows: list) -> Drift:
    values = ratios(rows)
    far = sum(1 for v in values if v > FAR or v < 1.0 / FAR)
    return Drift(Spread.of(values), far, *medians_range(values))


def sentence(rows: list) -> str:
    """One sentence for the first screen; empty with fewer than two rows."""
    d = drift(rows)
    r = d.ratios
    if not r.n:
        return ""
    return (f"Idle against idle, nothing writing in either (each observer's idle GET p99 over the idle window before "
            f"it, {r.n} pairs): median ×{r.median:.2f}, ×{r.lo:.2f} to ×{r.hi:.2f}; {d.far} of {r.n} beyond "
            f"×{FAR:g} or under ×{1 / FAR:g}; the median of {REPS} of them between ×{d.medians_lo:.2f} and "
            f"×{d.medians_hi:.2f} (5th to 95th percentile). That is how far one window's multiple, and a cell's median "
            f"of {REPS}, move on this machine with no work of anyone's in it.")

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The step in other clients' tail: the p99 that writing at all costs them, which no slower pace lowers.

A p99 is the slowest 1 % of answers. Once writes are in flight more than a few percent of the time, that 1 % are
the GETs that met a write (a GET without a resourceVersion is read from etcd, behind what it is committing), and
their latency is about that of one write, whatever the pace. Three calibrations on two cores (docs/performance.md)
measured two outside observers' GET p99 at 12-25 ms during every pass, against 4-16 ms idle: ours at one write in
flight a tenth of the time and at two in flight, and the in-tree migrator at eight. The limiter's model - the tail's
excess over idle grows in proportion to the writes in flight - then cut to the lowest duty wherever that step lay
above the budget, refused every growth, and wrote at a third of the in-tree migrator's speed while other clients
saw the same p99.

So the tail measured at the lowest pace (at most STEP_PACE writes in flight, where a fresh pass starts) is the step,
the median of its latest STEP_READINGS readings there, and the pace answers for the excess above it: a growth is
scaled from the step, not from idle, and a cut brings the excess back in proportion. Where the step itself is over
the budget, no pace can hold it there: the tail is held within STEP_MARGIN of the step instead, and the pass result
says so (``tail_step``, ``tail_budget``). Until a tail was measured that low, nothing changes: the excess is scaled
from idle.
"""

from __future__ import annotations

from statistics import median
from typing import List, Optional

# the pace a fresh pass starts at (PaceSettings.tail_start_duty): a tail measured at or below it is the step
STEP_PACE = 0.5
# where the step is over the budget, the tail may rise this much above it: a p99 of the 200 samples a tail needs
# (their third largest) reads +-20 % at one pace, and the in-tree migrator's eight writes in flight measured the
# observers' p99 at 1.2-1.3 times ours at the lowest duty (docs/performance.md)
STEP_MARGIN = 1.25
# the step is the median of this many latest readings at the lowest pace: the lowest one was a quiet 10 s as often
# as not (a calibration's step read x1.22 where its pass then met x1.9-2.5, and the cuts scaled from it went to a
# tenth of the time), and a pass cut back to the lowest pace reads it again there
STEP_READINGS = 5


class TailStep:
    """The tail multiple at STEP_PACE writes in flight or fewer: the median of the latest readings there (a step
    carried from an earlier pass counts as one); None until one was read."""

    def __init__(self, carried: Optional[float] = None) -> None:
        self._readings: List[float] = [carried] if carried is not None else []

    @property
    def multiple(self) -> Optional[float]:
        return median(self._readings) if self._readings else None

    def read(self, in_flight: float, tail: float) -> None:
        """A tail measured at ``in_flight`` writes in flight (the fraction of the time below one)."""
        if in_flight <= STEP_PACE:
            self._readings = (self._readings + [tail])[-STEP_READINGS:]

    def budget(self, budget: float) -> float:
        """The tail's budget: ``budget``, or within STEP_MARGIN of a step that is over it."""
        if self.multiple is None:
            return budget
        return max(budget, self.multiple * STEP_MARGIN)

    def over_budget(self, tail: float, budget: float) -> bool:
        return tail > self.budget(budget)

    def _base(self, tail: float) -> float:
        """Where the pace's share of ``tail`` starts: the step (idle until one was measured), at most the tail."""
        return min(tail, self.multiple if self.multiple is not None else 1.0)

    def scaled(self, tail: float, in_flight: float, next_in_flight: float) -> float:
        """``tail`` at ``in_flight`` writes in flight, its excess over the step scaled to ``next_in_flight``."""
        base = self._base(tail)
        return base + (tail - base) * next_in_flight / in_flight

    def in_flight_allowed(self, tail: float, in_flight: float, budget: float) -> float:
        """The writes in flight at which ``tail``, scaled, reaches the tail's budget (infinite if it never does)."""
        base = self._base(tail)
        if tail <= base:
            return float("inf")
        return in_flight * max(0.0, self.budget(budget) - base) / (tail - base)

    def cut_factor(self, tail: float, budget: float) -> float:
        """What to multiply the limit by for a tail over its budget: its excess over the step brought back to the
        budget's, in proportion; before a step was measured, ``budget / tail`` as for the p90."""
        if self.multiple is None or tail <= self.multiple:
            return self.budget(budget) / tail
        return (self.budget(budget) - self.multiple) / (tail - self.multiple)

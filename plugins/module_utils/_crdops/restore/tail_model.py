# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""How other clients' tail grows with our writes in flight: faster than they do, so a growth aims below the budget.

A p99 is other clients' slowest 1 % of answers. benchmarks/write_cost.py measured it with nothing but a bare client
re-storing CRs at one pace at a time and two outside observers GETting a ConfigMap (docs/performance.md): at one
write in flight half of the time their p99 stayed within x1.0-1.5 of a quiet idle, at one all of the time it was
x2-3.7, at eight x6-13, for a GET read from etcd and one answered from the watch cache alike, while LIST pages at
the in-tree migrator's speed cost nothing. The excess over idle grows about with the square of the writes in
flight (a queue's wait grows faster than its load): doubling the pace from half the time to all of it quadrupled
it or more. Scaled in proportion instead, a tail read at half the time let a pass grow to one and then two writes
in flight, where the observers' p99 went to x3-4.

So the tail at one pace predicts the next as ``1 + (tail - 1) * (next / now) ** 2``, and the pace holds the tail
at an aim below the budget rather than at the budget itself: a pass's p99 is its slowest 1 %, so ten seconds spent
over the budget show in it, and a p99 of the 200 samples a tail needs reads +-20 % at one pace. A growth is taken
only where the tail, so scaled, stays within the aim; a tail over the aim is cut to where the same model puts it
at the aim.
"""

from __future__ import annotations

import math

# the p99 of the 200 samples a tail needs reads +-20 % at one pace: a tail held at the budget itself is over it
# half of the time, one held at the budget / TAIL_READS_HIGH seldom (x1.67 for a budget of 2)
TAIL_READS_HIGH = 1.2
# how the tail's excess over idle grows with the writes in flight: with their square (benchmarks/write_cost.py)
GROWTH_POWER = 2.0


def aim(budget: float) -> float:
    """The tail multiple the pace holds: the budget over TAIL_READS_HIGH, not below idle."""
    return max(1.0, budget / TAIL_READS_HIGH)


def scaled(tail: float, in_flight: float, next_in_flight: float) -> float:
    """``tail`` measured at ``in_flight`` writes in flight (the fraction of the time below one), predicted at
    ``next_in_flight``."""
    return 1.0 + max(0.0, tail - 1.0) * math.pow(next_in_flight / in_flight, GROWTH_POWER)


def in_flight_allowed(tail: float, in_flight: float, budget: float) -> float:
    """The writes in flight at which ``tail``, scaled, reaches the aim (infinite for a tail at idle)."""
    excess = tail - 1.0
    if excess <= 0.0:
        return float("inf")
    return in_flight * math.pow((aim(budget) - 1.0) / excess, 1.0 / GROWTH_POWER)


def cut_factor(tail: float, budget: float) -> float:
    """What to multiply the writes in flight by for a tail over the aim: back to where it scales to the aim."""
    return min(1.0, in_flight_allowed(tail, 1.0, budget))

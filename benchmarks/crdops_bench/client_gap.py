"""How much slower the outside observers' GETs answer than our probe's: what the engine's ``client_own_ms`` (a
typical client's own time on each answer, added to both sides of the probe's multiples) stands for.

Per pass of ours and observer: the observer's idle GET percentile minus our probe's idle percentile of the same pass
(the observer's 51 s before the contender, the probe's own idle just after it started: adjacent windows), and the
same during the pass. The medians and spreads over every pass and observer of a run let the constant be checked
against the machine a calibration ran on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import observers, own_probe
from .observers import OBSERVERS
from .stats import NAN, summarize

WINDOWS = (("idle", "p90"), ("idle", "p99"), ("during", "p99"))


@dataclass(frozen=True)
class Gap:
    when: str
    stat: str
    median: float
    lo: float
    hi: float
    pairs: int


def gaps(rows: list) -> list[Gap]:
    """Observer minus probe, in ms, for each of WINDOWS over every row of ours that has both."""
    out = []
    for when, stat in WINDOWS:
        values = []
        for r in rows:
            mine = own_probe.summary(r)
            if not mine:
                continue
            for o in OBSERVERS:
                diff = observers.get_stat(r, o, when, stat) - own_probe.latency_ms(mine, when, stat)
                if not math.isnan(diff):
                    values.append(diff)
        s = summarize(values)
        out.append(Gap(when, stat, s["median"], s["min"], s["max"], s["n"]))
    return out


def client_own_ms(rows: list) -> float:
    """What the engine added (``client_own_ms``), NaN for an engine from before it."""
    return next((own for own in (own_probe.client_own_ms(own_probe.summary(r)) for r in rows) if not math.isnan(own)),
                NAN)


def sentence(rows: list) -> str:
    """One sentence for the first screen; empty without a row of ours."""
    found = [g for g in gaps(rows) if g.pairs]
    if not found:
        return ""
    parts = "; ".join(f"{g.when} {g.stat} {g.median:+.1f} ms ({g.lo:+.1f} to {g.hi:+.1f})" for g in found)
    own = client_own_ms(rows)
    added = f"the engine adds {own:.1f} ms to both sides of its multiples" if not math.isnan(own) else (
        "this engine added nothing to its multiples")
    return (f"Observers' GET minus our probe's, same pass (median and range over {found[0].pairs} pass × observer "
            f"pairs): {parts}; {added} (`client_own_ms`).")

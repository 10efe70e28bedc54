"""What the observers' GET p99 was during each contender's passes, in milliseconds, and the step our engine measured.

A multiple divides by an idle p99 that moves x0.5-x2 between windows with nothing writing (idle_drift.py), so two
contenders' multiples can differ by the idle they happened to meet. The p99 during the passes, in ms, does not:
where it is about the same at every pace (our lowest duty, our two writes in flight, the in-tree migrator's eight),
an engine from before tail_model.py took it for a step that pacing cannot lower, and its ``pace.tail_step`` (the p99
multiple it measured at its lowest pace) says where it put it; rows of later engines have none.
"""
from __future__ import annotations

import math

from . import calibration, observers
from .calibration import Spread
from .observers import OBSERVERS


def during_ms(rows: list) -> Spread:
    """The observers' GET p99 during the passes, in ms, over every row and observer."""
    return Spread.of([observers.get_stat(r, o, "during") for r in rows for o in OBSERVERS])


def idle_ms(rows: list) -> Spread:
    return Spread.of([observers.get_stat(r, o, "idle") for r in rows for o in OBSERVERS])


def steps(rows: list) -> Spread:
    """Our engine's ``pace.tail_step`` per row, where it measured one."""
    values = [((r.get("pace_state") or {}).get("tail_step")) for r in rows]
    return Spread.of([float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)])


def _cell(label: str, rows: list) -> str:
    d, s = during_ms(rows), steps(rows)
    text = f"{label} {d.median:.1f} ms ({d.lo:.1f}–{d.hi:.1f})"
    return text + (f", step ×{s.median:.2f} ({s.lo:.2f}–{s.hi:.2f}) in {s.n} of {len(rows)}" if s.n else "")


def sentence(rows: list) -> str:
    """One sentence for the first screen; empty without rows."""
    if not rows:
        return ""
    points = {p.contender: p for p in calibration.points(rows, rows[0]["n"])}
    by = {c: [r for r in rows if r["contender"] == c] for c in calibration.contenders(rows)}
    cells = "; ".join(_cell(_label(points.get(c)), rs) for c, rs in by.items() if rs)
    idle = idle_ms(rows)
    text = (f"The observers' GET p99 during the passes, in ms (median and range over repetitions and both observers): "
            f"{cells}; idle {idle.median:.1f} ms ({idle.lo:.1f}–{idle.hi:.1f}).")
    if steps(rows).n:
        text += (" The step is the p99 multiple our engine measured at its lowest pace (`pace.tail_step`): what "
                 "writing at all cost its probe.")
    return text


def _label(point) -> str:
    if point is None or not point.ours:
        return "in-tree migrator"
    return f"ours, budget {point.label}"

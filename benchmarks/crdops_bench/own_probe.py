"""Our own probe's summary (the engine's latency probe, in a pass's ``pace.probe``), read defensively.

The engine reports ``idle`` and ``during`` (``p50_ms``, ``p99_ms``, ...), ``multiple``, ``budget``, ``held`` and
``baseline``; an engine that holds its budget on another percentile than the p99 names it in ``percentile`` (90,
"p90", 0.9). Keys an engine does not send read as missing, never as an error.
"""
from __future__ import annotations

import math

NAN = float("nan")
DEFAULT_PERCENTILE = 99.0


def summary(row: dict) -> dict:
    probe = (row.get("pace_state") or {}).get("probe")
    return probe if isinstance(probe, dict) else {}


def _number(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return NAN
    return out if math.isfinite(out) else NAN


def percentile(probe: dict) -> float:
    """The percentile the probe's multiple is of: its ``percentile`` key (90, "p90", 0.9), else the p99."""
    raw = probe.get("percentile")
    if isinstance(raw, str):
        raw = raw.strip().lower().lstrip("p")
    q = _number(raw)
    if math.isnan(q):
        return DEFAULT_PERCENTILE
    return q * 100 if 0 < q < 1 else q


def multiple(probe: dict) -> float:
    """Its multiple: the ``multiple`` key, else during ÷ idle at its percentile; NaN when neither is there."""
    value = _number(probe.get("multiple"))
    if not math.isnan(value):
        return value
    pct = f"p{percentile(probe):g}"
    during, idle = (latency_ms(probe, when, pct) for when in ("during", "idle"))
    return during / idle if idle and not math.isnan(idle) else NAN


def latency_ms(probe: dict, when: str, stat: str) -> float:
    """Its ``idle`` or ``during`` latency at ``stat`` ("p99"), in ms; NaN where the engine did not send it."""
    return _number((probe.get(when) or {}).get(f"{stat}_ms"))


def client_own_ms(probe: dict) -> float:
    """The client's own time the engine added to both sides of its multiples; NaN for an engine from before it."""
    return _number(probe.get("client_own_ms"))


def tail_multiple(probe: dict) -> float:
    """Its p99 multiple where the engine held the tail too (``tail_multiple``); NaN for an engine that did not, or
    a pass too short for a p99."""
    return _number(probe.get("tail_multiple"))


def budget(probe: dict) -> float:
    return _number(probe.get("budget"))


def idle_samples(probe: dict) -> float:
    return _number((probe.get("idle") or {}).get("samples"))

"""Medians over repetitions, and the rows of one contender."""
from __future__ import annotations

import math
import statistics

NAN = float("nan")


def summarize(values: list) -> dict:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return {"median": NAN, "min": NAN, "max": NAN, "n": 0}
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def rows(raw: list, suite: str, contender: str, n: int | None = None) -> list:
    return [r for r in raw if r["suite"] == suite and r["contender"] == contender and (n is None or r["n"] == n)]


def med(raw: list, suite: str, contender: str, n: int | None = None, key: str = "seconds") -> float:
    return summarize([r.get(key) for r in rows(raw, suite, contender, n)])["median"]


def med_of(values: list) -> float:
    return summarize(values)["median"]


def div(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else NAN


def fmt(v: float, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{digits}f}" if abs(v) < 100 else f"{v:,.0f}"


def verified(rs: list) -> str:
    return "100% v1beta1" if rs and all(r["ok"] for r in rs) else "**FAILED**"

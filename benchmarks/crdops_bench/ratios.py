"""The performance targets (gentleness, throughput shares, fixed overhead, rerun) and the side-by-side ratios,
computed from the rows of one run.

Each ratio is (name, value, target, met, pace): `met` is None for a ratio without a target, `pace` names the
setting the ours-numbers ran with. Throughput ratios are ours ÷ other, so higher is better for us.
"""
from __future__ import annotations

import math

from . import calibration
from .calibration_checks import checks
from .stats import NAN, div, fmt, med, med_of, rows
from .suites import BUDGET

GENTLE_P99 = 2.0
GENTLE_SHARE = 0.5
MAX_SHARE = 0.95
MAX_INTREE = 0.9
FIXED_GROWTH = 0.10
RERUN = 0.05


class Ratios:
    def __init__(self, raw: list):
        self.raw = raw
        self.items: list[tuple] = []

    def add(self, name: str, value: float, target: str = "", met=None, pace: str = "") -> None:
        if not math.isnan(value):
            self.items.append((name, value, target, None if met is None else bool(met), pace))

    def rate(self, suite: str, contender: str, n: int) -> float:
        return med(self.raw, suite, contender, n, "objects_per_s")

    def p99_ratio(self, contender: str, n: int, kind: str) -> float:
        def one(r):
            during = ((r.get("probe_during") or {}).get(kind) or {}).get("p99", NAN)
            idle = ((r.get("probe_idle") or {}).get(kind) or {}).get("p99", NAN)
            return div(during, idle)
        return med_of([one(r) for r in rows(self.raw, "gentle", contender, n)])

    def own_probe_ratio(self, contender: str, n: int) -> float:
        """Our own probe's p99 multiple (the pass's ``pace.probe``) ÷ the external probe's GET multiple: near 1
        when the signal the pace holds is what another client sees."""
        def one(r):
            own = ((r.get("pace_state") or {}).get("probe") or {}).get("multiple")
            during = ((r.get("probe_during") or {}).get("get") or {}).get("p99", NAN)
            idle = ((r.get("probe_idle") or {}).get("get") or {}).get("p99", NAN)
            return div(float(own), div(during, idle)) if own is not None else NAN
        return med_of([one(r) for r in rows(self.raw, "gentle", contender, n)])

    def gentle(self, n: int) -> None:
        ceiling, intree = self.rate("gentle", "ceiling", n), self.rate("gentle", "in-tree", n)
        gentle, fast = self.rate("gentle", "ours-gentle", n), self.rate("gentle", "ours-max", n)
        for kind in ("get", "list"):
            v, floor = self.p99_ratio("ours-gentle", n, kind), self.p99_ratio("in-tree", n, kind)
            if kind == "get":
                self.add(f"probe GET p99 during ÷ idle, ours-gentle @ {n:,}", v, f"≤ {GENTLE_P99}",
                         v <= GENTLE_P99, "gentle")
            # a consistent LIST waits for the watch cache while anyone writes (benchmarks/list_wait.py): against
            # a quiet idle no migrator can hold it, so it is held to the in-tree migrator's multiple
            self.add(f"probe {kind.upper()} p99 multiple, ours-gentle ÷ in-tree @ {n:,}", div(v, floor), "≤ 1",
                     div(v, floor) <= 1, "gentle")
            for other in ("ours-gentle-apf", "ours-gentle-admin", "ours-max", "ceiling", "in-tree", "kubectl"):
                self.add(f"probe {kind.upper()} p99 during ÷ idle, {other} @ {n:,}", self.p99_ratio(other, n, kind),
                         pace={"ours-max": "max", "ours-gentle-apf": "gentle + APF",
                               "ours-gentle-admin": "gentle, APF-exempt"}.get(other, ""))
        budgets = sorted({r["contender"] for r in self.raw if r["contender"].startswith(BUDGET)},
                         key=lambda c: float(c[len(BUDGET):]))
        for mine in ("ours-gentle", "ours-gentle-admin", *budgets):
            self.add(f"own probe ÷ external probe, GET p99 multiple, {mine} @ {n:,}", self.own_probe_ratio(mine, n),
                     pace="gentle")
        for mine in budgets:  # the budget against what other clients saw and against throughput
            self.add(f"probe GET p99 during ÷ idle, {mine} @ {n:,}", self.p99_ratio(mine, n, "get"),
                     pace=f"gentle, budget x{mine[len(BUDGET):]}")
            self.add(f"{mine} ÷ in-tree throughput @ {n:,}", div(self.rate("gentle", mine, n), intree),
                     pace=f"gentle, budget x{mine[len(BUDGET):]}")
        self.add(f"ours-gentle ÷ in-tree throughput @ {n:,} (default settings)", div(gentle, intree), "≥ 1",
                 div(gentle, intree) >= 1, "gentle")
        self.add(f"ours-gentle ÷ ceiling throughput @ {n:,} (default settings)", div(gentle, ceiling),
                 f"≥ {GENTLE_SHARE}", div(gentle, ceiling) >= GENTLE_SHARE, "gentle")
        self.add(f"ours-max ÷ ceiling throughput @ {n:,}", div(fast, ceiling), f"≥ {MAX_SHARE}",
                 div(fast, ceiling) >= MAX_SHARE, "max")
        self.add(f"ours-gentle-apf ÷ ceiling throughput @ {n:,}", div(self.rate("gentle", "ours-gentle-apf", n), ceiling),
                 pace="gentle + APF")
        self.add(f"ours-gentle-admin ÷ in-tree throughput @ {n:,}",
                 div(self.rate("gentle", "ours-gentle-admin", n), intree), pace="gentle, APF-exempt")
        bound = div(ceiling, intree)
        self.add(f"(bound) ceiling ÷ in-tree throughput @ {n:,}", bound)
        self.add(f"ours-max ÷ in-tree throughput @ {n:,}", div(fast, intree),
                 f"≥ {MAX_INTREE} × bound = {MAX_INTREE * bound:.2f}", div(fast, intree) >= MAX_INTREE * bound, "max")
        kubectl = self.rate("gentle", "kubectl", n)
        self.add(f"ours-max ÷ kubectl throughput @ {n:,}", div(fast, kubectl), pace="max")
        self.add(f"(bound) ceiling ÷ kubectl throughput @ {n:,}", div(ceiling, kubectl))

    def calibrate(self, required_samples: int) -> None:
        """The calibrate suite's checks (calibration_checks.py), as ratios of this run."""
        for n in calibration.sizes(self.raw):
            for c in checks(calibration.points(self.raw, n), required_samples):
                # every check, an unmeasurable one (NaN: no point of ours at all) included, unlike add()
                self.items.append((f"calibrate @ {n:,}: {c.name}", float(c.value), c.target, c.met, "gentle"))

    def role(self, e2e_n: int, fixed_ns: tuple, rerun_n: int) -> None:
        e2e, restore = med(self.raw, "role", "role", e2e_n), med(self.raw, "role", "role", e2e_n, "restore_s")
        self.add(f"role end to end ÷ re-store task @ {e2e_n:,}", div(e2e, restore), pace="default")
        small, large = (med(self.raw, "role", "role", n, "fixed_s") for n in fixed_ns)
        growth = div(large - small, small)
        self.add(f"role fixed overhead {fixed_ns[0]:,} → {fixed_ns[1]:,}: growth (s {small:.1f} → {large:.1f})", growth,
                 f"≤ {FIXED_GROWTH:.0%} (as a fraction)", abs(growth) <= FIXED_GROWTH, "default")
        first, again = med(self.raw, "role", "module", rerun_n), med(self.raw, "role", "module-rerun", rerun_n)
        self.add(f"rerun ÷ first, crd_storage_migrate playbook @ {rerun_n:,}", div(again, first), f"≤ {RERUN}",
                 div(again, first) <= RERUN, "default")
        first, again = med(self.raw, "role", "role", rerun_n), med(self.raw, "role", "role-rerun", rerun_n)
        self.add(f"rerun ÷ first, the whole role @ {rerun_n:,}", div(again, first), pace="default")

    def throughput(self, sizes: list) -> None:
        for n in sizes:
            c, o, d = (med(self.raw, "throughput", x, n) for x in ("ceiling", "ours-best", "ours-default"))
            self.add(f"ours-best ÷ ceiling throughput @ {n:,}", div(c, o))
            self.add(f"ours-default ÷ ceiling throughput @ {n:,}", div(c, d), pace="default")
            i, k = med(self.raw, "throughput", "in-tree", n), med(self.raw, "throughput", "kubectl", n)
            self.add(f"ours-best ÷ in-tree (create→Succeeded) throughput @ {n:,}", div(i, o))
            self.add(f"(bound) ceiling ÷ in-tree throughput @ {n:,}", div(i, c))
            self.add(f"ours-best ÷ kubectl throughput @ {n:,}", div(k, o))
            self.add(f"ansible-playbook ÷ ours direct, time @ {n:,}", div(med(self.raw, "throughput", "ansible", n), o))
            self.add(f"forced re-pass ÷ first, time (engine, force) @ {n:,}", div(med(self.raw, "throughput", "rerun", n), o))
        f3, f1 = (med(self.raw, "fleet", c) for c in ("fleet-3", "fleet-1"))
        self.add("fleet (3 clusters) ÷ single, time", div(f3, f1), "≤ 1.3", div(f3, f1) <= 1.3)

    def table(self) -> str:
        lines = ["| ratio | value | target | met | pace |", "|---|---:|---|---|---|"]
        for name, value, target, met, pace in self.items:
            lines.append(f"| {name} | {fmt(value)} | {target} | {'' if met is None else ('yes' if met else '**no**')} | {pace} |")
        return "\n".join(lines)

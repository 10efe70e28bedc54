"""What the ratios of a run mean, and which targets it cannot show (said plainly, with the bounding numbers)."""
from __future__ import annotations

import math

from .calibration import MIN_IDLE_SAMPLES
from .probe import INTERVAL
from .stats import div, fmt, med

READING = """#### Reading these numbers

- Compare medians of the same run only: every contender runs against the same apiserver, and anything else on the
  cores (see the load average) slows all of them.
- On 2 cores the apiserver (decode, convert, managedFields, encode of every object) is the bottleneck, not the
  client. The `(bound)` rows are what the ceiling client itself reaches against the in-tree migrator and kubectl
  on this machine: a throughput target above its bound is out of reach for any client here, ours included.
- An observer's p99 over an idle window of {idle:g} s rests on ~{samples:.0f} samples per request kind: the
  {slow:.0f} slowest set it.
  A p99 ratio names the latency a workload sees in its worst 1 %, not the mean."""


def pace_note(run) -> str:
    rs = [r for r in run.raw if r["suite"] == "gentle" and r["contender"].startswith("ours-")]
    if not any(r.get("pace_note") for r in rs):
        return ""
    return ("- **This engine has no `pace` option** (its RestoreOptions has no such field): ours-gentle and ours-max "
            "ran the same default settings, so their rows measure the engine's default, not an adaptive pace.")


def bound_notes(run) -> list:
    """Targets above what the ceiling client reaches on this machine."""
    out, n = [], run.args.gentle_n
    ceiling, intree = (med(run.raw, "gentle", c, n, "objects_per_s") for c in ("ceiling", "in-tree"))
    if not (math.isnan(ceiling) or math.isnan(intree)):
        out.append(f"- ours ÷ in-tree is bounded by ceiling ÷ in-tree = {fmt(div(ceiling, intree))} in this run "
                   f"(ceiling {ceiling:,.0f} obj/s, in-tree {intree:,.0f} obj/s): the target is stated against "
                   "that bound, not as an absolute factor.")
    return out


def intree_note(run) -> str:
    rs = [r for r in run.raw if r["suite"] in ("gentle", "calibrate") and r["contender"] == "in-tree"]
    if not rs:
        return ""
    waits = ", ".join(f"{r.get('wait_s', 0):.1f}" for r in rs)
    return (f"- in-tree's throughput and *during* window run from just before its first write (etcd revisions) to "
            f"`Succeeded`. Before that the controller waited {waits} s (per repetition) until the garbage collector's "
            "cache caught up with a fresh LIST (`GC cache is not up to date, requeuing`, exponential backoff): on a "
            "cluster with other writes that wait lasts until a watch bookmark arrives.")


def missing_notes(run) -> list:
    a, out = run.args, []
    if "gentle" not in a.suites and "calibrate" not in a.suites:
        out.append("- Gentleness and the throughput targets: not measured by this command (suite `gentle` not run).")
    if "calibrate" in a.suites and a.min_idle_samples < MIN_IDLE_SAMPLES:
        out.append(f"- **RELAXED run:** `--min-idle-samples {a.min_idle_samples}` (the calibration needs "
                   f"{MIN_IDLE_SAMPLES:,} idle samples per observer and window): its ratios prove the harness, "
                   "not the targets.")
    if "role" not in a.suites:
        out.append("- Role end to end, fixed overhead and rerun ÷ first: not measured by this command (suite `role`).")
    elif len(a.role_sizes) < 2 or a.role_sizes[-1] < 10 * a.role_sizes[0]:
        out.append(f"- The fixed-overhead target compares 10k with 100k; this run used {a.role_sizes}.")
    if a.quick:
        out.append("- `--quick` sizes are far below the targets' sizes: the ratios prove the harness, not the targets.")
    return out


def notes(run, ratios) -> str:
    idle = run.args.idle_seconds
    samples = idle / INTERVAL
    lines = [READING.format(idle=idle, samples=samples, slow=max(1, samples // 100)), "", "#### What this run cannot show", ""]
    extra = [x for x in [pace_note(run), intree_note(run)] + bound_notes(run) + missing_notes(run) if x]
    unmet = [name for name, _v, target, met, _p in ratios.items if met is False]
    if unmet:
        extra.append("- Targets not met in this run: " + "; ".join(unmet) + ".")
    lines += extra or ["- Nothing: every target was measured."]
    return "\n".join(lines)

"""Where the observers' slowest answers of a gentle or calibrate run came from: the apiserver's garbage collections,
the host taking the CPU away, or neither.

    . tools/env.sh && python benchmarks/noise_sources.py /tmp/crdops-bench-XXXXXXXX

Reads what a `benchmarks/run.py --suites calibrate` (or gentle) run left in its workdir: rows.json, the observers'
GET samples, the apiserver's log with one line per garbage collection (the run sets GODEBUG=gctrace=1) and the
machine's CPU counters once a second (host-stat.txt; --host-stat for another file of the same form). Rows from runs
before the idle windows carried their times are placed by finding the 51 s whose samples give the row's idle
summary.

Prints per row and observer, for the idle window and the work: the apiserver's collections per minute and the
share of the window they took, the share of the slowest 1 % of GETs sent in a collection, the GET p99 with and
without the GETs sent in one, and the CPU share the host took (steal); then the same per contender, medians over
the repetitions; then per contender how slow the GETs sent inside a collection were, and the others. A script, not
a test: docs/performance.md reads its output.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for entry in (str(REPO), str(REPO / "benchmarks")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from crdops_bench import host_stat, observers, server_gc  # noqa: E402
from crdops_bench.noise import Sources, median_of  # noqa: E402
from crdops_bench.probe import percentile  # noqa: E402


def pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.0%}"


def window_cells(w: dict) -> list[str]:
    return [f"{w['gc_per_min']:.1f}", pct(w["gc_time_share"]), pct(w["slowest_in_gc"]), pct(w["steal"])]


def print_rows(analysed: list[tuple[dict, dict]]) -> None:
    print("| contender | rep | objects/s | observer | GET p99 multiple | without GETs sent in a collection | idle: "
          "collections/min, their time, slowest 1 % in one, steal | during: the same |")
    print("|---|---:|---:|---|---:|---:|---|---|")
    for row, found in analysed:
        for obs, cell in found.items():
            idle, during = window_cells(cell["idle"]), window_cells(cell["during"])
            print(f"| {row['contender']} | {row['rep']} | {row['objects_per_s']:.0f} | {observers.SHORT[obs]} | "
                  f"x{cell['multiple']:.2f} | x{cell['multiple_outside_gc']:.2f} | {', '.join(idle)} | "
                  f"{', '.join(during)} |")


def print_contenders(analysed: list[tuple[dict, dict]]) -> None:
    print("\n| contender | observer | reps | GET p99 multiple | without collections | collections/min idle -> "
          "during | their time idle -> during | slowest 1 % in one, during | steal, during (max) |")
    print("|---|---|---:|---:|---:|---|---|---:|---:|")
    names = list(dict.fromkeys(row["contender"] for row, _found in analysed))
    for name in names:
        for obs in observers.OBSERVERS:
            cells = [found[obs] for row, found in analysed if row["contender"] == name and obs in found]
            if not cells:
                continue
            steal = [c["during"]["steal"] for c in cells if not math.isnan(c["during"]["steal"])]
            print(f"| {name} | {observers.SHORT[obs]} | {len(cells)} | x{median_of(cells, 'multiple'):.2f} | "
                  f"x{median_of(cells, 'multiple_outside_gc'):.2f} | {median_of(cells, 'idle', 'gc_per_min'):.1f} -> "
                  f"{median_of(cells, 'during', 'gc_per_min'):.1f} | {pct(median_of(cells, 'idle', 'gc_time_share'))}"
                  f" -> {pct(median_of(cells, 'during', 'gc_time_share'))} | "
                  f"{pct(median_of(cells, 'during', 'slowest_in_gc'))} | {pct(max(steal)) if steal else '-'} |")


def print_inside_outside(sources: Sources) -> None:
    """Per contender, every pass and both observers pooled: how slow a GET sent inside a collection was, and one
    sent outside; how many collections its passes met, and how long they took."""
    print("\n| contender | GETs inside a collection: p50 / p90 / p99 ms (GETs) | outside: p50 / p99 ms | collections in "
          "the passes, their median length |")
    print("|---|---|---|---|")
    for name in dict.fromkeys(row["contender"] for row in sources.rows):
        rows = [row for row in sources.rows if row["contender"] == name]
        inside_gc, outside_gc = [], []
        for row, obs in ((row, obs) for row in rows for obs in observers.OBSERVERS):
            found = sources.split(obs, row["t0"], row["t1"])
            inside_gc += found[0]
            outside_gc += found[1]
        gcs = [gc for row in rows for gc in server_gc.within(sources.collections, row["t0"], row["t1"])]
        seconds = sum(row["t1"] - row["t0"] for row in rows)
        length = statistics.median(gc.seconds for gc in gcs) if gcs else math.nan
        print(f"| {name} | {percentile(inside_gc, 50):.1f} / {percentile(inside_gc, 90):.1f} / "
              f"{percentile(inside_gc, 99):.1f} ({len(inside_gc):,}) | {percentile(outside_gc, 50):.1f} / "
              f"{percentile(outside_gc, 99):.1f} | {len(gcs)} in {seconds:.0f} s, {length:.2f} s |")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("workdir", type=Path, help="a benchmarks/run.py workdir (the `# workdir` line it prints)")
    ap.add_argument("--host-stat", type=Path, help=f"the machine's CPU counters (default <workdir>/{host_stat.FILE_NAME})")
    args = ap.parse_args(argv)
    sources = Sources(args.workdir, args.host_stat)
    if not sources.collections:
        print(f"{args.workdir}: the apiserver's log traces no garbage collection; run the benchmark with "
              "GODEBUG=gctrace=1 (benchmarks/run.py sets it for the gentle and calibrate suites)", file=sys.stderr)
        return 2
    analysed = [(row, sources.row(row)) for row in sources.rows]
    print_rows(analysed)
    print_contenders(analysed)
    print_inside_outside(sources)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

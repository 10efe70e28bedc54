"""The benchmark's `--against REF`: an earlier engine as a contender of its own, beside this tree's, in one run."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.crdops_bench import calibration_checks, cli, engine
from benchmarks.crdops_bench.calibration import Point, Spread
from benchmarks.crdops_bench.observers import OBSERVERS
from benchmarks.crdops_bench.suites import AGAINST, DEFAULT_BUDGET, budget_of
from benchmarks.crdops_bench.svg_chart import HEIGHT, chart
from tools.collection_tree import collection_dir


def test_the_earlier_engine_runs_beside_ours_at_the_default_budget_and_only_keeps_it():
    args = cli.parse(["--suites", "calibrate", "--against", "abc1234",
                      "--only", f"in-tree,ours-gentle,{AGAINST}abc1234"])
    assert f"{AGAINST}abc1234" not in args.skip and "ours-gentle" not in args.skip
    assert {"ours-gentle-apf", "ours-gentle-budget-4"} <= args.skip
    assert budget_of(f"{AGAINST}abc1234") == DEFAULT_BUDGET
    assert not any(name.startswith(AGAINST) for name in cli.parse(["--suites", "calibrate"]).skip)


def test_a_snapshot_of_a_commit_holds_the_engine_as_committed_there():
    if not (Path(engine.REPO) / ".git").exists() or shutil.which("git") is None:
        pytest.fail("the benchmark's --against needs this checkout's git history")
    head = subprocess.run(["git", "-C", str(engine.REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    root = engine.snapshot(head)
    collection = Path(collection_dir(root))
    try:
        committed = subprocess.run(["git", "-C", str(engine.REPO), "show",
                                    f"{head}:plugins/module_utils/_crdops/restore/pace.py"],
                                   capture_output=True, text=True, check=True).stdout
        assert (collection / "plugins/module_utils/_crdops/restore/pace.py").read_text() == committed
        assert (collection / "galaxy.yml").exists()
    finally:
        shutil.rmtree(root)


def test_an_unknown_commit_stops_the_run_with_its_name():
    with pytest.raises(SystemExit, match="--against no-such-ref"):
        engine.snapshot("no-such-ref")


def calibration_point(contender: str, budget: float, rate: float, multiple: float) -> Point:
    return Point(contender, budget, 3, True, Spread(rate, rate, rate, 3),
                 multiple={o: Spread(multiple, multiple, multiple, 3) for o in OBSERVERS},
                 own_vs={o: Spread(1.0, 1.0, 1.0, 3) for o in OBSERVERS},
                 idle_samples={o: 1020 for o in OBSERVERS})


def a_run_with_an_earlier_engine_ahead_of_ours():
    """The in-tree migrator at 160 obj/s and x2.0; this tree's engine slower at every budget; the earlier engine
    faster and gentler than the in-tree point."""
    return [calibration_point("in-tree", float("nan"), 160, 2.0),
            calibration_point("ours-gentle", DEFAULT_BUDGET, 100, 1.6),
            calibration_point("ours-gentle-budget-3", 3.0, 150, 2.5),
            calibration_point(f"{AGAINST}2401c73", DEFAULT_BUDGET, 170, 1.9)]


def test_an_earlier_engine_is_named_as_such_and_the_checks_judge_only_this_trees_engine():
    pts = a_run_with_an_earlier_engine_ahead_of_ours()
    assert pts[-1].label == "2 (default), engine of 2401c73" and pts[1].label == "2 (default)"
    by_name = {c.name: c for c in calibration_checks.checks(pts)}
    on_or_above = [c for name, c in by_name.items() if name.startswith("ours ÷ in-tree objects/s")]
    assert on_or_above and all(c.met is False and "2401c73" not in c.detail for c in on_or_above)
    shortfall = by_name["default ÷ in-tree objects/s"].detail
    assert "No budget up to 3 reached it" in shortfall and "2401c73" not in shortfall


def test_the_chart_draws_an_earlier_engine_apart_and_names_it_in_a_legend_row_of_its_own():
    pts = a_run_with_an_earlier_engine_ahead_of_ours()
    svg = chart(pts, "t", "f")
    assert "engine of 2401c73" in svg and 'fill="white" stroke="#6a6a6a"' in svg
    assert f'height="{HEIGHT + 20}"' in svg
    assert f'height="{HEIGHT}"' in chart(pts[:-1], "t", "f")

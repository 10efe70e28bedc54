"""The benchmark's `--against REF`: an earlier engine as a contender of its own, beside this tree's, in one run."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks.crdops_bench import cli, engine
from benchmarks.crdops_bench.suites import AGAINST, DEFAULT_BUDGET, budget_of
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

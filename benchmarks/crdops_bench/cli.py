"""Arguments, the order of the suites, and the report of one run."""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import REPO, observers
from .children import PROBE_IDLE_S
from .ratios import Ratios
from .page import free_m
from .probe import INTERVAL
from .report import replace_block, rows_json
from .suites import CALIBRATE_BUDGETS, GENTLE, THROUGHPUT, against_contenders, calibrate_contenders, extra_gentle

SUITES = ("gentle", "calibrate", "role", "throughput", "fleet")
GENTLE_IDLE_S = 8.0
MIN_IDLE_SAMPLES = 1000  # calibrate: per observer and idle window (issue #39)
FULL = {"gentle_n": 10000, "role_sizes": [10000, 20000, 100000], "sizes": [1000, 10000]}
QUICK = {"gentle_n": 600, "role_sizes": [300, 600, 1200], "sizes": [300, 1500]}


def csv_ints(text: str) -> list:
    return [int(x) for x in text.split(",") if x]


def csv_floats(text: str) -> list:
    return [float(x) for x in text.split(",") if x]


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="benchmarks/run.py", description=sys.modules["benchmarks.crdops_bench"].__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", default="gentle,role", help=f"comma list of {','.join(SUITES)} (default gentle,role)")
    ap.add_argument("--reps", type=int, default=2, help="repetitions per contender and N (medians; default 2)")
    ap.add_argument("--quick", action="store_true", help="smoke run: small N, one repetition, prints only")
    ap.add_argument("--gentle-n", type=int, help=f"objects in the gentle and calibrate suites (default {FULL['gentle_n']})")
    ap.add_argument("--role-sizes", type=csv_ints, help="N list of the role suite: the 2nd is the end-to-end ÷ "
                    "re-store size, the 1st and last the fixed-overhead pair, the 1st also reruns (default 10000,20000,100000)")
    ap.add_argument("--sizes", type=csv_ints, help="N list of the throughput suite (default 1000,10000)")
    ap.add_argument("--idle-seconds", type=float, help=f"the observers' idle window before each contender (default "
                    f"{GENTLE_IDLE_S:g}; with suite calibrate: long enough for --min-idle-samples at 50 ms, plus 1 s)")
    ap.add_argument("--probe-idle-seconds", type=float, default=PROBE_IDLE_S,
                    help=f"ours under pace gentle: the latency probe's idle before the pass writes (default "
                         f"{PROBE_IDLE_S:g}; a real pass samples through its drain, 65 s by default)")
    ap.add_argument("--min-idle-samples", type=int, default=MIN_IDLE_SAMPLES, help="calibrate: idle GET samples each "
                    f"observer needs per window (default {MIN_IDLE_SAMPLES}); fewer RELAXES the check for a quick run, "
                    "which is then labelled so and never written to the page's first screen")
    ap.add_argument("--role-rerun", action="store_true", help="role suite: also rerun the whole role at the 1st N")
    ap.add_argument("--ceiling-workers", type=int, default=16, help="threads of the ceiling client")
    ap.add_argument("--best-workers", type=int, default=16, help="workers of ours-best, ansible, fleet")
    ap.add_argument("--fleet-n", type=int, default=1000, help="objects per cluster in the fleet suite")
    ap.add_argument("--fleet-qps", type=float, default=50.0, help="max_qps per cluster in the fleet suite")
    ap.add_argument("--apf", action="store_true", help="gentle suite: also ours-gentle under the FlowSchema and "
                    "PriorityLevelConfiguration of docs/rbac/ (contender ours-gentle-apf)")
    ap.add_argument("--admin", action="store_true", help="gentle suite: also ours-gentle as an admin certificate "
                    "(system:masters: APF-exempt, so the pace alone must be gentle; contender ours-gentle-admin)")
    ap.add_argument("--budgets", type=csv_floats, default=[], help="gentle suite: also ours-gentle holding each of "
                    "these latency budgets (contenders ours-gentle-budget-<b>; ours-gentle holds the default, 2); "
                    "calibrate suite: the budgets beside the default (default 1.5,3,4)")
    ap.add_argument("--against", metavar="REF", help="gentle and calibrate suites: also ours-gentle as the engine of "
                    "git commit REF (contender ours-gentle@REF), interleaved with this tree's: an engine change "
                    "judged side by side in one run")
    ap.add_argument("--skip", default="", help="comma list of contenders to skip (in-tree, kubectl, ansible, ...)")
    ap.add_argument("--only", default="", help="comma list: run only these contenders of the suites run")
    ap.add_argument("--out", default=str(REPO / "docs" / "performance.md"))
    ap.add_argument("--no-write", action="store_true", help="print only; do not write docs/")
    ap.add_argument("--from-rows", help="no run: report the rows.json an earlier (maybe interrupted) run saved")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    args.suites = [s for s in args.suites.split(",") if s]
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        ap.error(f"unknown suite(s) {sorted(unknown)}")
    args.gentle_n = args.gentle_n or sizes["gentle_n"]
    args.role_sizes = args.role_sizes or sizes["role_sizes"]
    args.sizes = args.sizes or sizes["sizes"]
    if args.idle_seconds is None:
        calibrating = "calibrate" in args.suites
        args.idle_seconds = args.min_idle_samples * INTERVAL + 1 if calibrating else GENTLE_IDLE_S
    args.skip = set(filter(None, args.skip.split(",")))
    only = set(filter(None, args.only.split(",")))
    if only:  # every contender a suite may run, the calibrate suite's budgets included
        every = (set(GENTLE) | set(THROUGHPUT) | set(extra_gentle(args))
                 | set(calibrate_contenders(args.budgets or CALIBRATE_BUDGETS, against_contenders(args))))
        args.skip |= every - only
    if args.quick:
        args.reps, args.idle_seconds, args.no_write = 1, min(args.idle_seconds, 3.0), True
        args.fleet_n = min(args.fleet_n, 300)
    return args


class Run:
    """Everything one invocation measured, for the report."""

    def __init__(self, args, argv: list):
        self.args, self.reps = args, args.reps
        self.cmdline = "python benchmarks/run.py " + " ".join(shlex.quote(a) for a in argv)
        self.load_start = os.getloadavg()
        self.load_end: list = []  # at the last row saved: what --from-rows reports, not the load when it renders
        self.free_m = ""  # `free -m` at the last row saved, for the same reason
        self.started = time.time()
        self.total = 0.0
        self.bench = self.runner = None
        self.raw: list = []
        self.svm_info = self.flow_schema = self.migrator_user = ""
        self.seed_rates: list = []
        self.rows_file: Path | None = None
        self.code = code_version()

    SAVED = ("cmdline", "load_start", "load_end", "free_m", "started", "total", "raw", "svm_info", "flow_schema",
             "migrator_user", "seed_rates", "code")

    def save(self) -> None:
        """rows.json in the workdir after every row: an interrupted run can still be reported (--from-rows)."""
        if self.bench is not None:
            self.seed_rates, self.migrator_user = self.bench.seed_rates, self.bench.migrator.user
        self.total = time.time() - self.started
        self.load_end, self.free_m = list(os.getloadavg()), free_m()
        if self.rows_file:
            args = dict(vars(self.args), skip=sorted(self.args.skip))
            self.rows_file.write_text(json.dumps(dict({k: getattr(self, k) for k in self.SAVED}, args=args), default=str))

    def load(self, path: str) -> None:
        """The rows and settings of a saved run; where to write (--out, --no-write) is this invocation's."""
        saved = json.loads(Path(path).read_text())
        for k in self.SAVED:
            setattr(self, k, saved.get(k, getattr(self, k)))
        kept = {k: getattr(self.args, k) for k in ("out", "no_write", "from_rows")}
        vars(self.args).update(saved["args"], skip=set(saved["args"]["skip"]), **kept)
        self.reps = self.args.reps


def code_version() -> str:
    """The commit the run measures, and whether the engine or the benchmark differed from it."""
    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *argv], capture_output=True, text=True, check=False).stdout.strip()
    sha = git("rev-parse", "--short", "HEAD") or "unknown"
    return sha + (" + uncommitted changes" if git("status", "--porcelain", "--", "plugins", "benchmarks") else "")


def execute(run: Run) -> None:
    from .contenders import Bench
    from .intree import discover_svm
    from .suites import Runner

    args = run.args
    workdir = Path(tempfile.mkdtemp(prefix="crdops-bench-"))
    print(f"# workdir {workdir}; suites {args.suites}; reps {args.reps}", flush=True)
    run.rows_file = workdir / "rows.json"
    print(f"# rows saved to {run.rows_file} (report them with --from-rows if the run is cut short)", flush=True)
    with_kubectl = "kubectl" not in args.skip and bool({"gentle", "throughput"} & set(args.suites))
    if {"gentle", "calibrate"} & set(args.suites):
        # the apiserver inherits it and logs each garbage collection: noise_sources.py places them in the windows
        os.environ.setdefault("GODEBUG", "gctrace=1")
    run.bench = Bench(workdir, kubectl=with_kubectl, kcm="in-tree" not in args.skip)
    run.bench.probe_idle_s = args.probe_idle_seconds
    try:
        svm_version, run.svm_info = discover_svm(run.bench.kube)
        runner = run.runner = Runner(run.bench, args, svm_version)
        run.raw, runner.on_record = runner.raw, run.save
        if "gentle" in args.suites:
            runner.gentle(args.gentle_n, args.reps)
            run.flow_schema = runner.flow_schemas
        if "calibrate" in args.suites:
            runner.calibrate(args.gentle_n, args.reps)
            run.flow_schema = runner.flow_schemas
        if "role" in args.suites:
            runner.role(args.role_sizes, args.reps, rerun_n=args.role_sizes[0])
        if "throughput" in args.suites:
            runner.throughput(args.sizes, args.reps)
        if "fleet" in args.suites:
            runner.fleet(args.fleet_n, args.reps)
    finally:
        run.save()
        run.bench.close()


def compute_ratios(run: Run) -> Ratios:
    r, a = Ratios(run.raw), run.args
    if "gentle" in a.suites:
        r.gentle(a.gentle_n)
    if "calibrate" in a.suites:
        r.calibrate(a.min_idle_samples)
    if "role" in a.suites:
        sizes = a.role_sizes
        r.role(sizes[1] if len(sizes) > 1 else sizes[0], (sizes[0], sizes[-1]), sizes[0])
    if "throughput" in a.suites or "fleet" in a.suites:
        r.throughput(a.sizes if "throughput" in a.suites else [])
    return r


def main(argv=None) -> int:
    from .calibration_page import publish
    from .notes import notes
    from .page import block

    argv = sys.argv[1:] if argv is None else argv
    run = Run(parse(argv), argv)
    if run.args.from_rows:
        run.load(run.args.from_rows)
        filled = observers.complete_slowest(run.raw, Path(run.args.from_rows).parent)
        if filled:
            print(f"# {filled} observer windows' slowest GETs read from the sample files beside the rows", flush=True)
    else:
        execute(run)
    ratios = compute_ratios(run)
    text = block(run, ratios.table(), notes(run, ratios))
    print("\n" + text, flush=True)
    out = Path(run.args.out)
    if not run.args.no_write:
        out.write_text(replace_block(out, text))
        rows = out.with_name(out.stem + "-latest.json")  # the page links it: no 16 KB line of JSON in the page
        rows.write_text(rows_json(run.raw) + "\n")
        print(f"wrote {out} and {rows}")
    workdir = Path(run.rows_file or run.args.from_rows).parent
    for line in publish(run, out, workdir):
        print(line)
    return 0 if run.raw and all(r["ok"] for r in run.raw) else 1


def print_result(result: dict) -> int:
    """Print a script's one JSON document; its exit code: 0 when every check held (``result["ok"]``), else 1."""
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1

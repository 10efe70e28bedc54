"""Fleet benchmark: 200 clusters (as Ansible sees them) on a few real apiservers, audit + upgrade + sliced upgrade.

    . tools/env.sh && python benchmarks/fleet200.py                              # 200 clusters x 300 objects
    . tools/env.sh && python benchmarks/fleet200.py --clusters 20 --objects 100  # a quick check (~5 min)

Each inventory host has its own kubeconfig context and CRD group, spread over --apiservers real
kube-apiserver + etcd pairs (benchmarks/crdops_bench/fleet_world.py); the last --faults hosts are broken (no
permission, unreachable, an admission webhook refusing the write). The storage version of every host's CRD is
flipped long before the runs. Runs, one after another:
  audit    playbooks/fleet_audit.yml (check mode), --forks
  upgrade  playbooks/fleet_upgrade.yml, waves [1, "10%", "100%"], --forks, max_fail_percentage just above
           what the broken hosts cost their wave
  rerun    the same again: every CRD recorded and at release N+1, nothing to do (the fixed cost of a cluster)
  sliced   the same upgrade on a second, fresh set of CRD groups, cut into --slices round-robin slices run in
           parallel through ansible-runner (forks / slices each: the same concurrency on one machine), then
           playbooks/fleet_report_merge.yml
Each run: wall, controller CPU-seconds (ansible-playbook and every descendant), per cluster, peak RSS (the
largest worker = one cluster's task), apiserver and etcd CPU-seconds, load average, report size and render time,
each host's role wall (p50/p90/max) and the tasks that cost most per host. Checked: the report lists every host,
the healthy ones ok with every object re-stored and read back from etcd here, the broken ones failed naming
their cause. Prints one JSON document; exit 1 when a check fails. A script, not a test.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.crdops_bench import fleet_measure, fleet_runs, fleet_world  # noqa: E402

WAVES = [1, "10%", "100%"]


def pick(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values (nearest rank below)."""
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def host_walls(rows: list[dict]) -> dict:
    hosts = fleet_measure.per_host([r for r in rows if r["host"] != "localhost" and "report" not in r["play"].lower()])
    walls = sorted(h["end"] - h["start"] for h in hosts.values())
    busy = sorted(h["busy_s"] for h in hosts.values())
    tasks = sorted(h["tasks"] for h in hosts.values())
    if not walls:
        return {}
    return {"hosts": len(walls), "role_wall_s_p50_p90_max": [pick(walls, .5), pick(walls, .9), round(walls[-1], 2)],
            "in_task_s_p50_max": [pick(busy, .5), round(busy[-1], 2)],
            "tasks_run_p50_max": [tasks[len(tasks) // 2], tasks[-1]]}


def figures(name: str, out: dict, hosts: list, world, report_dir: Path, stem: str = "fleet-report") -> dict:
    meter, rows = out["meter"], out["timing"]
    f = meter.figures()
    f.update(run=name, clusters=len(hosts), controller_cpu_s_per_cluster=round(meter.cpu / len(hosts), 2),
             wall_s_per_cluster=round(meter.wall / len(hosts), 2), report_bytes=fleet_runs.report_files(report_dir, stem),
             report_render_s=fleet_measure.report_render_s(out.get("merge_timing") or rows))
    f.update(host_walls(rows))
    f["costliest_tasks_s_per_host"] = fleet_measure.per_task(
        [r for r in rows if "report" not in r["play"].lower()], len(hosts))[:12]
    return f


def load_report(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="crdops-fleet200-"))
    ctx = {"workdir": work, "collections": fleet_measure.snapshot()}
    t0 = time.monotonic()
    world = fleet_world.start_world(work, args.apiservers)
    ctx["world"] = world
    result: dict = {"command": "python " + shlex.join(sys.argv), "workdir": str(work), "cpus": os.cpu_count(),
                    "clusters": args.clusters, "objects_per_cluster": args.objects, "apiservers": args.apiservers,
                    "forks": args.forks, "runs": {}, "checks": {}}
    try:
        sets = {"a": fleet_world.plan_hosts(args.clusters, args.apiservers, "a", args.faults)}
        if "sliced" in args.runs:
            sets["s"] = fleet_world.plan_hosts(args.clusters, args.apiservers, "s", args.faults)
        all_hosts = [h for hs in sets.values() for h in hs]
        result["start_apiservers_s"] = round(time.monotonic() - t0, 1)
        result["seed_s"] = round(fleet_world.seed_hosts(world, all_hosts, args.objects), 1)
        fleet_world.break_hosts(world, all_hosts)
        fleet_world.write_kubeconfig(world, sets["a"])
        print(f"# seeded {len(all_hosts)} CRD groups x {args.objects} ({result['seed_s']} s)", file=sys.stderr, flush=True)
        if args.settle:
            time.sleep(args.settle)  # the seed's flips are long past when the runs start
        run_all(args, ctx, sets, result)
    finally:
        world.stop()
    result["ok"] = all(result["checks"].values())
    result["failed_checks"] = [k for k, v in result["checks"].items() if not v]
    return result


def run_all(args, ctx: dict, sets: dict, result: dict) -> None:
    world, work, hosts = ctx["world"], ctx["workdir"], sets["a"]
    python = sys.executable
    if "audit" in args.runs:
        rep = work / "audit-report"
        inv = write_inventory(work / "inventory-a.json", fleet_world.inventory(world, hosts, rep, python))
        out = fleet_runs.run_playbook(ctx, "audit", "fleet_audit.yml", inv, args.forks, {})
        result["runs"]["audit"] = figures("audit", out, hosts, world, rep / "latest")
        checks = fleet_runs.check_report(load_report(rep / "latest" / "fleet-report.json"), hosts, args.objects, True)
        result["checks"].update({f"audit: {k}": v for k, v in checks.items()})
        progress("audit", result["runs"]["audit"])
    extra = {"crd_upgrade_waves": WAVES, "crd_upgrade_max_fail_percentage": fleet_runs.max_fail_percentage(WAVES, hosts)}
    if "upgrade" in args.runs:
        rep = work / "upgrade-report"
        inv = write_inventory(work / "inventory-u.json", fleet_world.inventory(world, hosts, rep, python))
        out = fleet_runs.run_playbook(ctx, "upgrade", "fleet_upgrade.yml", inv, args.forks, extra)
        result["runs"]["upgrade"] = dict(figures("upgrade", out, hosts, world, rep / "latest"), rc=out["rc"], extra_vars=extra,
                                         wave_sizes=fleet_runs.wave_sizes(WAVES, len(hosts)))
        checks = fleet_runs.check_report(load_report(rep / "latest" / "fleet-report.json"), hosts, args.objects, False)
        checks.update(fleet_runs.check_etcd(world, hosts, args.objects))
        result["checks"].update({f"upgrade: {k}": v for k, v in checks.items()})
        progress("upgrade", result["runs"]["upgrade"])
    if "rerun" in args.runs:  # every CRD recorded and at release N+1: the cost of a cluster with nothing to do
        rep = work / "rerun-report"
        inv = write_inventory(work / "inventory-r.json", fleet_world.inventory(world, hosts, rep, python))
        out = fleet_runs.run_playbook(ctx, "rerun", "fleet_upgrade.yml", inv, args.forks, extra)
        result["runs"]["rerun"] = dict(figures("rerun", out, hosts, world, rep / "latest"), rc=out["rc"])
        checks = fleet_runs.check_report(load_report(rep / "latest" / "fleet-report.json"), hosts, args.objects, False, rerun=True)
        result["checks"].update({f"rerun: {k}": v for k, v in checks.items()})
        progress("rerun", result["runs"]["rerun"])
    if "sliced" in args.runs:
        run_sliced(args, ctx, sets["s"], result, python)


def run_sliced(args, ctx: dict, hosts: list, result: dict, python: str) -> None:
    world, work = ctx["world"], ctx["workdir"]
    rep = work / "sliced-report"
    per_slice = [hosts[k::args.slices] for k in range(args.slices)]
    extra = {"crd_upgrade_waves": json.dumps(WAVES), "crd_upgrade_report_dir": str(rep),
             "crd_upgrade_max_fail_percentage": max(fleet_runs.max_fail_percentage(WAVES, hs) for hs in per_slice)}
    inventory = fleet_world.inventory(world, hosts, rep, python)
    forks = max(1, math.ceil(args.forks / args.slices))
    out = fleet_runs.run_sliced(ctx, hosts, inventory, args.slices, forks, extra)
    result["runs"]["sliced"] = dict(figures("sliced", out, hosts, world, rep / "latest"), slice_rcs=out["rcs"],
                                    merge_rc=out["merge_rc"], merge_s=out["merge_s"], slices=args.slices,
                                    forks_per_slice=forks, extra_vars=extra)
    merged = load_report(rep / "latest" / "fleet-report.json")
    checks = fleet_runs.check_report(merged, hosts, args.objects, False)
    checks["merged report lists every slice"] = merged.get("slices") == [str(k + 1) for k in range(args.slices)]
    checks.update(fleet_runs.check_etcd(world, hosts, args.objects))
    result["checks"].update({f"sliced: {k}": v for k, v in checks.items()})
    progress("sliced", result["runs"]["sliced"])


def write_inventory(path: Path, inventory: dict) -> Path:
    path.write_text(json.dumps(inventory))
    return path


def progress(name: str, f: dict) -> None:
    print(f"# {name}: wall {f['wall_s']} s, controller {f['controller_cpu_s']} CPU-s "
          f"({f['controller_cpu_s_per_cluster']} per cluster), apiservers {f['server_cpu_s']}, "
          f"load {f['load_average_before_after']}", file=sys.stderr, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=200, help="inventory hosts (clusters as Ansible sees them)")
    ap.add_argument("--objects", type=int, default=300, help="objects per cluster")
    ap.add_argument("--apiservers", type=int, default=4, help="real kube-apiserver + etcd pairs they share (4-8)")
    ap.add_argument("--faults", type=int, default=3, help="broken hosts at the end of the inventory")
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--slices", type=int, default=4)
    ap.add_argument("--runs", default="audit,upgrade,rerun,sliced",
                    help="comma-separated subset of audit,upgrade,rerun,sliced (rerun needs upgrade before it)")
    ap.add_argument("--settle", type=float, default=10, help="seconds between the seed's flips and the first run")
    args = ap.parse_args()
    args.runs = [r for r in args.runs.split(",") if r]
    result = run(args)
    print(json.dumps(result, indent=1, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""What one cluster costs the controller: the first run of the role, then reruns with nothing to do, side by side.

    . tools/env.sh && python benchmarks/cluster_cost.py --objects 1000 --reps 3

One real kube-apiserver + etcd (tests/controlplane, through benchmarks/crdops_bench/fleet_world.py), one inventory
host (a cluster as Ansible sees it) whose CRD has --objects objects seeded straight into etcd at v1alpha1, its
storage version flipped to v1beta1 long before the runs. Runs, one after another, each one ansible-playbook:
  baseline  the same inventory and playbook shape with one `debug` task: ansible-playbook's own start-up, what
            every run pays once whatever the number of clusters (a fleet spreads it over its hosts)
  first     the role crd_upgrade (release N, release N+1): re-store, verify, trim, apply N+1
  rerun     the same again, --reps times: every CRD recorded and at release N+1, nothing to do; interleaved with
            the same rerun with crd_upgrade_skip_when_done false (every phase runs, as before the check existed)
Each run: wall and controller CPU-seconds (user + sys of ansible-playbook and every process below it,
crdops_bench.fleet_measure.Meter), the same minus the baseline (what the cluster itself costs), tasks run and
skipped, the tasks that cost most and the role's phases (seconds, from the benchmark's task-timing callback).
Checked: the first run ok with every object re-stored, every etcd key at v1beta1, each rerun ok, writing nothing
(the etcd revisions each rerun wrote are reported). Prints one JSON document; exit 1 when a check fails. A script, not a test.

    python benchmarks/cluster_cost.py --objects 1000 --reps 2 --compare /work/main

--compare <checkout>: the same runs with that checkout's collection too (labelled `base`; this tree is `this`), side by
side in one run: two inventory hosts, one cluster each (same apiserver, own CRD group, same object count), the base
collection always on the first, this tree's on the second; first runs one after the other, then every rerun kind
interleaved base/this, so both see the same load. Per run also the controller CPU-seconds per task
(`costliest_tasks_cpu_s`, from the timing callback's CPU readings: one host, one fork) and `fixed_overhead_s`: end to
end minus the tasks that read or write every object (PER_OBJECT_TASKS; the re-store's drain wait is inside its task).
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.crdops_bench import data, engine, fleet_measure, fleet_runs, fleet_world  # noqa: E402
from benchmarks.crdops_bench.cli import print_result  # noqa: E402
from tools import collection_tree  # noqa: E402

ROLE_PLAY = [{"name": "One cluster", "hosts": "clusters", "gather_facts": False,
              "tasks": [{"name": "Upgrade this cluster", "ansible.builtin.include_role": {
                  "name": "crdops.migration.crd_upgrade", "rolespec_validate": False}}]}]  # as fleet_upgrade.yml
BASELINE_PLAY = [{"name": "Start-up only", "hosts": "clusters", "gather_facts": False,
                  "tasks": [{"name": "one task", "ansible.builtin.debug": {"msg": "start-up"}}]}]


def phase_of(task: str) -> str:
    """`crd_upgrade : Restore | counts per CRD` -> `Restore`; include tasks and main.yml's own -> `main`."""
    name = task.split(" : ", 1)[-1]
    return name.split(" | ", 1)[0] if " | " in name else "main"


def phases(rows: list[dict]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for r in rows:
        out[phase_of(r["task"])] += r["end"] - r["start"]
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


# Tasks that read or write every object (the definition of what is not fixed overhead): the re-store with its
# confirming pass and drain wait, the etcd scan, the writers check's and the client check's listings, the read-back,
# the managedFields passes around release N+1.
PER_OBJECT_TASKS = ("Restore | re-store every object", "Verify | read every key of each CRD from etcd",
                    "Writers | clients still using a removed version", "Upgrade | clients can still server-side apply",
                    "Upgrade | every object reads back", "Managed fields | rewrite entries")


def fixed_overhead_s(wall: float, rows: list[dict]) -> float:
    """End to end minus the per-object tasks' wall."""
    per_object = sum(r["end"] - r["start"] for r in rows
                     if r["task"].split(" : ", 1)[-1].startswith(PER_OBJECT_TASKS))
    return round(wall - per_object, 2)


def task_cpu(rows: list[dict], top: int = 8) -> list[dict]:
    """Controller CPU-seconds per task (one host, one fork): from its start to the next task's start, the last one
    to its end; most expensive first."""
    rows = sorted((r for r in rows if "cpu_start" in r), key=lambda r: r["start"])
    out = []
    for i, r in enumerate(rows):
        until = rows[i + 1]["cpu_start"] if i + 1 < len(rows) else r["cpu_end"]
        out.append({"task": r["task"].split(" : ", 1)[-1], "cpu_s": round(until - r["cpu_start"], 3),
                    "status": r["status"]})
    return sorted(out, key=lambda x: -x["cpu_s"])[:top]


def run_once(ctx: dict, name: str, play: Path, inv: Path, baseline: dict | None, extra: dict) -> dict:
    out = fleet_runs.run_playbook(ctx, name, str(play), inv, 1, extra)
    meter, rows = out["meter"], out["timing"]
    f = {"rc": out["rc"], "wall_s": round(meter.wall, 2), "controller_cpu_s": round(meter.cpu, 2),
         "server_cpu_s": {k: round(v, 2) for k, v in meter.server.items()},
         "tasks_run": sum(1 for r in rows if r["status"] != "skipped"),
         "tasks_skipped": sum(1 for r in rows if r["status"] == "skipped")}
    if baseline:
        f["wall_s_minus_startup"] = round(meter.wall - baseline["wall_s"], 2)
        f["controller_cpu_s_minus_startup"] = round(meter.cpu - baseline["controller_cpu_s"], 2)
    f["fixed_overhead_s"] = fixed_overhead_s(meter.wall, rows)
    f["phases_s"] = phases(rows)
    f["costliest_tasks_s"] = fleet_measure.per_task(rows, 1)[:8]
    f["costliest_tasks_cpu_s"] = task_cpu(rows)
    print(f"# {name}: wall {f['wall_s']} s, controller {f['controller_cpu_s']} CPU-s, "
          f"tasks {f['tasks_run']} (+{f['tasks_skipped']} skipped)", file=sys.stderr, flush=True)
    return f


def median_row(rows: list[dict]) -> dict:
    keys = ("wall_s", "controller_cpu_s", "wall_s_minus_startup", "controller_cpu_s_minus_startup", "fixed_overhead_s",
            "tasks_run", "tasks_skipped")
    return {k: round(statistics.median(r[k] for r in rows), 2) for k in keys if all(k in r for r in rows)}


def collections_of(checkout: str) -> str:
    """A snapshot of another checkout's collection (as fleet_measure.snapshot does for this tree)."""
    root = tempfile.mkdtemp(prefix="crdops-bench-collections-base-")
    collection_tree.copy(root, str(Path(checkout).resolve()), only=engine.SNAPSHOT_ITEMS)
    return root


def host_inventory(world, host, work: Path, label: str) -> Path:
    inv = work / f"inventory-{label}.json"
    inv.write_text(json.dumps(fleet_world.inventory(world, [host], work / f"report-{label}", sys.executable)))
    return inv


def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="crdops-cluster-cost-"))
    this = fleet_measure.snapshot()
    trees = {"this": this} if not args.compare else {"base": collections_of(args.compare), "this": this}
    world = fleet_world.start_world(work, 1)
    result: dict = {"command": "python " + shlex.join(sys.argv), "workdir": str(work), "objects": args.objects,
                    "trees": {"this": str(REPO), **({"base": str(Path(args.compare).resolve())} if args.compare else {})},
                    "load_average_start": fleet_measure.load_average(), "runs": {}, "checks": {}}
    try:
        hosts = dict(zip(trees, fleet_world.plan_hosts(len(trees), 1, "a", 0)))
        fleet_world.seed_hosts(world, list(hosts.values()), args.objects)
        fleet_world.write_kubeconfig(world, list(hosts.values()))
        invs = {label: host_inventory(world, h, work, label) for label, h in hosts.items()}
        role_play, base_play = work / "role.yml", work / "baseline.yml"
        role_play.write_text(yaml.safe_dump(ROLE_PLAY))
        base_play.write_text(yaml.safe_dump(BASELINE_PLAY))
        extra = {"crd_upgrade_drain_window": args.drain_window}

        def ctx(label: str) -> dict:
            return {"workdir": work, "collections": trees[label], "world": world}

        def suffix(label: str) -> str:
            return "" if len(trees) == 1 else f"_{label}"

        base = run_once(ctx("this"), "baseline", base_play, invs["this"], None, extra)
        result["runs"]["baseline"] = base
        for label, h in hosts.items():
            first = run_once(ctx(label), f"first{suffix(label)}", role_play, invs[label], base, extra)
            result["runs"][f"first{suffix(label)}"] = first
            etcd_ok, counts = data.verify(world.servers[0].etcd_url, h.group, args.objects)
            result["checks"][f"first run{suffix(label)} ok"] = first["rc"] == 0
            result["checks"][f"every etcd key at v1beta1{suffix(label)} ({counts})"] = bool(etcd_ok)
        reruns: dict[str, list[dict]] = defaultdict(list)
        for rep in range(args.reps):  # interleaved: every kind and tree sees the same load
            for kind, skip in (("rerun_every_phase", False), ("rerun", True)):
                for label in trees:
                    key = f"{kind}{suffix(label)}"
                    before = data.revision(world.servers[0].etcd_url)
                    row = run_once(ctx(label), f"{key}-{rep + 1}", role_play, invs[label], base,
                                   dict(extra, crd_upgrade_skip_when_done=skip))
                    # writes of the whole cluster during the rerun (pass Leases, records, events): reported, not judged
                    row["etcd_revisions_written"] = data.revision(world.servers[0].etcd_url) - before
                    result["checks"][f"{key} {rep + 1} ok"] = row["rc"] == 0
                    reruns[key].append(row)
        for label, h in hosts.items():
            etcd_ok, counts = data.verify(world.servers[0].etcd_url, h.group, args.objects)
            result["checks"][f"after the reruns, every etcd key still at v1beta1{suffix(label)} ({counts})"] = bool(etcd_ok)
        result["runs"].update(reruns)
        result["medians"] = {kind: median_row(rows) for kind, rows in reruns.items()}
    finally:
        world.stop()
    result["load_average_end"] = fleet_measure.load_average()
    result["ok"] = all(result["checks"].values())
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=1000, help="objects of the cluster's CRD")
    ap.add_argument("--reps", type=int, default=3, help="reruns of each kind (every phase, nothing to do)")
    ap.add_argument("--drain-window", type=float, default=65,
                    help="crd_upgrade_drain_window of the runs (the seed flipped storage seconds before the first run)")
    ap.add_argument("--compare", metavar="CHECKOUT",
                    help="another checkout (e.g. of main) whose collection runs beside this tree's, interleaved")
    args = ap.parse_args()
    return print_result(run(args))


if __name__ == "__main__":
    sys.exit(main())

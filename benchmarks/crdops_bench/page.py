"""The generated block of docs/performance.md: set-up, contenders, ratios against the targets, tables."""
from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess

from . import data, probe
from .calibration_page import reps_table
from .report import failures, gentle_table, phase_table, role_table, rss_table, throughput_table

CONTENDERS = [
    ("ceiling", "the fastest honest client: list names (PartialObjectMetadataList, 500/page) and send `{{}}` merge patches "
                "(Accept PartialObjectMetadata) from {ceiling_workers} threads over one urllib3 pool, pages overlapping; "
                "no bookkeeping (`benchmarks/crdops_bench/children.py`)"),
    ("ours-gentle / ours-max", "the engine (`restore.migrate_crd`) in a fresh Python process with `RestoreOptions(pace="
                               "'gentle')` / `pace='max'`, other options default; time from the pass's start (its LIST) to the result; "
                               "under pace gentle the latency probe first samples a {probe_idle_seconds:g} s idle, as a run's drain "
                               "lets it, not counted (`wait_s`), as the in-tree migrator's wait is not"),
    ("ours-gentle-apf", "`ours-gentle` while the FlowSchema and PriorityLevelConfiguration of `docs/rbac/` (subject: the "
                        "migrator ServiceAccount) are applied; checked from the `X-Kubernetes-PF-FlowSchema-UID` "
                        "header first (suite calibrate always; suite gentle with `--apf`)"),
    ("ours-gentle-budget-B", "`ours-gentle` holding `latency_budget: B` (suite calibrate: 1.5, 3 and 4 beside "
                             "the default 2; suite gentle with `--budgets`)"),
    ("ours-gentle@REF", "`ours-gentle` as the engine of git commit REF was (`--against REF`), interleaved with this "
                        "tree's: an engine change and what it changed, side by side in one run"),
    ("ours-default / ours-best", "the same with `RestoreOptions()` / `workers={best_workers}`"),
    ("ansible / rerun-ansible", "`ansible-playbook` with one `crd_storage_migrate` task (`workers={best_workers}`), wall "
                                "clock including Ansible start-up; then the same playbook again (the record skips the CRD)"),
    ("rerun", "`ours-best` again on the data it just migrated (a forced re-pass: every write is elided by the apiserver)"),
    ("in-tree", "kube-controller-manager 1.37.2, `--controllers=garbage-collector-controller,namespace-controller,"
                "storage-version-migrator-controller`, default QPS, started after the data is seeded; from creating "
                "the StorageVersionMigration to `Succeeded` (KCM start and the garbage collector's initial sync not "
                "counted); `in-tree-active` (and the gentle suite's in-tree) from just before its first write (etcd "
                "revisions, 50 ms polls) to `Succeeded`, without its wait for the garbage collector's cache"),
    ("kubectl", "`kubectl get <crd> -A -o json | kubectl replace -f -`, kubectl 1.37.2"),
    ("role / role-rerun", "`ansible-playbook` with the `crd_upgrade` role (preflight, discover, flip, barrier, re-store, "
                          "verify every etcd key, trim, upgrade to release N+1), then the same playbook again"),
    ("fleet-3 / fleet-1", "`ansible-playbook` running `crd_storage_migrate` with `max_qps={fleet_qps:g}` against 3 clusters "
                          "(forks 3) vs 1 cluster (as admin)"),
]


def machine(free: str = "") -> str:
    """The CPU, kernel and Python of this machine, and ``free`` (`free -m` as the run saved it; now, without)."""
    cpu, cores = "?", 0
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name") and cpu == "?":
                cpu = line.split(":", 1)[1].strip()
            cores += line.startswith("processor")
    free = free or free_m()
    return (f"{cpu}, {cores} logical CPUs; {platform.system()} {platform.release()}; Python {platform.python_version()}"
            f"\n\n```\n$ free -m\n{free}\n```")


def free_m() -> str:
    """`free -m` now."""
    return subprocess.run(["free", "-m"], capture_output=True, text=True, check=False).stdout.rstrip()


def load_text(load) -> str:
    return "/".join(f"{x:.1f}" for x in load)


def setup_text(run) -> str:
    seed = statistics.median(run.seed_rates) if run.seed_rates else float("nan")
    return f"""- **Machine:** {machine(run.free_m)}
- **Load average** (1/5/15 min) at start {load_text(run.load_start)}, at end {load_text(run.load_end or os.getloadavg())}: anything else
  on the cores competes with the apiserver, etcd and the clients.
- **Control plane:** one local kube-apiserver 1.37.2 + etcd 3.6.16 (`--unsafe-no-fsync`), built by
  `tests/controlplane/build.sh --with-kcm --with-kubectl`; default API Priority and Fairness configuration.
- **Identities:** every migrating contender (kube-controller-manager and kubectl included) runs as the ServiceAccount
  `{run.migrator_user}` (bound to cluster-admin), the first observer as `system:serviceaccount:crdops-bench:bench-probe`
  (get/list ConfigMaps): neither is `system:masters`, so APF queues both (default FlowSchema `service-accounts`);
  the second observer runs as the admin certificate (`system:masters`), which APF exempts ({run.flow_schema}).
  Only the second observer, the fleet suite and the harness's own set-up use the admin certificate.
- **Observers** (the "probe" columns are the ServiceAccount's): two outside clients at once,
  every {probe.INTERVAL * 1000:.0f} ms one `GET` of a ConfigMap and, in a process, schedule and kept-alive connection of its
  own, every {probe.INTERVAL * 1000:.0f} ms one `LIST` of the {probe.CONFIGMAPS} ConfigMaps of its namespace (a consistent
  LIST waits ~95 ms while anyone writes; sent in turn, it halved the GETs); *idle* = the {run.args.idle_seconds:g} s before a contender
  starts (for in-tree: before kube-controller-manager starts), *during* = while it migrates (engine: from its pass's
  start, after the latency probe's idle, to its last answer; ceiling: from connecting to its last answer; kubectl:
  its whole run; in-tree: from just before its first write to `Succeeded`).
- **Data:** per contender and repetition a fresh CRD group with N objects of ~2 KB (`spec.filler` of
  {data.PAYLOAD_BYTES} bytes) in 2 namespaces, written straight into etcd at `v1alpha1` as the apiserver stores them,
  then the storage version flipped to `v1beta1` through the API (the role suite flips it itself); removed afterwards.
  Seeding rate (for reference): median {seed:,.0f} objects/s.
- **Check:** after every run every etcd key of the resource is read back with the engine's `etcd_scan`: a run counts
  only when 100% of the N keys are at `v1beta1`.
- **Repetitions:** {run.reps} per contender and N, one repetition of every contender before the next; medians
  (min–max in the JSON). The contender order rotates per repetition. {run.svm_info}.
- **Code:** {run.code}."""


def contenders_text(args) -> str:
    return "\n".join(f"| {name} | {what.format(**vars(args))} |" for name, what in CONTENDERS)


def block(run, ratio_table: str, notes: str) -> str:
    raw = run.raw
    parts = [f"""## Latest run of `benchmarks/run.py`

Generated on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} by

```
{run.cmdline}
```

(wall time {run.total / 60:.1f} min). Every number in this section comes from that one command.

### Set-up

{setup_text(run)}

| contender | what |
|---|---|
{contenders_text(run.args)}

### Ratios and targets

{ratio_table}

{notes}"""]
    if any(r["suite"] == "gentle" for r in raw):
        parts.append("### Gentleness: the probe's latency, idle → during, and each contender's throughput\n\n" + gentle_table(raw))
    if any(r["suite"] == "calibrate" for r in raw):
        parts.append("### Calibration: every contender and repetition, both observers and our probe\n\n"
                     "A multiple is during ÷ idle of the same observer in the same repetition; our probe's is the "
                     "engine's own (`pace.probe.multiple`). The medians, the chart and the checks are on the first "
                     "screen of this page (a calibration run writes them there).\n\n" + reps_table(raw))
    if any(r["suite"] == "role" for r in raw):
        parts.append("### The role end to end\n\nFixed overhead = end to end − re-store task − final readability LIST.\n\n"
                     + role_table(raw) + "\n\nWhere the role's time goes (median seconds per phase; a phase is the "
                     "task-name prefix before ` | `):\n\n" + phase_table(raw))
    if any(r["suite"] in ("throughput", "fleet") for r in raw):
        parts.append("### Throughput side by side\n\n" + throughput_table(raw, run.args.fleet_qps)
                     + "\n\nPeak RSS of the engine process (ours-best):\n\n" + rss_table(raw))
    parts.append(f"Failures: {failures(raw)}\n\nEvery run of this command, as JSON: "
                 f"[performance-latest.json](performance-latest.json).")
    return "\n\n".join(parts) + "\n"

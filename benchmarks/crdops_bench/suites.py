"""What one run measures. Every suite seeds fresh data per contender and repetition, checks every etcd key
afterwards (a wrong answer is a FAILED row, never a fast one) and removes the data again.

  gentle      two outside observers' GET/LIST latency idle vs during (observers.py), and the throughput, of
              ceiling, ours-gentle, ours-max, in-tree and kubectl at one N (gentleness and throughput shares)
  calibrate   the same observers, side by side: the in-tree migrator, ours at latency budgets 1.5, 2 (the
              default), 3 and 4, and ours at the default under the shipped APF objects, repetitions interleaved
              (issue #39: speed against gentleness, our probe against the observers)
  role        the crd_upgrade role end to end at each N, its re-store task, its fixed overhead, and a rerun
  throughput  ceiling, ours (default and best workers), ansible-playbook, forced re-pass, in-tree, kubectl
              at each N, with the engine's peak RSS
  fleet       ansible-playbook over 3 clusters (forks 3) vs 1 cluster, each capped with max_qps
"""
from __future__ import annotations

import functools
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

from . import apf, data, host_stat, observers, own_probe, role
from .fleet_measure import proc_cpu_s
from .intree import InTree
from .probe import Probe

THROUGHPUT = ("ceiling", "ours-default", "ours-best", "ansible", "in-tree", "kubectl")
GENTLE = ("ceiling", "ours-gentle", "ours-max", "in-tree", "kubectl")
APF = "ours-gentle-apf"  # --apf: ours-gentle under the shipped FlowSchema (apf.py)
ADMIN = "ours-gentle-admin"  # --admin: ours-gentle as a system:masters certificate, which APF exempts
BUDGET = "ours-gentle-budget-"  # --budgets: ours-gentle holding another latency budget than the default
AGAINST = "ours-gentle@"  # --against REF: ours-gentle as the engine of git commit REF (an engine change's A/B)
DEFAULT_BUDGET = 2.0  # crd_storage_migrate's latency_budget default: ours-gentle holds it
CALIBRATE_BUDGETS = (1.5, 3.0, 4.0)  # the calibrate suite's budgets beside the default


def budget_contender(budget: float) -> str:
    return f"{BUDGET}{budget:g}"


def extra_gentle(args) -> tuple:
    """The gentle suite's contenders beside GENTLE that this command asked for."""
    return (((APF,) if args.apf else ()) + ((ADMIN,) if args.admin else ())
            + tuple(budget_contender(b) for b in args.budgets) + against_contenders(args))


def against_contenders(args) -> tuple:
    """The earlier engine this command runs beside ours (--against), as a contender name; none without it."""
    return (f"{AGAINST}{args.against}",) if args.against else ()


def calibrate_contenders(budgets, against: tuple = ()) -> tuple:
    """in-tree, ours at each budget in order (the default as ours-gentle), ours at the default under APF, then
    the default of an earlier engine (--against)."""
    ours = sorted({float(b) for b in budgets} | {DEFAULT_BUDGET})
    return (("in-tree",) + tuple("ours-gentle" if b == DEFAULT_BUDGET else budget_contender(b) for b in ours)
            + (APF,) + against)


def budget_of(contender: str) -> float:
    """The latency budget a contender of ours holds (NaN for another contender)."""
    if contender.startswith(BUDGET):
        return float(contender[len(BUDGET):])
    return DEFAULT_BUDGET if contender in ("ours-gentle", APF, ADMIN) or contender.startswith(AGAINST) else float("nan")


def rotated(order: tuple, rep: int) -> list:
    """A different first contender per repetition: no position bias."""
    k = rep % len(order)
    return list(order[k:] + order[:k])


# Before the idle window the control plane must be done with the seeding's aftermath (the new CRD's watch cache
# listing every seeded object, the garbage collection of the previous group's removal): an idle window measured
# while the apiserver still digests them has a p99 of tens of ms against a p50 of 3 ms, and a ratio against it
# measures that noise, not the contender.
# "Quiet" is relative to what the observers alone cost the servers: two observers (80 requests a second) keep
# apiserver + etcd at ~0.15 core of their own, above any fixed threshold a single observer's ~0.09 allowed. So the
# servers' CPU is measured once with nothing but the observers asking (the least of a few steps), and a window
# waits until they are back within SETTLE_CORES of that.
SETTLE_CORES = 0.05   # apiserver + etcd within this much of a core above the observers-only baseline ...
SETTLE_STEP_S = 3.0   # ... over this long
SETTLE_MAX_S = 180.0  # then the window starts anyway, and its row says it was not quiet
BASELINE_STEPS = 4
QUIET_P99_OVER_P50 = 2.0


def server_pids(cluster) -> list[int]:
    procs = [cluster.etcd.process] + [a.process for a in cluster.apiservers]
    return [p.pid for p in procs if p is not None and p.pid]


def servers_cpu_s(pids: list[int]) -> float:
    return sum(proc_cpu_s(pid) for pid in pids)


def servers_cores(pids: list[int]) -> float:
    """apiserver + etcd CPU (cores) over one SETTLE_STEP_S."""
    before = servers_cpu_s(pids)
    time.sleep(SETTLE_STEP_S)
    return (servers_cpu_s(pids) - before) / SETTLE_STEP_S


def observers_only_cores(pids: list[int]) -> float:
    """What the servers use with only the observers asking: the least of BASELINE_STEPS steps."""
    return round(min(servers_cores(pids) for _step in range(BASELINE_STEPS)), 3)


def quiet(window: dict) -> bool:
    return all(window[k]["p99"] <= QUIET_P99_OVER_P50 * window[k]["p50"] for k in ("get", "list"))


class IdleWindow:
    """A gentle contender's `ready`: waits until the control plane is quiet, sleeps through the idle window and
    keeps each observer's summary of it, with how long it waited, the servers' CPU when it began, the load average
    and whether the baseline is quiet (idle p99 within QUIET_P99_OVER_P50 x idle p50 for GET and LIST)."""

    def __init__(self, watching: dict[str, Probe], seconds: float, pids: list[int], baseline_cores: float = 0.0):
        self.observers, self.seconds, self.pids = watching, seconds, pids
        self.quiet_below = baseline_cores + SETTLE_CORES
        self.t0 = self.t1 = 0.0
        self.windows: dict[str, dict] = {}

    def settle(self) -> tuple[float, float]:
        """Seconds waited, and the servers' CPU (cores) over the last step."""
        t0 = time.monotonic()
        while True:
            cores = servers_cores(self.pids)
            if cores < self.quiet_below or time.monotonic() - t0 > SETTLE_MAX_S:
                return round(time.monotonic() - t0, 1), round(cores, 3)

    def __call__(self) -> None:
        waited, cores = self.settle()
        self.t0 = time.monotonic()
        time.sleep(self.seconds)
        self.t1 = time.monotonic()
        # t0/t1 place the window among the apiserver's collections and the host's steal (noise_sources.py)
        context = dict(settle_s=waited, servers_cores=cores, quiet_below_cores=round(self.quiet_below, 3),
                       load1=round(os.getloadavg()[0], 2), t0=round(self.t0, 3), t1=round(self.t1, 3))
        self.windows = {name: dict(w, quiet=quiet(w), **context)
                        for name, w in observers.windows(self.observers, self.t0, self.t1).items()}

    def again(self, extra_percentiles: tuple) -> None:
        """The same windows, with more percentiles (our probe's, once its summary names it)."""
        for name, probe in self.observers.items():
            if name in self.windows:
                self.windows[name].update(probe.window(self.t0, self.t1, extra_percentiles))


def observed_text(row: dict) -> str:
    """` GET p99 x1.3 (ServiceAccount, 1000 idle) x1.1 (APF-exempt, 1000 idle), own x1.5`: for a printed row."""
    parts = []
    for obs in observers.OBSERVERS:
        idle, during = (observers.get_stat(row, obs, w) for w in ("idle", "during"))
        n = observers.get_stat(row, obs, "idle", "n")
        if not math.isnan(idle):
            parts.append(f"x{during / idle:.2f} ({observers.SHORT[obs]}, {n:.0f} idle)")
    own = own_probe.multiple(own_probe.summary(row))
    return (" GET p99 " + " ".join(parts) + (f", own x{own:.2f}" if not math.isnan(own) else "")) if parts else ""


class Runner:
    def __init__(self, bench, args, svm_version: str):
        self.bench, self.args = bench, args
        self.intree = InTree(bench, svm_version)
        self.raw: list[dict] = []
        self.observers: dict[str, Probe] = {}
        self.flow_schemas = ""  # which FlowSchema the apiserver named for each observer
        self.on_record = None  # called after every row (the run saves its rows)

    def record(self, suite: str, contender: str, n: int, rep: int, out: dict, verified: tuple[bool, str]) -> dict:
        ok, counts = verified
        # t0/t1 (time.monotonic(), one clock for every process) stay: they place the work among the observers' samples
        row = {k: v for k, v in out.items() if k != "result"}
        row.update(suite=suite, contender=contender, n=n, rep=rep, etcd=counts, note=out.get("note", ""))
        row["ok"] = ok and not row["note"]
        row["objects_per_s"] = n / out["seconds"] if out["seconds"] else float("nan")
        self.raw.append(row)
        if self.on_record:
            self.on_record()
        extra = f" rss={row['rss_kb'] / 1024:.0f}MiB" if row.get("rss_kb") else ""
        extra += observed_text(row)
        settle = (row.get("probe_idle") or {}).get("settle_s")
        extra += f" settle {settle:.0f}s" if settle is not None else ""
        print(f"  {suite:<10} {contender:<14} N={n:<6} rep={rep} {out['seconds']:8.2f}s {row['objects_per_s']:8.0f} obj/s "
              f"{'ok' if row['ok'] else 'FAILED'}{extra}  [{counts}] {row['note'][:300]}", flush=True)
        return row

    def once(self, suite: str, tag: str, label: str, n: int, rep: int, fn, keep: bool = False) -> tuple[str, dict]:
        """Seed, run `fn(group)`, verify, record, drop (unless keep)."""
        group = self.bench.seed(tag, n)
        out = fn(group)
        row = self.record(suite, label, n, rep, out, self.bench.verify(group, n))
        if not keep:
            self.bench.drop(group)
        return group, row

    # ---- gentle and calibrate -------------------------------------------------------------------------
    def gentle_contender(self, name: str, group: str, ready) -> dict:
        b, w = self.bench, self.args.ceiling_workers
        if name == "ceiling":
            return b.ceiling(group, w, ready)
        if name == APF:
            with apf.shipped(b.kube, b.migrator):
                return b.engine(group, {"pace": "gentle"}, ready)
        if name == ADMIN:  # no priority level queues it: the pace alone keeps it gentle
            return b.engine(group, {"pace": "gentle"}, ready, auth=b.admin_auth())
        if name.startswith(BUDGET):
            return b.engine(group, {"pace": "gentle", "latency_budget": float(name[len(BUDGET):])}, ready)
        if name.startswith(AGAINST):
            return b.engine(group, {"pace": "gentle"}, ready, ref=name[len(AGAINST):])
        if name in ("ours-gentle", "ours-max"):
            return b.engine(group, {"pace": name.split("-")[1]}, ready)
        if name == "in-tree":
            # the work alone: from just before its first write to Succeeded; the wait before it (the controller's
            # wait for the garbage collector's cache, a few LISTs) is kept as wait_s
            out = self.intree.migrate(group, ready)
            return dict(out, seconds=out["work_seconds"], t0=out["t_work"], wait_s=out["t_work"] - out["t0"])
        return b.kubectl_replace(group, ready)

    def gentle_run(self, name: str, idle: "IdleWindow", group: str) -> dict:
        """One contender with both observers' idle and during windows; where our probe names a percentile other
        than theirs (own_probe.py), their windows carry it too."""
        out = self.gentle_contender(name, group, idle)
        mine = own_probe.summary(out)
        extra = (own_probe.percentile(mine),) if mine else ()
        if extra:
            idle.again(extra)
        during = observers.windows(self.observers, out["t0"], out["t1"], extra)
        for obs in self.observers:
            prefix = observers.PREFIX[obs]
            out.update({f"{prefix}_idle": idle.windows.get(obs), f"{prefix}_during": during[obs]})
        return out

    def gentle(self, n: int, reps: int, suite: str = "gentle", names: tuple | None = None) -> None:
        """Every contender once per repetition, repetitions one after the other (drift spreads evenly over the
        contenders), the first contender rotating per repetition."""
        names = names or GENTLE + extra_gentle(self.args)
        self.observers = observers.start(self.bench)
        pids = server_pids(self.bench.cluster)
        host = host_stat.HostStat(self.bench.workdir / host_stat.FILE_NAME).start()
        try:
            baseline = observers_only_cores(pids)
            print(f"# servers with only the observers asking: {baseline} cores; a window waits for < "
                  f"{baseline + SETTLE_CORES:.3f}", flush=True)
            for rep in range(reps):
                print(f"# {suite} N={n} rep {rep + 1}/{reps}", flush=True)
                for name in rotated(names, rep):
                    if name in self.args.skip or (name == "kubectl" and not self.bench.kubectl):
                        continue
                    idle = IdleWindow(self.observers, self.args.idle_seconds, pids, baseline)
                    self.once(suite, name[:2], name, n, rep, functools.partial(self.gentle_run, name, idle))
            self.flow_schemas = observers.flow_schemas(self.bench.kube, self.observers)
        finally:
            host.stop()
            observers.stop(self.observers)

    def calibrate(self, n: int, reps: int) -> None:
        names = calibrate_contenders(self.args.budgets or CALIBRATE_BUDGETS, against_contenders(self.args))
        self.gentle(n, reps, "calibrate", names)

    # ---- role ------------------------------------------------------------------------------------
    def role(self, sizes: list, reps: int, rerun_n: int) -> None:
        for n in sizes:
            for rep in range(reps):
                print(f"# role N={n} rep {rep + 1}/{reps}", flush=True)
                group = self.bench.seed("r", n, flip=False)
                first = role.run_role(self.bench, group, n)
                self.record("role", "role", n, rep, first, self.bench.verify(group, n))
                if n == rerun_n and self.args.role_rerun:
                    again = role.run_role(self.bench, group, n, releases=first["releases"])
                    self.record("role", "role-rerun", n, rep, again, self.bench.verify(group, n))
                self.bench.drop(group)
                if n == rerun_n:
                    self.module_rerun(n, rep)

    def module_rerun(self, n: int, rep: int) -> None:
        """crd_storage_migrate in a playbook, then the same playbook again (the record skips the CRD, one
        managedFields-only LIST remains): the rerun ÷ first target."""
        b = self.bench
        g, _row = self.once("role", "m", "module", n, rep, lambda g: b.ansible(g, None), keep=True)
        self.record("role", "module-rerun", n, rep, b.ansible(g, None), b.verify(g, n))
        b.drop(g)

    # ---- throughput: every contender side by side at each N ---------------------------------------
    def throughput_contender(self, name: str, n: int, rep: int) -> None:
        b, w = self.bench, self.args.best_workers
        if name == "ceiling":
            self.once("throughput", "c", "ceiling", n, rep, lambda g: b.ceiling(g, w))
        elif name == "ours-default":
            self.once("throughput", "d", "ours-default", n, rep, lambda g: b.engine(g, {}))
        elif name == "ours-best":
            g, _row = self.once("throughput", "b", "ours-best", n, rep, lambda g: b.engine(g, {"workers": w}), keep=True)
            out = b.engine(g, {"workers": w})  # again on migrated data: every write elided
            out["note"] = out["note"] or ("" if out["rewritten"] == 0 else f"rewritten={out['rewritten']}")
            self.record("throughput", "rerun", n, rep, out, b.verify(g, n))
            b.drop(g)
        elif name == "ansible":
            g, _row = self.once("throughput", "a", "ansible", n, rep, lambda g: b.ansible(g, w), keep=True)
            # the same playbook again, as a user reruns it: the migration record skips the CRD
            self.record("throughput", "rerun-ansible", n, rep, b.ansible(g, w), b.verify(g, n))
            b.drop(g)
        elif name == "in-tree":
            def intree(g):
                out = self.intree.migrate(g)
                self.record("throughput", "in-tree-active", n, rep, dict(out, seconds=out["work_seconds"]), b.verify(g, n))
                return out
            self.once("throughput", "i", "in-tree", n, rep, intree)
        elif name == "kubectl" and b.kubectl:
            self.once("throughput", "k", "kubectl", n, rep, b.kubectl_replace)

    def throughput(self, sizes: list, reps: int) -> None:
        for n in sizes:
            for rep in range(reps):
                print(f"# throughput N={n} rep {rep + 1}/{reps}", flush=True)
                for name in rotated(THROUGHPUT, rep):
                    if name not in self.args.skip and not (name == "kubectl" and n != sizes[0]):
                        self.throughput_contender(name, n, rep)

    # ---- fleet -----------------------------------------------------------------------------------
    def fleet(self, n: int, reps: int) -> None:
        """3 clusters vs 1, as admin (one identity per cluster would need three token set-ups)."""
        from tests.controlplane.cluster import admin_kube, start_fleet

        print(f"# fleet: 3 clusters x {n} objects, max_qps={self.args.fleet_qps}, forks 3 vs 1 cluster", flush=True)
        fleet = start_fleet(3, self.bench.workdir / "fleet", self.bench.binaries, prefix="bfleet")
        try:
            members = [(c, admin_kube(c)) for c in fleet.clusters]
            hosts = {c.name: {"kubeconfig": str(fleet.kubeconfig), "context": c.name} for c in fleet.clusters}
            for rep in range(reps):
                for label, count in (("fleet-3", 3), ("fleet-1", 1)):
                    self.fleet_once(label, members[:count], {h: hosts[h] for h in list(hosts)[:count]}, n, rep)
        finally:
            fleet.stop()

    def fleet_once(self, label: str, members: list, hosts: dict, n: int, rep: int) -> None:
        group = self.bench.new_group("f")
        with ThreadPoolExecutor(len(members)) as ex:
            list(ex.map(lambda ck: data.seed(ck[1], ck[0].etcd_url, group, n), members))
        task = {"kubeconfig": "{{ kc }}", "context": "{{ ctx }}", "names": [data.crd_name(group)],
                "workers": self.args.best_workers, "max_qps": self.args.fleet_qps, "drain_window": 1}
        play = [{"name": "bench", "hosts": "all", "gather_facts": False,
                 "tasks": [{"name": "migrate", "crdops.migration.crd_storage_migrate": task}]}]
        inventory = {"all": {"hosts": {h: {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                                           "kc": v["kubeconfig"], "ctx": v["context"]} for h, v in hosts.items()}}}
        out = self.bench.playbook(play, inventory, forks=3)
        out.pop("output")
        checks = [data.verify(c.etcd_url, group, n) for c, _k in members]
        self.record("fleet", label, n * len(members), rep, out,
                    (all(ok for ok, _c in checks), "; ".join(c for _ok, c in checks)))
        for c, k in members:
            data.drop(k, c.etcd_url, group)

"""What one fleet run costs: wall, controller CPU, peak RSS, apiserver CPU, per-task times (benchmarks/fleet200.py).

Controller CPU-seconds are user + sys of ansible-playbook and every process below it, read with
getrusage(RUSAGE_CHILDREN) before and after the run: the kernel adds a child's times (and those of every
descendant it waited for) to its parent when the parent reaps it, and ansible-playbook reaps its workers, which
reap the module processes. The apiservers are children of this process too, but none is reaped during a run.
Apiserver and etcd CPU come from /proc/<pid>/stat (utime + stime). Per-task times come from the
`crdops_task_timing` callback (benchmarks/callback_plugins/): one line per host and task, start and end.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path


from ..rss_sampler import TreeRss
from . import REPO, engine

CALLBACKS = REPO / "benchmarks" / "callback_plugins"
TICKS = os.sysconf("SC_CLK_TCK")


def ansible_env(collections: str) -> dict:
    """ansible-* environment: the snapshot first, then the `ansible` package's collections (kubernetes.core);
    no ANSIBLE_* / K8S_AUTH_* of the caller; the timing callback on."""
    import ansible_collections

    site = os.path.dirname(list(ansible_collections.__path__)[-1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_"))}
    env.update({k: os.environ[k] for k in ("ANSIBLE_HOME", "ANSIBLE_REMOTE_TEMP") if k in os.environ})
    env.update(ANSIBLE_COLLECTIONS_PATH=f"{collections}:{site}", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="crdops_task_timing",
               ANSIBLE_HOST_KEY_CHECKING="false")
    return env


def snapshot() -> str:
    """A copy of the collection: the tree may be edited while a long run goes on. This process imports the
    engine (the etcd check) from it too."""
    root = engine.snapshot()
    engine.use(root)
    return root


def proc_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class Meter:
    """Around one run: wall, controller CPU, server CPU, load average, the process tree's peak RSS."""

    def __init__(self, servers: dict[str, list[int]]) -> None:
        self.servers = servers

    def __enter__(self) -> "Meter":
        self.load_before = load_average()
        self.server_before = {k: sum(proc_cpu_s(p) for p in pids) for k, pids in self.servers.items()}
        self.cpu_before, self.t0 = children_cpu_s(), time.monotonic()
        self.samplers: list[TreeRss] = []
        return self

    def watch(self, pid: int) -> None:
        self.samplers.append(TreeRss(pid, interval=0.5).start())

    def __exit__(self, *_exc) -> None:
        self.wall = time.monotonic() - self.t0
        self.cpu = children_cpu_s() - self.cpu_before
        self.server = {k: sum(proc_cpu_s(p) for p in pids) - self.server_before[k] for k, pids in self.servers.items()}
        for s in self.samplers:
            s.stop()
        self.load_after = load_average()

    def figures(self) -> dict:
        rss = [s.to_dict() for s in self.samplers]
        return {"wall_s": round(self.wall, 1), "controller_cpu_s": round(self.cpu, 1),
                "server_cpu_s": {k: round(v, 1) for k, v in self.server.items()},
                "load_average_before_after": [self.load_before, self.load_after],
                "ansible_playbook_peak_mb": max((r["ansible_playbook_peak_mb"] for r in rss), default=0),
                "largest_worker_peak_mb": max((r["largest_child_peak_mb"] for r in rss), default=0),
                "tree_peak_mb": round(sum(r["tree_peak_mb"] for r in rss), 1)}


def playbook(collections: str, workdir: Path, playbook_name: str, inventory: Path, forks: int, extra: dict,
             meter: Meter, log_name: str) -> tuple[int, Path]:
    """One ansible-playbook run of playbooks/<playbook_name> from the snapshot; (rc, timing file)."""
    timing = workdir / f"{log_name}.timing.jsonl"
    env = dict(ansible_env(collections), CRDOPS_TASK_TIMING=str(timing))
    book = Path(collections) / "ansible_collections" / "crdops" / "migration" / "playbooks" / playbook_name
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory), str(book),
           "--forks", str(forks), "-e", json.dumps(extra)]
    with open(workdir / f"{log_name}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        meter.watch(proc.pid)
        rc = proc.wait()
    return rc, timing


def read_timing(*paths: Path) -> list[dict]:
    rows = []
    for path in paths:
        if path.exists():
            rows.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return rows


def per_host(rows: list[dict]) -> dict[str, dict]:
    """Per host: its role's wall (first task start to last task end), tasks run (skipped ones apart)."""
    out: dict[str, dict] = {}
    for r in rows:
        h = out.setdefault(r["host"], {"start": r["start"], "end": r["end"], "tasks": 0, "skipped": 0, "busy_s": 0.0})
        h["start"], h["end"] = min(h["start"], r["start"]), max(h["end"], r["end"])
        h["skipped" if r["status"] == "skipped" else "tasks"] += 1
        h["busy_s"] += r["end"] - r["start"]
    return out


def per_task(rows: list[dict], hosts: int) -> list[dict]:
    """Task name -> seconds per host (mean over the hosts that ran it), most expensive first."""
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for r in rows:
        name = r["task"].split(" : ", 1)[-1]
        total[name] += r["end"] - r["start"]
        count[name] += 1
    out = [{"task": k, "s_per_host": round(v / max(1, hosts), 3), "runs": count[k]} for k, v in total.items()]
    return sorted(out, key=lambda x: -x["s_per_host"])


def report_render_s(rows: list[dict]) -> float:
    """Seconds of the plays that write the fleet report ("Fleet report", "Fleet audit report") or merge the
    slices' reports; not the first play, which only opens the run's report folder."""
    spans = [(r["start"], r["end"]) for r in rows if r["play"].lower().startswith(("fleet ", "merge "))]
    return round(max(e for _s, e in spans) - min(s for s, _e in spans), 2) if spans else 0.0

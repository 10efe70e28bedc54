"""The three fleet runs of benchmarks/fleet200.py and the checks of their reports.

  audit    playbooks/fleet_audit.yml: every host at once in check mode (forks bound the concurrency)
  upgrade  playbooks/fleet_upgrade.yml with the documented waves [1, "10%", "100%"]
  sliced   the upgrade as AWX job slicing runs it: the inventory cut round-robin into slices (AWX gives slice k
           the hosts k, k+n, k+2n, ...), one `ansible-runner run` per slice in parallel with its own inventory and
           crd_upgrade_report_slice, then playbooks/fleet_report_merge.yml through ansible-runner
"""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from . import data, fleet_measure
from .fleet_world import FAULT_EVIDENCE, Host, World

PLAYBOOKS = ("fleet_upgrade.yml", "fleet_report_merge.yml", "fleet_audit.yml")


def wave_sizes(waves: list, hosts: int) -> list[int]:
    """What serial does with a list of batch sizes: a percentage of all hosts (floored, at least 1), the last
    size repeated until every host has a batch."""
    sizes, left, i = [], hosts, 0
    while left > 0:
        w = waves[min(i, len(waves) - 1)]
        size = max(1, math.floor(hosts * float(w[:-1]) / 100)) if isinstance(w, str) and w.endswith("%") else int(w)
        sizes.append(min(size, left))
        left -= sizes[-1]
        i += 1
    return sizes


def max_fail_percentage(waves: list, hosts: list[Host]) -> int:
    """The smallest threshold the broken hosts (last in the inventory, so in the last wave) do not exceed."""
    broken = sum(1 for h in hosts if h.fault)
    last = wave_sizes(waves, len(hosts))[-1]
    return math.ceil(100 * broken / last) if broken else 0


def report_files(report_dir: Path, stem: str = "fleet-report") -> dict:
    return {ext: (report_dir / f"{stem}.{ext}").stat().st_size
            for ext in ("json", "md", "html") if (report_dir / f"{stem}.{ext}").exists()}


def check_report(report: dict, hosts: list[Host], objects: int, check_mode: bool, rerun: bool = False) -> dict[str, bool]:
    """Every host once; the healthy ones ok (planned in check mode) with every object re-stored (none on a rerun)
    and verified; the broken ones failed, their error naming the cause."""
    rows = {c["cluster"]: c for c in report.get("clusters", [])}
    checks = {"report lists every host once": sorted(rows) == sorted(h.name for h in hosts)
              and len(report.get("clusters", [])) == len(hosts)}
    rewritten = 0 if rerun else objects
    bad_ok = [h.name for h in hosts
              if not h.fault and not healthy_row(rows.get(h.name, {}), h, objects, check_mode, rewritten)]
    checks[f"every healthy host {'planned' if check_mode else 'ok'} with {objects} objects"
           f"{'' if check_mode else f', {rewritten} rewritten, etcd verified, trimmed, upgraded'} ({len(bad_ok)} not:"
           f" {bad_ok[:3]})"] = not bad_ok
    for h in (h for h in hosts if h.fault):
        row = rows.get(h.name, {})
        checks[f"{h.name} ({h.fault}) failed in {row.get('failed_phase')}, error names the cause"] = (
            row.get("status") == "failed" and FAULT_EVIDENCE[h.fault] in (row.get("error") or "")
            and h.name in (row.get("error") or ""))
    healthy = [h for h in hosts if not h.fault]
    s = report.get("summary", {})
    checks["summary counts"] = (s.get("clusters") == len(hosts) and s.get("failed") == len(hosts) - len(healthy)
                                and s.get("planned" if check_mode else "ok") == len(healthy)
                                and (check_mode or s.get("rewritten") == rewritten * len(healthy)))
    return checks


def healthy_row(row: dict, h: Host, objects: int, check_mode: bool, rewritten: int) -> bool:
    crds = [c for c in row.get("crds", []) if c.get("name") == h.crd_name]
    if len(crds) != 1:
        return False
    crd = crds[0]
    if check_mode:
        return row.get("status") == "planned" and crd.get("objects") == objects
    if rewritten == 0 and row.get("nothing_to_do"):  # a rerun on a done cluster: one check, no phase (etcd: check_etcd)
        return row.get("status") == "ok" and crd.get("objects") == objects and not crd.get("rewritten")
    etcd = crd.get("etcd") or {}
    done = rewritten == 0 or (crd.get("trimmed") is True and crd.get("upgraded") is True)
    return (row.get("status") == "ok" and (crd.get("rewritten") or 0) == rewritten and not crd.get("failed")
            and etcd.get("counts") == {f"{h.group}/v1beta1": objects} and done)


def check_etcd(world: World, hosts: list[Host], objects: int) -> dict[str, bool]:
    """etcd itself, read here: every key of every healthy host at v1beta1, the broken hosts' keys untouched."""
    wrong = []
    for h in hosts:
        ok, counts = data.verify(world.servers[h.server].etcd_url, h.group, objects)
        if ok == bool(h.fault):
            wrong.append(f"{h.name}: {counts}")
    return {f"etcd: every key of every healthy host at v1beta1, broken hosts' keys at v1alpha1 ({wrong[:3]})": not wrong}


def run_playbook(ctx: dict, name: str, book: str, inventory: Path, forks: int, extra: dict) -> dict:
    meter = fleet_measure.Meter(ctx["world"].server_pids())
    with meter:
        rc, timing = fleet_measure.playbook(ctx["collections"], ctx["workdir"], book, inventory, forks, extra, meter, name)
    return {"rc": rc, "meter": meter, "timing": fleet_measure.read_timing(timing)}


def runner_dir(ctx: dict, root: Path, inventory: dict, extravars: dict, forks: int, timing: Path) -> Path:
    """A private data dir laid out as AWX writes it (env/, inventory/hosts, project/ with the playbooks)."""
    for sub in ("env", "inventory", "project"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    books = Path(ctx["collections"]) / "ansible_collections" / "crdops" / "migration" / "playbooks"
    for book in PLAYBOOKS:
        shutil.copy(books / book, root / "project" / book)
    (root / "inventory" / "hosts").write_text(yaml.safe_dump(inventory))
    env = {k: v for k, v in fleet_measure.ansible_env(ctx["collections"]).items() if k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_FORKS=str(forks), CRDOPS_TASK_TIMING=str(timing))
    (root / "env" / "envvars").write_text(yaml.safe_dump(env))
    (root / "env" / "extravars").write_text(json.dumps(extravars))
    return root


def runner_cmd(root: Path, book: str) -> list[str]:
    return [str(Path(sys.executable).parent / "ansible-runner"), "run", str(root), "-p", book, "--ident", "bench"]


def slice_inventory(full: dict, names: list[str]) -> dict:
    inv = json.loads(json.dumps(full))
    rows = inv["all"]["children"]["clusters"]["hosts"]
    inv["all"]["children"]["clusters"]["hosts"] = {n: rows[n] for n in names}
    return inv


def run_sliced(ctx: dict, hosts: list[Host], inventory: dict, slices: int, forks: int, extra: dict) -> dict:
    """`slices` ansible-runner jobs in parallel, then the merge job; one Meter over all of it."""
    work, timings, procs = ctx["workdir"] / "sliced", [], []
    meter = fleet_measure.Meter(ctx["world"].server_pids())
    with meter:
        for k in range(slices):
            names = [h.name for h in hosts[k::slices]]
            timing = work / f"slice{k + 1}.timing.jsonl"
            root = runner_dir(ctx, work / f"slice{k + 1}", slice_inventory(inventory, names),
                              dict(extra, crd_upgrade_report_slice=str(k + 1)), forks, timing)
            log = open(work / f"slice{k + 1}.log", "w")
            procs.append((subprocess.Popen(runner_cmd(root, "fleet_upgrade.yml"), stdout=log, stderr=subprocess.STDOUT,
                                           env=fleet_measure.ansible_env(ctx["collections"])), log))
            meter.watch(procs[-1][0].pid)
            timings.append(timing)
        rcs = [p.wait() for p, _log in procs]
        for _p, log in procs:
            log.close()
        slices_done = time.monotonic()
        merge_timing = work / "merge.timing.jsonl"
        root = runner_dir(ctx, work / "merge", {"all": {"hosts": {}}},
                          {"crd_upgrade_report_dir": extra["crd_upgrade_report_dir"]}, 1, merge_timing)
        with open(work / "merge.log", "w") as log:
            merge_rc = subprocess.run(runner_cmd(root, "fleet_report_merge.yml"), stdout=log, stderr=subprocess.STDOUT,
                                      env=fleet_measure.ansible_env(ctx["collections"]), check=False).returncode
    merge_s = meter.t0 + meter.wall - slices_done
    return {"rcs": rcs, "merge_rc": merge_rc, "meter": meter, "merge_s": round(merge_s, 2),
            "timing": fleet_measure.read_timing(*timings), "merge_timing": fleet_measure.read_timing(merge_timing)}

"""The role end to end on one cluster, per phase: seconds and the LIST requests each phase sends for the objects.

    . tools/env.sh && python benchmarks/role_phases.py --objects 5000
    . tools/env.sh && python benchmarks/role_phases.py --objects 5000,20000 --json out.json

One real kube-apiserver + etcd (tests/controlplane) with an audit log that records, at Metadata level, every
request for the benchmark's resource only. N small objects are written straight into etcd at v1alpha1
(benchmarks/seed_small.py); release N (v1alpha1+v1beta1, storage v1beta1) and release N+1 (v1beta1 only) are the
role's release and target manifests; playbooks/fleet_upgrade.yml runs with the json callback, with etcd
verification. Each audited request is given to the phase whose tasks ran at its time (task start/end times of
the json callback; the phase is the task name up to " | "). A LIST is either a page (`limit` > 1: it reads
objects) or a count (`limit=1`: remainingItemCount, or the barrier revision). Checked: rc 0, every etcd key at
v1beta1, storedVersions and served versions [v1beta1]. This is a script, not a test.

Fixed overhead = role total - re-store phase - the final readability LIST (the pages of the upgrade phase, timed
from the audit log: first page received to last page answered).
"""
from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.fleet10 import inventory, write_release  # noqa: E402
from benchmarks.seed_small import PLURAL, etcd_counts, seed_old  # noqa: E402
from tests.controlplane.binaries import find_binaries  # noqa: E402
from tests.controlplane.cluster import _launch, admin_kube  # noqa: E402
from tests.integration.modrun import ansible_env  # noqa: E402

GROUP = "fleet.bench.crdops.io"
NAMESPACES = ("team-a", "team-b", "team-c")


def audit_policy(path: Path) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "resources": [{"group": GROUP, "resources": [PLURAL]}]}, {"level": "None"}]}))
    return path


def ts(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def callback_output(stdout: str) -> dict:
    """The json callback's document; the re-store's progress lines (printed while it runs) come before it."""
    at = stdout.find("\n{")
    return json.loads(stdout if stdout.startswith("{") else stdout[at + 1:])


def task_windows(callback_json: dict) -> list[tuple[float, float, str]]:
    """(start, end, phase) of every task that ran on a host, in order."""
    out = []
    for play in callback_json.get("plays", []):
        for task in play.get("tasks", []):
            t = task["task"]
            name = t["name"].split(" : ", 1)[-1]  # without the "<collection>.<role> : " prefix
            phase = name.split(" | ")[0].strip()
            d = t.get("duration") or {}
            if d.get("start") and d.get("end"):
                out.append((ts(d["start"]), ts(d["end"]), phase))
    return out


def phase_of(when: float, windows: list[tuple[float, float, str]]) -> str:
    for start, end, phase in windows:
        if start <= when <= end:
            return phase
    return "(between tasks)"


def audited(log: Path) -> list[dict[str, Any]]:
    events = []
    for line in log.read_text().splitlines():
        e = json.loads(line)
        if e.get("stage") != "ResponseComplete":
            continue
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(e["requestURI"]).query))
        events.append({"verb": e["verb"], "limit": int(q.get("limit") or 0), "continue": "continue" in q,
                       "received": ts(e["requestReceivedTimestamp"]), "done": ts(e["stageTimestamp"]),
                       "dry_run": q.get("dryRun") == "All", "agent": e.get("userAgent", "")})
    return events


def per_phase(events: list[dict], windows: list[tuple[float, float, str]]) -> dict[str, dict[str, Any]]:
    phases: dict[str, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    for start, end, phase in windows:
        phases[phase]["seconds"] += end - start
    for e in events:
        p = phases[phase_of(e["received"], windows)]
        if e["verb"] == "list":
            p["list_pages" if e["limit"] != 1 else "list_limit_1"] += 1
        else:
            p[e["verb"] + ("_dry_run" if e["dry_run"] else "")] += 1
    return {k: {kk: round(vv, 2) if isinstance(vv, float) else vv for kk, vv in v.items()} for k, v in phases.items()}


def final_list_seconds(events: list[dict], windows: list[tuple[float, float, str]]) -> float:
    pages = [e for e in events if e["verb"] == "list" and e["limit"] != 1
             and phase_of(e["received"], windows) == "Upgrade"]
    return round(max(e["done"] for e in pages) - min(e["received"] for e in pages), 2) if pages else 0.0


def one_size(n: int, work: Path, binaries) -> dict[str, Any]:
    log = work / "audit.log"
    extra = ("--audit-policy-file=%s" % audit_policy(work / "audit-policy.json"), "--audit-log-path=%s" % log,
             "--audit-log-format=json", "--audit-log-mode=blocking")
    cluster = _launch(f"phases-{n}", work / "cluster", binaries, 1, False, extra)
    try:
        seed_old(admin_kube(cluster), cluster.etcd_url, GROUP, n, NAMESPACES)
        log.write_text("")  # the seeding's own requests are not the role's
        release = write_release(work)
        (work / "inventory.json").write_text(json.dumps(inventory([cluster], release, work / "report")))
        env = dict(ansible_env(), ANSIBLE_STDOUT_CALLBACK="json")
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(work / "inventory.json"),
               str(REPO / "playbooks" / "fleet_upgrade.yml")]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work, check=False)
        total = time.monotonic() - t0
        (work / "ansible.json").write_text(proc.stdout)
        _rev, counts = etcd_counts(cluster.etcd_url, GROUP)
        crd = admin_kube(cluster).get_crd(f"{PLURAL}.{GROUP}")
        ok = (proc.returncode == 0 and dict(counts) == {f"{GROUP}/v1beta1": n}
              and crd["status"]["storedVersions"] == ["v1beta1"]
              and [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"])
        return dict(analyse(work, total), objects=n, ok=ok, rc=proc.returncode)
    finally:
        cluster.stop()


def analyse(work: Path, total: float) -> dict[str, Any]:
    """Per-phase seconds and requests from a run's json callback output and audit log."""
    windows = task_windows(callback_output((work / "ansible.json").read_text()))
    events = audited(work / "audit.log")
    phases = per_phase(events, windows)
    restore = phases.get("Restore", {}).get("seconds", 0.0)
    final = final_list_seconds(events, windows)
    return {"playbook_s": round(total, 2), "restore_s": restore, "final_list_s": final,
            "fixed_overhead_s": round(total - restore - final, 2),
            "list_pages_total": sum(p.get("list_pages", 0) for p in phases.values()),
            "phases": phases, "work": str(work)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", default="5000", help="comma list of sizes, one cluster each")
    ap.add_argument("--json", help="also write the result here")
    args = ap.parse_args()
    binaries = find_binaries()
    runs = [one_size(int(n), Path(tempfile.mkdtemp(prefix=f"crdops-phases-{n}-")), binaries)
            for n in args.objects.split(",")]
    result = {"runs": runs, "command": "python " + shlex.join(sys.argv)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

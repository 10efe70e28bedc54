"""The crd_upgrade role end to end on one cluster, and where its time goes.

The data is seeded at v1alpha1 with v1alpha1 as the storage version; release N (v1beta1 storage, both
served) and release N+1 (v1beta1 only) are the role's manifests, so one run does every phase: preflight,
discover, storage flip, barrier, re-store, verify (every etcd key), trim, upgrade. ansible-playbook's json
callback gives each task's start and end, so the re-store task's own duration is measured in the same run
as the whole; the rest is summed per phase (the task name's prefix before ` | `).
"""
from __future__ import annotations

import datetime
import re

import yaml

from tests.integration.seed import crd_at

from . import data

RESTORE_TASK = "Restore | re-store every object"
# the final LIST after the upgrade that proves every object is still readable: it grows with N, so it is not
# counted as fixed overhead
READABILITY_TASK = re.compile(r"^Upgrade \| (every object reads back|objects read back|.*readab)")


def write_releases(bench, group: str) -> tuple[str, str]:
    s = data.seeded(group)
    n, n1 = bench.workdir / f"release-n-{group}.yaml", bench.workdir / f"release-n1-{group}.yaml"
    n.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1alpha1", "v1beta1"))))
    n1.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1beta1",))))
    return str(n), str(n1)


def hostvars(bench, group: str, releases: tuple[str, str], options: dict) -> dict:
    return dict({"crd_upgrade_kubeconfig": str(bench.migrator_kubeconfig),
                 "crd_upgrade_context": bench.migrator.name,
                 "crd_upgrade_etcd_url": bench.cluster.etcd_url,
                 "crd_upgrade_release_manifests": [releases[0]], "crd_upgrade_target_manifests": [releases[1]],
                 "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_progress_interval": 5,
                 "crd_upgrade_report_dir": str(bench.workdir / f"report-{group}")}, **options)


def _stamp(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def task_durations(output: dict) -> list[tuple[str, float]]:
    """(task name without the role prefix, seconds) for every task the json callback reported."""
    rows = []
    for play in output.get("plays", []):
        for task in play.get("tasks", []):
            t = task.get("task", {})
            dur = t.get("duration") or {}
            if dur.get("start") and dur.get("end"):
                rows.append((t.get("name", "").split(" : ", 1)[-1], _stamp(dur["end"]) - _stamp(dur["start"])))
    return rows


def breakdown(output: dict, wall: float) -> dict:
    """Seconds of the re-store task, of the final readability LIST, per phase, and Ansible's own share."""
    tasks = task_durations(output)
    restore = sum(s for name, s in tasks if name.startswith(RESTORE_TASK))
    readable = sum(s for name, s in tasks if READABILITY_TASK.match(name))
    phases: dict = {}
    for name, s in tasks:
        phase = name.split(" | ", 1)[0] if " | " in name else "(other tasks)"
        phases[phase] = phases.get(phase, 0.0) + s
    in_tasks = sum(s for _name, s in tasks)
    phases["(ansible start-up, includes, between tasks)"] = wall - in_tasks
    return {"restore_s": restore, "readability_s": readable, "fixed_s": wall - restore - readable,
            "phases": phases, "tasks": len(tasks)}


def run_role(bench, group: str, n: int, options: dict | None = None, releases=None, ready=lambda: None) -> dict:
    """One ansible-playbook run of the role over `group`; checks the result in etcd and the CRD."""
    releases = releases or write_releases(bench, group)
    play = [{"name": "bench role", "hosts": "all", "gather_facts": False,
             "tasks": [{"name": "crd_upgrade", "ansible.builtin.include_role": {"name": "crdops.migration.crd_upgrade"}}]}]
    ready()
    out = bench.playbook(play, bench.local_host(**hostvars(bench, group, releases, options or {})))
    out.update(breakdown(out.pop("output"), out["seconds"]))
    crd = bench.kube.get_crd(data.crd_name(group))
    if not out["note"] and crd["status"].get("storedVersions") != ["v1beta1"]:
        out["note"] = f"storedVersions {crd['status'].get('storedVersions')} after the role"
    out["releases"] = releases
    return out

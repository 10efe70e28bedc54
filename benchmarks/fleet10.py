"""Fleet benchmark: N local clusters (default 10) in one playbooks/fleet_upgrade.yml run, report checked exactly.

    . tools/env.sh && python benchmarks/fleet10.py                      # 10 clusters x 300 objects, waves 1,50%,100%
    . tools/env.sh && python benchmarks/fleet10.py --clusters 3 --objects 50   # a dry run of the script

Each cluster is a real kube-apiserver + etcd (tests/controlplane), started one after another (2 cores). Each gets
one namespaced CRD served and stored at v1alpha1 only with --objects small objects written straight into etcd
(benchmarks/seed_small.py). Release N (served v1alpha1+v1beta1, storage v1beta1) and release N+1 (v1beta1 only)
are the role's release / target manifests: one ansible-playbook run flips, re-stores, verifies, trims and
upgrades every cluster, in waves `--waves` (forks = the largest wave).

Checked, exactly (a failed check is printed and the exit code is 1):
* ansible-playbook rc 0; the fleet report (JSON) lists every cluster once, each `ok`, its CRD's objects and
  rewritten equal to what was seeded, etcd counts {group/v1beta1: N}, trimmed, upgraded, and the summary totals;
* etcd itself, read here after the run: every key of every cluster at v1beta1, key count = seeded;
  storedVersions [v1beta1] and served versions [v1beta1] through the API;
* the waves: the hosts of each wave are the inventory's hosts in order, sized as serial computes them
  ([1, '50%', '100%'] over 10 -> 1, 5, 4), and no cluster of a wave started before every cluster of the
  previous wave had finished (started/finished of the report).
Prints one JSON document with times and peak RSS (ansible-playbook, its largest worker, the process tree, the
apiservers and etcds). This is a script, not a test.
"""
from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.crdops_bench.cli import print_result  # noqa: E402
from benchmarks.rss_sampler import TreeRss, rss_mb  # noqa: E402
from benchmarks.seed_small import PLURAL, etcd_counts, seed_old  # noqa: E402
from tests.controlplane.binaries import find_binaries  # noqa: E402
from tests.controlplane.cluster import _launch, admin_kube  # noqa: E402
from tests.integration.modrun import ansible_env  # noqa: E402
from tests.integration.seed import Seeded, crd_at  # noqa: E402

GROUP = "fleet.bench.crdops.io"
NAMESPACES = ("team-a", "team-b", "team-c")


def wave_sizes(waves: list, hosts: int) -> list[int]:
    """What ansible's serial does with a list of batch sizes: percentages of all hosts (floored, at least 1),
    the last size repeated until every host is in a batch, the last batch possibly smaller."""
    sizes, left, i = [], hosts, 0
    while left > 0:
        w = waves[min(i, len(waves) - 1)]
        size = max(1, int(math.floor(hosts * float(w[:-1]) / 100))) if isinstance(w, str) and w.endswith("%") else int(w)
        sizes.append(min(size, left))
        left -= sizes[-1]
        i += 1
    return sizes


def write_release(work: Path) -> tuple[Path, Path]:
    s = Seeded(GROUP, PLURAL, "Widget", "Namespaced")
    n, n1 = work / "release-n.yaml", work / "release-n1.yaml"
    n.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1alpha1", "v1beta1"))))
    n1.write_text(yaml.safe_dump(crd_at(s, "v1beta1", ("v1beta1",))))
    return n, n1


def inventory(clusters, release: tuple[Path, Path], report_dir: Path) -> dict:
    hosts = {c.name: {"crd_upgrade_kubeconfig": str(c.kubeconfig), "crd_upgrade_context": c.contexts()[0],
                      "crd_upgrade_etcd_url": c.etcd_url} for c in clusters}
    return {"all": {"children": {"clusters": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "crd_upgrade_release_manifests": [str(release[0])], "crd_upgrade_target_manifests": [str(release[1])],
        "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_progress_interval": 1}}},
        "vars": {"crd_upgrade_report_dir": str(report_dir)}}}


def check_report(report: dict, names: list[str], n: int, waves: list) -> dict[str, bool]:
    rows = {c["cluster"]: c for c in report["clusters"]}
    crd_name = f"{PLURAL}.{GROUP}"
    checks = {"report lists every cluster once": sorted(c["cluster"] for c in report["clusters"]) == sorted(names)}
    for name in names:
        row = rows.get(name, {})
        crds = [c for c in row.get("crds", []) if c["name"] == crd_name]
        crd = crds[0] if len(crds) == 1 else {}
        checks[f"{name}: ok, {n} objects rewritten, etcd {GROUP}/v1beta1={n}, trimmed, upgraded"] = (
            row.get("status") == "ok" and crd.get("objects") == n and crd.get("rewritten") == n
            and crd.get("failed") == 0 and (crd.get("etcd") or {}).get("counts") == {f"{GROUP}/v1beta1": n}
            and (crd.get("etcd") or {}).get("key_count") == n and crd.get("trimmed") is True
            and crd.get("upgraded") is True and row.get("totals", {}).get("objects") == n)
    s = report["summary"]
    total = n * len(names)
    checks[f"summary: {len(names)} clusters ok, {total} objects rewritten, 0 failed"] = (
        s["clusters"] == len(names) and s["ok"] == len(names) and s["failed"] == 0 and s["not_run"] == 0
        and s["objects"] == total and s["rewritten"] == total and s["failed_objects"] == 0)
    # waves: inventory order cut into serial's batch sizes; each wave starts after the previous one finished
    sizes, at, batches = wave_sizes(waves, len(names)), 0, []
    for size in sizes:
        batches.append(names[at:at + size])
        at += size
    for k in range(1, len(batches)):
        prev_end = max(rows[h]["finished"] for h in batches[k - 1] if h in rows) if all(h in rows for h in batches[k - 1]) else math.inf
        start = min(rows[h]["started"] for h in batches[k]) if all(h in rows for h in batches[k]) else -math.inf
        checks[f"wave {k + 1} {batches[k]} started after wave {k} {batches[k - 1]} finished"] = start >= prev_end
    return checks


def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="crdops-fleet10-"))
    binaries = find_binaries()
    names = [f"fleet-{i:02d}" for i in range(args.clusters)]
    clusters, t0 = [], time.monotonic()
    try:
        for name in names:  # one after another: 2 cores
            clusters.append(_launch(name, work / name, binaries, 1, False, ()))
            print(f"# {name} up ({time.monotonic() - t0:.0f}s)", file=sys.stderr, flush=True)
        t_up = time.monotonic()
        for c in clusters:
            seed_old(admin_kube(c), c.etcd_url, GROUP, args.objects, NAMESPACES)
        t_seed = time.monotonic()
        print(f"# seeded {args.clusters} x {args.objects} ({t_seed - t_up:.0f}s)", file=sys.stderr, flush=True)
        release = write_release(work)
        (work / "inventory.json").write_text(json.dumps(inventory(clusters, release, work / "report")))
        forks = max(wave_sizes(args.waves, len(names)))
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(work / "inventory.json"),
               str(REPO / "playbooks" / "fleet_upgrade.yml"), "--forks", str(forks),
               "-e", json.dumps({"crd_upgrade_waves": args.waves})]
        with open(work / "ansible.log", "w") as log:
            t1 = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ansible_env(), cwd=work)
            sampler = TreeRss(proc.pid).start()
            server_peak = {"apiserver": 0.0, "etcd": 0.0}
            while proc.poll() is None:
                for c in clusters:
                    server_peak["apiserver"] = max(server_peak["apiserver"], rss_mb(c.apiserver.process.pid))
                    server_peak["etcd"] = max(server_peak["etcd"], rss_mb(c.etcd.process.pid))
                time.sleep(1)
            sampler.stop()
            playbook_s = time.monotonic() - t1
        report = json.loads((work / "report" / "latest" / "fleet-report.json").read_text())
        checks = {"ansible-playbook rc 0": proc.returncode == 0}
        checks.update(check_report(report, names, args.objects, args.waves))
        etcd = {}
        for c in clusters:
            _rev, counts = etcd_counts(c.etcd_url, GROUP)
            crd = admin_kube(c).get_crd(f"{PLURAL}.{GROUP}")
            etcd[c.name] = dict(counts)
            checks[f"{c.name}: etcd every key at v1beta1 ({args.objects}), storedVersions and served [v1beta1]"] = (
                dict(counts) == {f"{GROUP}/v1beta1": args.objects} and crd["status"]["storedVersions"] == ["v1beta1"]
                and [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"])
        per_cluster_s = {r["cluster"]: round(r["finished"] - r["started"], 1) for r in report["clusters"]}
        return dict(ok=all(checks.values()), failed_checks=[k for k, v in checks.items() if not v], checks=len(checks),
                    clusters=args.clusters, objects_per_cluster=args.objects, waves=args.waves, forks=forks,
                    start_clusters_s=round(t_up - t0, 1), seed_s=round(t_seed - t_up, 1), playbook_s=round(playbook_s, 1),
                    per_cluster_role_s=per_cluster_s, summary=report["summary"], rss=sampler.to_dict(),
                    apiserver_peak_mb=server_peak["apiserver"], etcd_peak_mb=server_peak["etcd"],
                    etcd=etcd, log=str(work / "ansible.log"), report=str(work / "report" / "latest" / "fleet-report.json"),
                    command="python " + shlex.join(sys.argv))
    finally:
        for c in clusters:
            c.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--objects", type=int, default=300, help="objects per cluster")
    ap.add_argument("--waves", type=json.loads, default=[1, "50%", "100%"], help="JSON list, e.g. '[1, \"50%%\", \"100%%\"]'")
    args = ap.parse_args()
    return print_result(run(args))


if __name__ == "__main__":
    sys.exit(main())

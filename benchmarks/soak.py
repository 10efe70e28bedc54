"""Soak: one real re-store through the crd_upgrade role that lasts --minutes (default 45), rate-capped.

A fresh kube-apiserver + etcd (built from Go modules, see tests/controlplane), --objects objects of one CRD
seeded straight into etcd at v1alpha1 (seconds, as benchmarks/run.py does), the storage flipped to v1beta1, then
`playbooks/fleet_upgrade.yml` on that one cluster with crd_upgrade_max_qps = objects / (minutes * 60), so the pass
alone lasts the requested time at almost no CPU. Checked at the end:

* ansible-playbook ended with rc 0 (no RecursionError, whatever the length);
* the progress lines of the re-store (one per crd_upgrade_progress_interval=1 s) count up, without going back, to
  `<objects>/<objects> objects (100.0%)`;
* etcd: every key of the CRD is stored at v1beta1 (exact count), and status.storedVersions is [v1beta1].

    . tools/env.sh && python benchmarks/soak.py                          # 45 minutes, 27000 objects
    . tools/env.sh && python benchmarks/soak.py --minutes 2 --objects 6000   # a dry run of the script

It prints one JSON line with the figures and exits 1 when a check fails. This is a script, not a test.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.crdops_bench.data import PLURAL, seed as seed_via_etcd  # noqa: E402
from tests.controlplane.binaries import find_binaries  # noqa: E402
from tests.controlplane.cluster import admin_kube, start_cluster  # noqa: E402
from tests.controlplane.etcd_reader import scan_storage  # noqa: E402
from tests.integration.modrun import ansible_env  # noqa: E402

PROGRESS = re.compile(r"\| CRD \d+/\d+ (\S+): (\d+)/(\d+) objects \(([\d.]+)%\)")


def inventory(cluster, crd_name: str, qps: float, minutes: float) -> dict:
    return {"all": {"children": {"clusters": {"hosts": {"soak-cluster": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
        "crd_upgrade_crd_names": [crd_name], "crd_upgrade_etcd_url": cluster.etcd_url,
        "crd_upgrade_max_qps": qps, "crd_upgrade_progress_interval": 1, "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1,
        "crd_upgrade_timeout": int(minutes * 60 * 2 + 600)}}}}}}


def follow_log(proc: subprocess.Popen, log: Path) -> list[tuple[float, int, int, float]]:
    """Copy ansible-playbook's output to the log and collect the progress lines: (t, done, total, percent)."""
    start = time.monotonic()
    seen = []
    with log.open("w") as out:
        for line in proc.stdout:
            out.write(line)
            out.flush()
            m = PROGRESS.search(line)
            if m and "[plan only]" not in line:  # the preflight's check-mode run prints its listing too
                seen.append((round(time.monotonic() - start, 1), int(m.group(2)), int(m.group(3)), float(m.group(4))))
    proc.wait()
    return seen


def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="crdops-soak-"))
    cluster = start_cluster("soak", work / "soak", find_binaries())
    try:
        kube = admin_kube(cluster)
        group = "soak.crdops.test"
        t0 = time.monotonic()
        seed_via_etcd(kube, cluster.etcd_url, group, args.objects)
        seeding = time.monotonic() - t0
        crd_name = f"{PLURAL}.{group}"
        qps = round(args.objects / (args.minutes * 60), 3)
        (work / "inventory.json").write_text(json.dumps(inventory(cluster, crd_name, qps, args.minutes)))
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(work / "inventory.json"),
               str(REPO / "playbooks" / "fleet_upgrade.yml"),
               "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(work / "report")})]
        t1 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ansible_env())
        lines = follow_log(proc, work / "ansible.log")
        playbook_s = time.monotonic() - t1
        scan = scan_storage(cluster.etcd_url, group, PLURAL)
        stored = kube.get_crd(crd_name)["status"]["storedVersions"]
        percents = [p for _t, _d, _n, p in lines]
        checks = {
            "rc 0": proc.returncode == 0,
            "progress counts up to 100%": bool(lines) and percents == sorted(percents) and percents[-1] == 100.0
            and lines[-1][1] == args.objects,
            "every key at v1beta1": dict(scan.counts) == {f"{group}/v1beta1": args.objects},
            "storedVersions [v1beta1]": stored == ["v1beta1"],
            "pass lasted the requested time": bool(lines) and lines[-1][0] >= args.minutes * 60 * 0.95,
        }
        return dict(ok=all(checks.values()), checks=checks, objects=args.objects, max_qps=qps,
                    seeding_s=round(seeding, 1), playbook_s=round(playbook_s, 1), progress_lines=len(lines),
                    first_progress=lines[0] if lines else None, last_progress=lines[-1] if lines else None,
                    etcd=dict(scan.counts), stored_versions=stored, log=str(work / "ansible.log"),
                    command=" ".join(sys.argv))
    finally:
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=45.0, help="how long the re-store pass should last")
    ap.add_argument("--objects", type=int, default=27000, help="objects seeded (max_qps = objects / seconds)")
    args = ap.parse_args()
    result = run(args)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""What a rerun costs next to the first run, at one size: ansible-playbook with crd_storage_migrate, then again.

    . tools/env.sh && python benchmarks/rerun_cost.py --objects 10000 --reps 5

One real kube-apiserver + etcd (tests/controlplane); N small objects written straight into etcd at v1alpha1
(benchmarks/seed_small.py), then the storage version flipped to v1beta1. ``first``: one ansible-playbook run of
crd_storage_migrate (module defaults, workers 16 as benchmarks/run.py's ``ansible`` contender). ``rerun``: the
same playbook again, ``--reps`` times: the record makes the module skip the CRD, and its managedFields-only pass
lists every object (kubernetes#111937). Then the managedFields-only pass alone, in this process, with pages of
500 and of 2000 objects, interleaved, ``--reps`` times each (does a larger page make that LIST cheaper?).
Checked: every etcd key at v1beta1, the rerun wrote nothing. Prints one JSON document. A script, not a test.
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.seed_small import etcd_counts, seed_old  # noqa: E402
from tests.controlplane.binaries import find_binaries  # noqa: E402
from tests.controlplane.cluster import _launch, admin_kube  # noqa: E402
from tests.integration.engine import transport_for  # noqa: E402
from tests.integration.modrun import ansible_playbook  # noqa: E402
from tests.integration.seed import flip_storage  # noqa: E402

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import restore  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd  # noqa: E402

GROUP = "rerun.bench.crdops.io"


def playbook(work: Path, cluster: Any, crd_name: str) -> Path:
    play = [{"name": "rerun cost", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "migrate", "crdops.migration.crd_storage_migrate": {
            "kubeconfig": str(cluster.kubeconfig), "context": cluster.contexts()[0], "names": [crd_name],
            "workers": 16, "drain_window": 1}, "register": "out"},
        {"name": "counts", "ansible.builtin.debug": {"msg": "{{ out.crds | map(attribute='rewritten') | list }}"}}]}]
    path = work / "play.json"
    path.write_text(json.dumps(play))
    return path


def timed_run(play: Path) -> float:
    t0 = time.perf_counter()
    proc = ansible_playbook("-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                            str(play), timeout=1800)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("ansible-playbook failed: %s" % proc.stdout[-2000:])
    return elapsed


def mf_only_once(transport: Any, crd: Any, page_size: int, n: int) -> float:
    t0 = time.perf_counter()
    r = restore.fix_managed_fields(transport, crd, restore.RestoreOptions(page_size=page_size))
    elapsed = time.perf_counter() - t0
    if not (r.complete and r.listed == n and r.rewritten == 0):
        raise SystemExit("managedFields-only pass: %r" % r.to_dict())
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="crdops-rerun-"))
    cluster = _launch("rerun", work / "cluster", find_binaries(), 1, False, ())
    try:
        kube = admin_kube(cluster)
        s = seed_old(kube, cluster.etcd_url, GROUP, args.objects, ("a", "b"))
        flip_storage(kube, s, "v1beta1")
        play = playbook(work, cluster, s.crd_name)
        first = timed_run(play)
        reruns = [timed_run(play) for _rep in range(args.reps)]
        transport = transport_for(cluster, pool_size=4)
        crd = get_crd(transport, s.crd_name)
        by_page: dict[int, list[float]] = {500: [], 2000: []}
        for _rep in range(args.reps):
            for page_size, times in by_page.items():
                times.append(mf_only_once(transport, crd, page_size, args.objects))
        _rev, counts = etcd_counts(cluster.etcd_url, GROUP)
        rerun = statistics.median(reruns)
        out = {"objects": args.objects, "first_s": round(first, 2), "rerun_s": [round(x, 2) for x in reruns],
               "rerun_median_s": round(rerun, 2), "rerun_over_first": round(rerun / first, 3),
               "mf_only_pass_s": {str(k): [round(x, 3) for x in v] for k, v in by_page.items()},
               "mf_only_median_s": {str(k): round(statistics.median(v), 3) for k, v in by_page.items()},
               "etcd": dict(counts), "ok": dict(counts) == {f"{GROUP}/v1beta1": args.objects},
               "command": "python " + shlex.join(sys.argv)}
        print(json.dumps(out, indent=1))
        return 0 if out["ok"] else 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())

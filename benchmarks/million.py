"""Scale benchmark: crd_storage_migrate through ansible-playbook over N small objects of one cluster-scoped CRD.

    . tools/env.sh && python benchmarks/million.py --sizes 10000,1000000        # the 1M proof (~8 min seed + ~30 min pass)
    . tools/env.sh && python benchmarks/million.py --sizes 10000,100000         # what fits in a few minutes

One real kube-apiserver + etcd (tests/controlplane). Per size N, a fresh CRD group: the CRD served and stored at
v1alpha1, N small objects (~0.5 KB stored) written straight into etcd at v1alpha1 (benchmarks/seed_small.py), the
storage version flipped to v1beta1 through the API; then one ansible-playbook run of a play with a single
crdops.migration.crd_storage_migrate task on that CRD. While it runs, /proc is sampled (benchmarks/rss_sampler.py)
for the peak RSS of ansible-playbook and of its largest descendant: with run_on_controller=auto (the default, how
clusters are inventoried: connection local) that is the worker that runs the pass; with --run-on-controller never it
is the AnsiballZ module process. Then every key of the CRD is read from etcd (paged, one snapshot).

Checked, exactly (exit code 1 when one fails): ansible-playbook rc 0; the task's result listed = rewritten = N,
failed 0; etcd {group/v1beta1: N} and nothing else; and, for every size after the first (the baseline, 10k), the
peak RSS of ansible-playbook and of the pass process each within --rss-budget-mb (30) of the baseline's.
Each size's data is deleted from etcd afterwards. Prints one JSON document. This is a script, not a test.
"""
from __future__ import annotations

import argparse
import base64
import json
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.rss_sampler import TreeRss, rss_mb  # noqa: E402
from benchmarks.seed_small import PLURAL, etcd_counts, seed_old  # noqa: E402
from tests.controlplane.binaries import find_binaries  # noqa: E402
from tests.controlplane.cluster import admin_kube, start_cluster  # noqa: E402
from tests.controlplane.etcd_reader import _prefix_end, resource_prefix  # noqa: E402
from tests.integration.modrun import ansible_env  # noqa: E402
from tests.integration.seed import flip_storage  # noqa: E402


def playbook(work: Path, cluster, crd_name: str, args) -> Path:
    task = {"kubeconfig": str(cluster.kubeconfig), "context": cluster.contexts()[0], "names": [crd_name],
            "progress_interval": args.progress_interval, "run_on_controller": args.run_on_controller,
            "drain_window": 1}  # flipped just before by this script, no request held across it
    play = [{"name": "million", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": "{{ ansible_playbook_python }}"},
             "tasks": [{"name": "migrate", "crdops.migration.crd_storage_migrate": task, "register": "migrated"},
                       {"name": "result", "ansible.builtin.debug": {
                           "msg": "RESULT {{ {'crds': migrated.crds | map('dict2items') | map('selectattr', 'key', 'in',"
                                  " ['name', 'listed', 'rewritten', 'unchanged', 'failed', 'gone', 'skipped'])"
                                  " | map('items2dict') | list} | to_json }}"}}]}]
    path = work / f"play-{crd_name}.yml"
    path.write_text(json.dumps(play))
    return path


def one_size(cluster, kube, n: int, work: Path, args) -> dict:
    group = f"m{n}.bench.crdops.io"
    crd_name = f"{PLURAL}.{group}"
    t0 = time.monotonic()
    s = seed_old(kube, cluster.etcd_url, group, n, namespaces=(), payload=args.payload, wait_s=3600)
    flip_storage(kube, s, "v1beta1")
    seed_s = time.monotonic() - t0
    print(f"# {n}: seeded in {seed_s:.0f}s", file=sys.stderr, flush=True)
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook(work, cluster, crd_name, args))]
    log_path = work / f"ansible-{n}.log"
    with open(log_path, "w") as log:
        t1 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ansible_env(), cwd=work)
        sampler = TreeRss(proc.pid).start()
        apiserver_peak = 0.0
        while proc.poll() is None:
            apiserver_peak = max(apiserver_peak, rss_mb(cluster.apiserver.process.pid))
            time.sleep(1)
        sampler.stop()
        pass_s = time.monotonic() - t1
    text = log_path.read_text(errors="replace")
    # the debug task's line: "msg": "RESULT {...}" (a JSON string holding the JSON result)
    msgs = [json.loads("{" + line.strip().rstrip(",") + "}")["msg"] for line in text.splitlines()
            if line.strip().startswith('"msg": "RESULT ')]
    result = json.loads(msgs[-1].split("RESULT ", 1)[1]) if msgs else None
    t2 = time.monotonic()
    _rev, counts = etcd_counts(cluster.etcd_url, group)
    check_s = time.monotonic() - t2
    crd = (result or {}).get("crds", [{}])[0] if result else {}
    checks = {"ansible-playbook rc 0": proc.returncode == 0,
              f"listed = rewritten = {n}, failed 0": crd.get("listed") == n and crd.get("rewritten") == n
              and crd.get("failed") == 0,
              f"etcd: every key at v1beta1 ({n})": dict(counts) == {f"{group}/v1beta1": n}}
    drop(cluster.etcd_url, kube, group)
    return dict(n=n, checks=checks, seed_s=round(seed_s, 1), playbook_s=round(pass_s, 1),
                objects_per_s=round(n / pass_s, 1), etcd_check_s=round(check_s, 1), result=crd, etcd=dict(counts),
                rss=sampler.to_dict(), apiserver_peak_mb=apiserver_peak, log=str(log_path))


def drop(etcd_url: str, kube, group: str) -> None:
    """Delete the objects straight from etcd (fast), then the CRD, so the next size starts from a small etcd."""
    prefix = resource_prefix(group, PLURAL)
    body = json.dumps({"key": base64.b64encode(prefix).decode(),
                       "range_end": base64.b64encode(_prefix_end(prefix)).decode()}).encode()
    req = urllib.request.Request(etcd_url + "/v3/kv/deleterange", data=body,
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req, timeout=600).read()
    try:
        kube.delete(kube.crd_path(f"{PLURAL}.{group}"))
    except Exception:  # best effort: the data is gone already
        pass


def compare(runs: list[dict], budget_mb: float) -> dict[str, bool]:
    base, checks = runs[0], {}
    for r in runs[1:]:
        for key, label in (("ansible_playbook_peak_mb", "ansible-playbook"), ("largest_child_peak_mb", "pass process")):
            delta = r["rss"][key] - base["rss"][key]
            r.setdefault("rss_delta_mb", {})[label] = round(delta, 1)
            checks[f"{r['n']}: {label} peak RSS within {budget_mb:g} MB of {base['n']} ({delta:+.1f} MB)"] = delta <= budget_mb
    return checks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000", help="comma list; the first is the RSS baseline")
    ap.add_argument("--payload", type=int, default=64, help="spec.filler bytes per object")
    ap.add_argument("--progress-interval", type=float, default=30)
    ap.add_argument("--run-on-controller", default="auto", choices=["auto", "never"])
    ap.add_argument("--rss-budget-mb", type=float, default=30)
    ap.add_argument("--apiserver-arg", action="append", default=[],
                    help="extra kube-apiserver flag (repeatable), e.g. --apiserver-arg=--watch-cache=false")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="crdops-million-"))
    t0 = time.monotonic()
    cluster = start_cluster("million", work / "million", find_binaries(), extra_args=tuple(args.apiserver_arg))
    try:
        kube = admin_kube(cluster)
        runs = [one_size(cluster, kube, n, work, args) for n in sizes]
    finally:
        cluster.stop()
    checks = {f"{r['n']}: {k}": v for r in runs for k, v in r["checks"].items()}
    checks.update(compare(runs, args.rss_budget_mb))
    out = dict(ok=all(checks.values()), failed_checks=[k for k, v in checks.items() if not v], checks=checks,
               runs=runs, total_s=round(time.monotonic() - t0, 1), command="python " + shlex.join(sys.argv))
    print(json.dumps(out, indent=1))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

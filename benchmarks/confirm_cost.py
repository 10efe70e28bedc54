"""What the proof without etcd costs, and what the drain costs the role, on a real control plane.

    . tools/env.sh && python benchmarks/confirm_cost.py --objects 10000,100000 --role-objects 10000

One real kube-apiserver + etcd (tests/controlplane); N small objects written straight into etcd at v1alpha1
(benchmarks/seed_small.py), the storage flipped to v1beta1. For each size, in this process (the engine, pace max,
16 workers): the first pass (re-stores every object), then one confirming pass over pooled connections (what a
cluster with one apiserver gets) and one over a new connection per request (what a load balancer gets), each
divided by the first pass's time. Then the role (playbooks/fleet_upgrade.yml, defaults, no etcd URL) end to end on
``--role-objects`` objects three times: release N applied by the role itself (a fresh flip: the drain window of
65 s is waited); release N applied more than a drain window before the run by the role's own field manager (as an
earlier run would: the role's apply changes nothing, nothing waits); and the same by another client (a PUT): the
role's apply would add its field manager's entry owning ``spec``, the flip time the drain can see, so the role
sends it with dryRun=All first and leaves release N alone (nothing waits; before 1.2.0 the window was waited once).
Checked each time: every etcd key at v1beta1. Prints one JSON document. A script, not a test.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.seed_small import etcd_counts, seed_old  # noqa: E402
from tests.controlplane.binaries import find_binaries  # noqa: E402
from tests.controlplane.cluster import _launch, admin_kube  # noqa: E402
from tests.integration.engine import transport_for  # noqa: E402
from tests.integration.modrun import ansible_playbook  # noqa: E402
from tests.integration.seed import crd_at, flip_storage  # noqa: E402

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import restore  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.record_proof import ConfirmingPasses  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd  # noqa: E402

OPTIONS = restore.RestoreOptions(page_size=500, workers=16, pace="max", use_checkpoint=False, write_record=False)


def passes(cluster: Any, kube: Any, n: int, index: int) -> Dict[str, Any]:
    group = f"c{index}.confirm.bench.crdops.io"
    s = seed_old(kube, cluster.etcd_url, group, n, ("a", "b"))
    flip_storage(kube, s, "v1beta1")
    transport = transport_for(cluster, pool_size=20)
    crd = get_crd(transport, s.crd_name)
    first = restore.migrate_crd(transport, crd, OPTIONS)
    assert first.complete and first.rewritten == n, first.to_dict()
    out: Dict[str, Any] = {"objects": n, "first_pass_s": round(first.duration_s, 2)}
    for label, fresh in (("pooled", False), ("fresh_connections", True)):
        proof = ConfirmingPasses(transport, crd, OPTIONS, passes=1, fresh_connections=fresh)(first)
        assert proof.ok, proof.to_dict()
        details = proof.details or {}
        out[label] = {"confirming_pass_s": details["duration_s"], "ratio": details["cost_ratio"]}
    _rev, counts = etcd_counts(cluster.etcd_url, group)
    out["etcd"] = dict(counts)
    out["ok"] = dict(counts) == {f"{group}/v1beta1": n}
    return out


def role_run(cluster: Any, kube: Any, n: int, index: int, flip_before: str, work: Path) -> Dict[str, Any]:
    group = f"r{index}.confirm.bench.crdops.io"
    s = seed_old(kube, cluster.etcd_url, group, n, ("a", "b"))
    folder = work / f"role-{index}"
    for name, doc in (("release-n", crd_at(s, "v1beta1")), ("release-next", crd_at(s, "v1beta1", ("v1beta1",)))):
        (folder / name).mkdir(parents=True)
        (folder / name / "crd.yaml").write_text(yaml.safe_dump(doc))
    if flip_before == "role-manager":  # as the role applies it: server-side apply, its field manager, forced
        kube.request("PATCH", kube.crd_path(s.crd_name), json.dumps(crd_at(s, "v1beta1")).encode(),
                     content_type="application/apply-patch+yaml",
                     query={"fieldManager": "crdops-migration", "force": "true"})
        kube.wait_established(s.crd_name)
    elif flip_before == "other-client":
        flip_storage(kube, s, "v1beta1")
    if flip_before:
        time.sleep(67)  # longer than the drain window (65 s)
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(folder / "release-n" / "crd.yaml")],
            "crd_upgrade_target_manifests": [str(folder / "release-next" / "crd.yaml")],
            "crd_upgrade_crd_names": [s.crd_name], "crd_upgrade_progress_interval": 30}
    (folder / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {"bench": host}}}}}))
    extra = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(folder / "report")})
    t0 = time.perf_counter()
    proc = ansible_playbook("-i", str(folder / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra, timeout=3600)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit("role failed: %s" % proc.stdout[-3000:])
    _rev, counts = etcd_counts(cluster.etcd_url, group)
    drained = re.findall(r"drained ([0-9.]+)s", proc.stdout)
    return {"objects": n, "flip": ROLE_CASES[flip_before], "role_s": round(elapsed, 1),
            "drained_s": float(drained[0]) if drained else 0.0, "ok": dict(counts) == {f"{group}/v1beta1": n}}


ROLE_CASES = {"": "release N applied by the role (a fresh flip)",
              "role-manager": "release N applied > window before, by the role's field manager",
              "other-client": "release N applied > window before, by another client"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", default="10000,100000", help="sizes for the pass ratios, comma-separated")
    ap.add_argument("--role-objects", type=int, default=10000, help="role end to end at this size; 0: skip")
    ap.add_argument("--role-cases", default=",".join(c or "fresh" for c in ROLE_CASES),
                    help="which role runs, comma-separated: fresh, role-manager, other-client")
    args = ap.parse_args()
    cases = [c for c in ROLE_CASES if (c or "fresh") in args.role_cases.split(",")]
    work = Path(tempfile.mkdtemp(prefix="crdops-confirm-"))
    cluster = _launch("confirm", work / "cluster", find_binaries(), 1, False, ())
    out: Dict[str, Any] = {"command": "python " + shlex.join(sys.argv), "passes": [], "role": []}
    try:
        kube = admin_kube(cluster)
        for i, n in enumerate(int(x) for x in args.objects.split(",") if x):
            out["passes"].append(passes(cluster, kube, n, i))
            print(json.dumps(out["passes"][-1]), file=sys.stderr)
        if args.role_objects:
            for i, before in enumerate(cases):
                out["role"].append(role_run(cluster, kube, args.role_objects, i, before, work))
                print(json.dumps(out["role"][-1]), file=sys.stderr)
        print(json.dumps(out, indent=1))
        return 0 if all(x["ok"] for x in out["passes"] + out["role"]) else 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())

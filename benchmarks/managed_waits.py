"""What a managed cluster waits at the role's defaults: barrier, drain, passes and the client check, per CRD.

    . tools/env.sh && python benchmarks/managed_waits.py                      # the four cases, about 13 minutes
    . tools/env.sh && python benchmarks/managed_waits.py --only 1-settle-fallback --out waits.txt

The figures of docs/managed-clusters.md, "A whole cluster". Two real kube-apiservers on one etcd (tests/controlplane),
the second reaching etcd through a DelayProxy that lets bytes through unchanged, HAProxy (TCP, round-robin, TLS
passthrough) in front of both; the modules get a kubeconfig naming only the HAProxy frontend and no etcd URL, as on a
managed cluster. Per case: ``crds`` CRDs of 24 objects at v1 (v2 served), flipped together to storage v2 as release
N's one apply does it, then re-stored as the role does it (one crd_storage_migrate over all of them) with the role's
defaults (roles/crd_upgrade/defaults/main.yml), either with no apiserver named (the settle fallback, as the example
inventory's managed host) or with both named; then the client check before release N+1 with the role's writers
window. Cases: 1 and 10 CRDs, each with the settle fallback and with every apiserver named, in that order.
Prints, per case, the re-store's and the client check's seconds and each CRD's barrier, drain, pass and confirming
passes; --out appends the same lines to a file. Exit 1 when a case's module fails. A script, not a test.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.controlplane import Cluster, find_binaries, front_with_haproxy, start_ha_pair  # noqa: E402
from tests.controlplane.cluster import admin_kube  # noqa: E402
from tests.controlplane.kube import make_crd, objects_path  # noqa: E402
from tests.integration.modrun import auth_args, run_module  # noqa: E402

OBJECTS = 24  # per CRD: the waits do not depend on it, and a few objects keep each pass well under a second
# the module option that names every apiserver (the role's crd_upgrade_apiserver_endpoints)
MODULE_ENDPOINTS = "apiserver_endpoints"
RESTORE_TIMEOUT_S = 1800  # ten CRDs with the settle fallback wait about 6.5 minutes


@dataclass(frozen=True)
class Case:
    name: str  # what --only takes (docs/managed-clusters.md names one; its docs test looks for it here)
    crds: int
    named: bool  # every apiserver named (the barrier sees each one) or none (the settle fallback)


CASES = [Case("1-settle-fallback", 1, False), Case("1-every-apiserver-named", 1, True),
         Case("10-settle-fallback", 10, False), Case("10-every-apiserver-named", 10, True)]


class CaseFailed(RuntimeError):
    """A case's module failed: its figures would not be the role's waits."""


def role_defaults() -> dict[str, Any]:
    return yaml.safe_load((REPO / "roles" / "crd_upgrade" / "defaults" / "main.yml").read_text())


def start_managed_cluster(folder: Path) -> Cluster:
    """Two apiservers on one etcd behind HAProxy; the second's etcd link is a DelayProxy left without lag, so the
    topology is the one the HA tests use, with both apiservers current."""
    pair = start_ha_pair("lb", folder, find_binaries(), lagging_member=True)
    try:
        front_with_haproxy(pair)
    except BaseException:
        pair.stop()
        raise
    return pair


def crd(group: str, index: int, versions: list[tuple[str, bool, bool]]) -> dict[str, Any]:
    return make_crd(group, f"gizmos{index}", f"Gizmo{index}", versions, "Cluster")


def seed_and_flip(pair: Cluster, group: str, crds: int) -> list[str]:
    """Every CRD at v1 with v2 served and its objects, then the flip of every one to storage v2 (release N)."""
    kube = admin_kube(pair, 0)
    for index in range(crds):
        kube.apply_crd(crd(group, index, [("v1", True, True), ("v2", True, False)]))
        for i in range(OBJECTS):
            kube.post(objects_path(group, "v1", f"gizmos{index}"), {
                "apiVersion": f"{group}/v1", "kind": f"Gizmo{index}",
                "metadata": {"name": f"g-{i:06d}"}, "spec": {"index": i}})
    for index in range(crds):  # all flipped before the re-store starts, as one apply of the release does it
        kube.apply_crd(crd(group, index, [("v1", True, False), ("v2", True, True)]))
    return [f"gizmos{index}.{group}" for index in range(crds)]


def barrier_args(pair: Cluster, named: bool, defaults: dict[str, Any]) -> dict[str, Any]:
    if named:
        return {MODULE_ENDPOINTS: [kas.url for kas in pair.apiservers]}
    return {"barrier_fallback": "settle", "barrier_fallback_settle": defaults["crd_upgrade_barrier_fallback_settle"]}


def timed_module(name: str, args: dict[str, Any], timeout: float = 600) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    result = run_module(name, args, timeout=timeout)
    return result, time.monotonic() - started


def crd_line(entry: dict[str, Any]) -> str:
    """One CRD's waits and passes as crd_storage_migrate reports them."""
    barrier, drain, proof = entry["barrier"], entry["drain"], entry.get("proof") or {}
    return (f"  {entry['name'].split('.')[0]}: barrier {barrier['mode']} {barrier['polls']} polls "
            f"{barrier['waited_s']:.1f} s, drain {drain['waited_s']:.1f} s (from {drain['anchor']}), "
            f"pass {entry['duration_s']:.2f} s, proof {proof.get('kind')} "
            f"{len(proof.get('passes') or [])} confirming pass(es) {proof.get('duration_s')} s")


def measure(pair: Cluster, case: Case, defaults: dict[str, Any]) -> list[str]:
    """One case on a fresh API group: the re-store, then the writers check before release N+1, timed."""
    names = seed_and_flip(pair, f"w{case.crds}{uuid.uuid4().hex[:6]}.lb.crdops.test", case.crds)
    connection = auth_args(pair, pair.lb_context)  # only the HAProxy frontend, no etcd URL
    barrier = barrier_args(pair, case.named, defaults)
    migrate, restore_s = timed_module("crd_storage_migrate", dict(
        connection, names=names, barrier_settle=defaults["crd_upgrade_settle_seconds"],
        barrier_timeout=defaults["crd_upgrade_barrier_timeout"], drain_window=defaults["crd_upgrade_drain_window"],
        confirm_passes=defaults["crd_upgrade_confirm_passes"], **barrier), timeout=RESTORE_TIMEOUT_S)
    if migrate.get("failed"):
        raise CaseFailed(f"crd_storage_migrate failed: {migrate.get('msg')}")
    writers, writers_s = timed_module("crd_client_check", dict(
        connection, check="writers", names=names, removed_versions={name: ["v1"] for name in names},
        metrics_window=defaults["crd_upgrade_writers_window"],
        **({MODULE_ENDPOINTS: barrier[MODULE_ENDPOINTS]} if case.named else {})))
    if writers.get("failed"):
        raise CaseFailed(f"crd_client_check failed: {writers.get('msg')}")
    head = (f"{case.crds} CRDs of {OBJECTS} objects, apiservers named: {case.named}, restore {restore_s:.1f} s, "
            f"writers check {writers_s:.1f} s ({writers['writers']['metrics']})")
    return [head] + [crd_line(entry) for entry in migrate["crds"]]


def chosen_cases(only: str) -> list[Case]:
    if not only:
        return CASES
    by_name = {case.name: case for case in CASES}
    unknown = [name for name in only.split(",") if name not in by_name]
    if unknown:
        raise SystemExit(f"--only: unknown case(s) {unknown}; the cases are {list(by_name)}")
    return [by_name[name] for name in only.split(",")]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated cases to run, of: " + ", ".join(c.name for c in CASES))
    ap.add_argument("--out", type=Path, help="also append the printed lines to this file")
    args = ap.parse_args()
    cases, defaults = chosen_cases(args.only), role_defaults()
    folder = Path(tempfile.mkdtemp(prefix="crdops-managed-waits-"))
    print(f"control plane and its logs: {folder}", file=sys.stderr)
    pair = start_managed_cluster(folder)
    failed = 0
    try:
        for case in cases:
            try:
                lines = measure(pair, case, defaults)
            except CaseFailed as exc:
                failed += 1
                print(f"{case.name}: {exc}", file=sys.stderr)
                continue
            print("\n" + "\n".join(lines), flush=True)
            if args.out:
                with args.out.open("a", encoding="utf-8") as out:
                    out.write("\n".join(lines) + "\n")
    finally:
        pair.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

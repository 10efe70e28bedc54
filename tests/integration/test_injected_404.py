"""A 404 on a re-store write is not proof that the object is gone: counted as gone, it let the trim through
while the object stayed stored at the old version.

A TLS front (tests/controlplane/fault_front.py) in the kubeconfig forwards to a real apiserver but answers
1 in 4 re-store PATCHes at the new version itself, in the forms a real topology produces: the plain-text
`404 page not found` of a member that has not loaded the version yet, a JSON Status NotFound naming
another object, or one naming this object although a GET shows it exists. No etcd URL is given, as on a
managed cluster. 400 objects of a cluster-scoped CRD at v1; playbooks/fleet_upgrade.yml with release N
(v1 + v2, storage v2) and N+1 (v2 only).

Expected: the re-store reports those 100 objects failed (none gone), writes no record, nothing is
trimmed, N+1 is not applied, every object stays readable, and etcd shows exactly those 100 keys at v1.
Before the fix the 100 were counted as gone, the record was written, storedVersions trimmed to [v2],
N+1 applied, and every LIST of the resource failed (corrupt object at a removed version).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.controlplane.cluster import kubeconfig_entry, write_kubeconfig
from tests.controlplane.etcd_reader import resource_prefix, scan_storage
from tests.controlplane.fault_front import FaultFront
from tests.controlplane.kube import KubeError, make_crd, objects_path
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import Seeded, create_objects

REPO = Path(__file__).resolve().parents[2]
COUNT = 400
RECORD = "migration.crdops.io/storage-migration"


def picked(name: str) -> bool:
    """1 in 4: obj-000003, obj-000007, ... (the same objects on every retry of the pass)."""
    return int(name.rsplit("-", 1)[1]) % 4 == 3


def _counts(stdout: str, crd_name: str) -> dict:
    """The re-store's per-CRD counts as the role prints them (`listed N, rewritten N, ... failed N`)."""
    for line in stdout.splitlines():
        if crd_name in line and "listed" in line and "rewritten" in line:
            return {k: int(v) for k, v in re.findall(r"\b(listed|rewritten|unchanged|gone|failed) (\d+)", line)}
    return {}


@pytest.mark.parametrize("form", ["plain", "status_other", "status_self"])
def test_unconfirmed_404_is_a_failure_not_gone(binaries, cluster, kube, group, form, tmp_path):
    s = Seeded(group, "gadgets", "Gadget", "Cluster")

    def crd(versions):
        return make_crd(group, s.plural, s.kind, versions, "Cluster")

    kube.apply_crd(crd([("v1", True, True)]))
    create_objects(kube, s, "v1", COUNT, None)
    release_n, release_next = tmp_path / "release-n", tmp_path / "release-next"
    for folder, doc in ((release_n, crd([("v1", True, False), ("v2", True, True)])),
                        (release_next, crd([("v2", True, True)]))):
        folder.mkdir()
        (folder / "crd.yaml").write_text(yaml.safe_dump(doc))

    front = FaultFront(cluster.server, cluster.pki, group, "v2", s.plural, picked, form).start()
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", [kubeconfig_entry("front", front.url, cluster.pki)])
        inventory = {"all": {"children": {"clusters": {"hosts": {"behind-front": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(kubeconfig), "crd_upgrade_context": "front",
            "crd_upgrade_release_manifests": [str(release_n / "*.yaml")],
            "crd_upgrade_target_manifests": [str(release_next / "*.yaml")],
            "crd_upgrade_crd_names": [s.crd_name], "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}}}}}}
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
        extra = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "report")})
        proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                                "-e", extra)
    finally:
        front.stop()

    expected_v1 = sorted(f"obj-{i:06d}" for i in range(COUNT) if picked(f"obj-{i:06d}"))
    assert sorted(front.faulted) == expected_v1  # the front answered exactly these 100 objects itself
    counts = _counts(proc.stdout, s.crd_name)
    live = kube.get_crd(s.crd_name)
    scan = scan_storage(cluster.etcd_url, group, s.plural)
    try:
        readable = len(kube.get(objects_path(group, "v2", s.plural))["items"])
    except KubeError as exc:
        readable = f"LIST fails: HTTP {exc.status} {str(exc.body)[:300]}"
    state = (f"counts={counts} storedVersions={live['status']['storedVersions']} "
             f"versions={[v['name'] for v in live['spec']['versions']]} record={RECORD in live['metadata'].get('annotations', {})} "
             f"etcd={dict(scan.counts)} readable={readable}\n{proc.stdout[-3000:]}")

    assert proc.returncode != 0, state
    assert counts == {"listed": COUNT, "rewritten": COUNT - len(expected_v1), "unchanged": 0, "gone": 0,
                      "failed": len(expected_v1)}, state
    assert RECORD not in (live["metadata"].get("annotations") or {}), state
    assert live["status"]["storedVersions"] == ["v1", "v2"], state        # nothing trimmed
    assert [v["name"] for v in live["spec"]["versions"]] == ["v1", "v2"], state  # N+1 not applied
    assert readable == COUNT, state                                     # every object readable
    prefix = resource_prefix(group, s.plural).decode()
    assert scan.keys_not_at(f"{group}/v2") == [prefix + n for n in expected_v1], state  # exactly these at v1
    assert scan.counts == {f"{group}/v1": len(expected_v1), f"{group}/v2": COUNT - len(expected_v1)}
    reliability.record(f"1 in 4 re-store writes answered 404 ({form.replace('_', ' ')}) by a front, no etcd URL, role",
                       f"{len(expected_v1)} objects reported failed, none gone; no record, no trim, release N+1 "
                       f"not applied; all {COUNT} readable; etcd: exactly those {len(expected_v1)} keys at v1",
                       COUNT, scan.total, False)

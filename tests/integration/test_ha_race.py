"""Two apiservers on one etcd: the storage flip reaches them at different times (kubernetes#130235)."""
from __future__ import annotations

import json
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from tests.controlplane.cluster import admin_kube
from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.controlplane.kube import objects_path
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook, auth_args, run_module
from tests.integration.seed import Seeded, create_objects, crd_at, flip_storage, seed_old_objects

REPO_PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def test_barrier_waits_for_every_apiserver_before_migrating(ha):
    a, b = admin_kube(ha, 0), ha.apiservers[1]
    both = [kas.url for kas in ha.apiservers]  # two identity Leases are alive: both must be named
    s = seed_old_objects(a, "barrier.crdops.test", 300, flip=False)
    os.kill(b.process.pid, signal.SIGSTOP)  # B keeps its old view of the CRD while stopped
    try:
        flip_storage(a, s, "v1beta1")
        blocked = run_module("crd_storage_migrate", dict(auth_args(ha, "ha-0"), names=[s.crd_name],
                                                         apiserver_endpoints=both, barrier_timeout=3))
    finally:
        os.kill(b.process.pid, signal.SIGCONT)
    assert blocked["failed"] is True
    assert "HA barrier" in blocked["msg"] and b.url in blocked["msg"], blocked["msg"]
    assert scan_storage(ha.etcd_url, s.group, s.plural).counts == {s.old(): 300}  # nothing was written

    passed = run_module("crd_storage_migrate", dict(auth_args(ha, "ha-0"), names=[s.crd_name],
                                                    apiserver_endpoints=both, barrier_timeout=60))
    assert not passed.get("failed"), passed.get("msg")
    assert passed["barrier"]["mode"] == "endpoints" and passed["barrier"]["apiservers_alive"] == 2
    assert passed["barrier"]["reached"] == both
    entry = passed["crds"][0]
    assert entry["barrier"]["passed"] and set(entry["barrier"]["endpoints"]) == set(both)
    assert set(entry["barrier"]["endpoints"].values()) == {"v1beta1"}
    final = scan_storage(ha.etcd_url, s.group, s.plural)
    assert final.counts == {s.new(): 300}
    reliability.record("HA: storage flipped through one apiserver while the other lags",
                       "the barrier refused to start while the second apiserver did not report the new storage "
                       "version (nothing written); once it did, the pass ran and etcd shows 100% at v1beta1",
                       300, final.total, True)


@pytest.mark.parametrize("endpoints", [[], ["b"]], ids=["no-endpoints", "only-the-second"])
def test_without_every_apiserver_named_the_module_fails_closed_and_writes_nothing(ha, endpoints):
    """Two apiservers alive, the kubeconfig URL (could be a load balancer) plus fewer than two named URLs."""
    a, b = admin_kube(ha, 0), ha.apiservers[1]
    s = seed_old_objects(a, "closed.crdops.test", 200, flip=False)
    flip_storage(a, s, "v1beta1")
    a.wait_api_services(s.crd_name)  # the flip's own background writes, before the revision nothing may pass
    revision = current_revision(ha.etcd_url)
    given = [b.url for _endpoint in endpoints]
    for check_mode in (True, False):
        out = run_module("crd_storage_migrate", dict(auth_args(ha, "ha-0"), names=[s.crd_name],
                                                     apiserver_endpoints=given), check_mode=check_mode)
        assert out["barrier"]["mode"] == "refused", out.get("msg")
        # check mode writes nothing, so it reports what a real run would fail with instead of failing
        assert out.get("failed", False) is not check_mode
        msg = out["barrier"]["refusal"] if check_mode else out["msg"]
        assert "HA barrier refused before the first write" in msg and "2 apiservers are alive" in msg, msg
        assert "only %d can be named and reached directly" % len(given) in msg, msg
        assert "crd_upgrade_apiserver_endpoints" in msg and "barrier_fallback=settle" in msg
        assert out["barrier"]["apiservers_alive"] == 2 and len(out["barrier"]["identity_leases"]) == 2
        assert out["barrier"]["reached"] == given
        assert out["crds"] == [] if not check_mode else out["crds"][0]["listed"] == 200
    after = scan_storage(ha.etcd_url, s.group, s.plural)
    # proof by bytes: every key still at the old version, and not one key written since (objects, CRD, anything
    # but the control plane's own heartbeats)
    assert after.counts == {s.old(): 200}
    assert keys_written_since(ha.etcd_url, revision) == []
    crd = a.get_crd(s.crd_name)
    assert crd["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]
    assert "migration.crdops.io/storage-migration" not in (crd["metadata"].get("annotations") or {})
    reliability.record("HA: two apiservers alive, %s named" % ("none" if not given else "only one"),
                       "crd_storage_migrate refused before the first write naming 2 alive apiservers (identity "
                       "Leases) and what to set; etcd shows all 200 objects untouched at the old version",
                       200, after.total, False)


def test_without_barrier_the_etcd_check_catches_stale_writes(ha):
    """Writes through the lagging apiserver right after a flip; the etcd verification tells the truth."""
    a, b = admin_kube(ha, 0), admin_kube(ha, 1)
    rounds, stale_rounds, stale_objects = 4, 0, 0
    for i in range(rounds):
        s = Seeded(f"race{i}.crdops.test", "widgets", "Widget", "Namespaced")
        a.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
        b.ensure_namespace("ns-a")
        create_objects(b, s, "v1alpha1", 1, ["ns-a"])  # B has served the CRD: its informer knows it
        # B is paused while A takes the flip, as a slow informer would be; the writes are sent the moment
        # it resumes, after the flip is complete and served by A
        os.kill(ha.apiservers[1].process.pid, signal.SIGSTOP)
        try:
            flip_storage(a, s, "v1beta1")
        finally:
            os.kill(ha.apiservers[1].process.pid, signal.SIGCONT)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n, s=s: b.post(objects_path(s.group, "v1alpha1", s.plural, "ns-a"), {
                "apiVersion": s.old(), "kind": s.kind, "metadata": {"name": f"obj-{n:06d}"}}), range(1, 41)))
        scan = scan_storage(ha.etcd_url, s.group, s.plural)
        crd = a.get_crd(s.crd_name)
        written_after_flip = [k for k in scan.keys if not k.endswith("obj-000000")]
        verify = run_module("crd_storage_verify", dict(auth_args(ha, "ha-0"), names=[s.crd_name],
                                                       etcd_url=ha.etcd_url, fail_on_mismatch=False))
        assert crd["spec"]["versions"][1]["storage"] is True
        old = len(scan.keys_not_at(s.new()))
        # the verification reports exactly what etcd holds: every key not at the storage version
        assert verify["crds"][0]["mismatched"] == old and verify["verified"] == (old == 0)
        if len([k for k in written_after_flip if scan.keys[k] == s.old()]):
            stale_rounds += 1
            stale_objects += len([k for k in written_after_flip if scan.keys[k] == s.old()])
    reliability.record("HA: writes through the lagging apiserver right after a flip, no barrier",
                       f"{stale_rounds} of {rounds} rounds stored {stale_objects} object(s) at the old version "
                       "after the flip; crd_storage_verify reported every such key from etcd in every round",
                       0, 0, None)


def test_role_on_the_ha_pair_stops_before_the_flip_without_every_apiserver_then_passes_with_both(ha, tmp_path):
    """The role's preflight plans the barrier: nothing flipped or written without both URLs; ok with them."""
    a = admin_kube(ha, 0)
    s = seed_old_objects(a, "rolebarrier.crdops.test", 150, flip=False)
    release_n, release_next = tmp_path / "release-n", tmp_path / "release-next"
    for folder, crd in ((release_n, crd_at(s, "v1beta1")), (release_next, crd_at(s, "v1beta1", served=("v1beta1",)))):
        folder.mkdir()
        (folder / "crd.yaml").write_text(yaml.safe_dump(crd))

    def run_role(endpoints):
        host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "crd_upgrade_kubeconfig": str(ha.kubeconfig), "crd_upgrade_context": "ha-0",
                "crd_upgrade_release_manifests": [str(release_n / "*.yaml")],
                "crd_upgrade_target_manifests": [str(release_next / "*.yaml")],
                "crd_upgrade_crd_names": [s.crd_name], "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0,
                "crd_upgrade_apiserver_endpoints": endpoints}
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(
            {"all": {"children": {"clusters": {"hosts": {"ha-pair": host}}}}}))
        extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")})
        return ansible_playbook("-i", str(tmp_path / "inventory.yml"),
                                str(REPO_PLAYBOOKS / "fleet_upgrade.yml"), "-e", extra_vars)

    revision = current_revision(ha.etcd_url)
    refused = run_role([])
    assert refused.returncode != 0
    assert "phase preflight failed" in refused.stdout and "2 apiservers are alive" in refused.stdout, \
        refused.stdout[-4000:]
    crd = a.get_crd(s.crd_name)
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [("v1alpha1", True)]  # N not applied
    assert keys_written_since(ha.etcd_url, revision) == []

    passed = run_role([kas.url for kas in ha.apiservers])
    assert passed.returncode == 0, passed.stdout[-4000:]
    assert "mode endpoints: 2 apiserver(s) alive" in passed.stdout
    # no check-mode call of the role lacks the endpoints (Ansible prints warnings on stderr)
    assert "would stop here" not in passed.stdout + passed.stderr
    final = scan_storage(ha.etcd_url, s.group, s.plural)
    assert final.counts == {s.new(): 150}
    assert a.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1beta1"]
    reliability.record("HA: the role on two apiservers, without and with crd_upgrade_apiserver_endpoints",
                       "without: the preflight refused before the storage flip, nothing written in etcd; with both "
                       "URLs: flip, barrier, re-store, trim and upgrade ok, etcd 100% at v1beta1",
                       150, final.total, True)

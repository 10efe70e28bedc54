"""Interrupted runs: apiserver killed and restarted, the migrating process SIGKILLed, etcd compacted.

Each ends with an etcd read: no object lost, no trim possible from an incomplete pass, and a rerun
that completes without redoing the finished part.
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.controlplane.cluster import admin_kube, start_cluster
from tests.controlplane.etcd_reader import compact, scan_storage
from tests.integration import reliability
from tests.integration.modrun import ModuleRun, auth_args, run_module, wait_for_progress
from tests.integration.seed import seed_old_objects

COUNT = 1500


@pytest.fixture()
def own_cluster(binaries, tmp_path):
    """A cluster of the test's own: these tests kill its processes."""
    c = start_cluster("faulty", tmp_path / "faulty", binaries)
    yield c
    c.stop()


def _done(state) -> int:
    return (state.get("current") or {}).get("done", 0)


def _migrate_in_background(cluster, s, progress, **extra) -> ModuleRun:
    return ModuleRun("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=100, workers=2,
                                                 progress_file=str(progress), **extra))


def test_apiserver_killed_mid_run(own_cluster, tmp_path):
    kube = admin_kube(own_cluster)
    s = seed_old_objects(kube, "restart.crdops.test", COUNT, namespaces=["ns-a", "ns-b", "ns-c"])

    # 1. a short retry deadline: the run fails cleanly and leaves a resumable checkpoint
    progress = tmp_path / "p1.json"
    run = _migrate_in_background(own_cluster, s, progress, retry_deadline=3, max_qps=400)
    wait_for_progress(progress, lambda st: _done(st) >= 300)
    own_cluster.apiserver.process.kill()
    failed = run.result()
    assert failed["failed"] is True
    assert "faulty" in failed["msg"] and s.crd_name in failed["msg"]
    own_cluster.apiserver.start()
    own_cluster.apiserver.wait_ready()
    kube = admin_kube(own_cluster)
    first_pass = scan_storage(own_cluster.etcd_url, s.group, s.plural)
    assert first_pass.total == COUNT
    assert run_module("crd_stored_versions_trim", dict(auth_args(own_cluster), names=[s.crd_name]))["failed"]

    rerun = run_module("crd_storage_migrate", dict(auth_args(own_cluster), names=[s.crd_name], page_size=100))
    assert not rerun.get("failed"), rerun.get("msg")
    crd = rerun["crds"][0]
    skipped = crd["skipped_by_checkpoint"]
    assert skipped >= 200
    assert crd["rewritten"] == COUNT - first_pass.counts.get(s.new(), 0)
    assert scan_storage(own_cluster.etcd_url, s.group, s.plural).counts == {s.new(): COUNT}

    # 2. a generous deadline: the same run rides out the restart by itself
    s2 = seed_old_objects(kube, "restart2.crdops.test", COUNT, namespaces=["ns-a"])
    progress = tmp_path / "p2.json"
    run = _migrate_in_background(own_cluster, s2, progress, retry_deadline=90, max_qps=400)
    wait_for_progress(progress, lambda st: _done(st) >= 300)
    own_cluster.apiserver.process.kill()
    time.sleep(2)
    own_cluster.apiserver.start()
    survived = run.result()
    assert not survived.get("failed"), survived.get("msg")
    final = scan_storage(own_cluster.etcd_url, s2.group, s2.plural)
    assert final.counts == {s2.new(): COUNT}
    reliability.record("apiserver killed and restarted mid-run",
                       f"short deadline: failed cleanly naming cluster and CRD, trim refused, rerun skipped "
                       f"{skipped} finished objects and completed; long deadline: retried through the restart "
                       "and completed", COUNT, final.total, True)


def test_migrating_process_sigkilled(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, COUNT, namespaces=["ns-a", "ns-b"])
    progress = tmp_path / "p.json"
    run = _migrate_in_background(cluster, s, progress, max_qps=300)
    wait_for_progress(progress, lambda st: _done(st) >= 400)
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait(10)

    crd = kube.get_crd(s.crd_name)
    annotations = crd["metadata"].get("annotations") or {}
    assert "migration.crdops.io/storage-migration" not in annotations
    assert "migration.crdops.io/storage-migration-checkpoint" in annotations
    refused = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name]))
    assert refused["failed"] and "record" in refused["msg"].lower()
    assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]
    killed_at = scan_storage(cluster.etcd_url, group, s.plural)
    assert killed_at.total == COUNT

    rerun = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=100))
    assert not rerun.get("failed"), rerun.get("msg")
    entry = rerun["crds"][0]
    assert entry["record_written"] is True
    assert entry["skipped_by_checkpoint"] >= 300
    assert entry["resumed_from"]
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): COUNT}
    annotations = kube.get_crd(s.crd_name)["metadata"].get("annotations") or {}
    assert "migration.crdops.io/storage-migration-checkpoint" not in annotations
    assert not run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name])).get("failed")
    reliability.record("migrating process SIGKILLed mid-pass",
                       f"no record written, trim refused; rerun resumed after {entry['skipped_by_checkpoint']} "
                       "checkpointed objects, wrote the record, trim allowed", COUNT, final.total, True)


@pytest.fixture()
def uncached_cluster(binaries, tmp_path):
    """Without the watch cache every page of a LIST is read from etcd, so compaction expires it.

    (kube-apiserver 1.37 serves continued lists from cache snapshots, which etcd compaction does
    not touch; clusters running with --watch-cache=false, or older ones, see 410 Gone.)
    """
    c = start_cluster("uncached", tmp_path / "uncached", binaries, extra_args=("--watch-cache=false",))
    yield c
    c.stop()


def test_etcd_compaction_during_listing(uncached_cluster, tmp_path):
    cluster, group = uncached_cluster, "compaction.crdops.test"
    kube = admin_kube(cluster)
    s = seed_old_objects(kube, group, 1000, namespaces=["ns-a"])
    progress = tmp_path / "p.json"
    run = _migrate_in_background(cluster, s, progress, max_qps=150)
    compactions = 0
    while run.proc.poll() is None:
        time.sleep(0.7)
        try:
            compact(cluster.etcd_url)
            compactions += 1
        except Exception:  # compacting at an already compacted revision: nothing new to compact
            pass
    result = run.result()
    assert not result.get("failed"), result.get("msg")
    entry = result["crds"][0]
    assert compactions >= 3
    assert entry["relists"] + entry["expired_continues"] >= 1, entry
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): 1000}
    assert entry["rewritten"] == 1000
    reliability.record("etcd compacted repeatedly during listing",
                       f"{compactions} compactions; 410 Gone answered {entry['expired_continues']} time(s) with "
                       f"the server's inconsistent continue token and {entry['relists']} relist(s); completed, "
                       "every object rewritten once", 1000, final.total, True)

"""Proof that the modules migrate: every claim is checked by reading etcd, counts are exact."""
from __future__ import annotations

import random
import threading
import time

from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.controlplane.kube import KubeError, objects_path
from tests.integration import reliability
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import Seeded, create_objects, crd_at, flip_storage, seed_old_objects


def only_crd(result: dict) -> dict:
    assert len(result["crds"]) == 1, result
    return result["crds"][0]


def migrate(cluster, s: Seeded, check_mode=False, **extra) -> dict:
    return run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], **extra), check_mode)


def trim(cluster, s: Seeded, check_mode=False, diff=False, **extra) -> dict:
    return run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name], **extra),
                      check_mode, diff)


def stored_versions(kube, s: Seeded) -> list[str]:
    return kube.get_crd(s.crd_name)["status"]["storedVersions"]


def test_500_objects_migrate_rerun_is_a_noop_trim_then_drop_old_version(cluster, kube, group):
    s = seed_old_objects(kube, group, 500)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): 500}

    first = migrate(cluster, s)
    assert not first.get("failed"), first.get("msg")
    crd = only_crd(first)
    assert first["changed"] is True
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["gone"], crd["failed"]) == (500, 500, 0, 0, 0)
    scan = scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.counts == {s.new(): 500}

    # a rerun finds the durable record of the complete pass and does not redo it
    again = migrate(cluster, s)
    assert again["changed"] is False
    assert "valid migration record" in only_crd(again)["skipped"]
    # forced to pass again, it writes nothing: every no-op write is elided by the storage layer
    revision = current_revision(cluster.etcd_url)
    forced = migrate(cluster, s, force=True)
    crd = only_crd(forced)
    assert forced["changed"] is False
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["failed"]) == (500, 0, 500, 0)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): 500}
    # the only etcd write of the forced pass is the refreshed record on the CRD itself
    assert keys_written_since(cluster.etcd_url, revision) == [
        f"/registry/apiextensions.k8s.io/customresourcedefinitions/{s.crd_name}"]

    trimmed = trim(cluster, s)
    assert not trimmed.get("failed"), trimmed.get("msg")
    assert trimmed["changed"] is True
    assert stored_versions(kube, s) == ["v1beta1"]
    assert trim(cluster, s)["changed"] is False

    kube.apply_crd(crd_at(s, "v1beta1", served=("v1beta1",)))
    assert [v["name"] for v in kube.get_crd(s.crd_name)["spec"]["versions"]] == ["v1beta1"]
    assert len(kube.get(objects_path(group, "v1beta1", s.plural))["items"]) == 500


def test_mixed_old_and_new_counts_are_exact(cluster, kube, group):
    s = seed_old_objects(kube, group, 300)
    create_objects(kube, s, "v1beta1", 200, ["ns-a", "ns-b", "ns-c"], start=300)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): 300, s.new(): 200}

    crd = only_crd(migrate(cluster, s))
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["failed"]) == (500, 300, 200, 0)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): 500}


def test_trim_refuses_without_record_with_stale_record_and_for_the_storage_version(cluster, kube, group):
    s = seed_old_objects(kube, group, 20)

    no_record = trim(cluster, s)
    assert no_record["failed"] is True
    assert "record" in no_record["msg"].lower() and s.crd_name in no_record["msg"]
    assert stored_versions(kube, s) == ["v1alpha1", "v1beta1"]

    assert not migrate(cluster, s).get("failed")
    # storage flipped back: the record speaks of v1beta1, the storage version is now v1alpha1
    flip_storage(kube, s, "v1alpha1")
    stale = trim(cluster, s)
    assert stale["failed"] is True
    assert "stale" in stale["msg"].lower() or "storage version" in stale["msg"].lower()
    assert stored_versions(kube, s) == ["v1alpha1", "v1beta1"]

    drop_storage = trim(cluster, s, versions=["v1alpha1"], force=True)
    assert drop_storage["failed"] is True
    assert "storage version" in drop_storage["msg"].lower()
    assert stored_versions(kube, s) == ["v1alpha1", "v1beta1"]


def test_concurrent_writer_during_migration(cluster, kube, group):
    s = seed_old_objects(kube, group, 1500, namespaces=["ns-a", "ns-b", "ns-c"])
    stop = threading.Event()
    stats = {"created": 0, "updated": 0, "deleted": 0}
    errors: list[Exception] = []

    def writer():
        rng = random.Random(7)
        i = 10_000
        while not stop.is_set():
            ns = rng.choice(["ns-a", "ns-b", "ns-c"])
            try:
                op = rng.random()
                if op < 0.4:
                    kube.post(objects_path(group, "v1beta1", s.plural, ns),
                              {"apiVersion": s.new(), "kind": s.kind, "metadata": {"name": f"new-{i}"}})
                    stats["created"] += 1
                    i += 1
                elif op < 0.7:
                    n = rng.randrange(1500)
                    kube.merge_patch(objects_path(group, "v1beta1", s.plural, ["ns-a", "ns-b", "ns-c"][n % 3],
                                                  f"obj-{n:06d}"), {"spec": {"touched": i}})
                    stats["updated"] += 1
                else:
                    n = rng.randrange(1500)
                    kube.delete(objects_path(group, "v1beta1", s.plural, ["ns-a", "ns-b", "ns-c"][n % 3],
                                             f"obj-{n:06d}"))
                    stats["deleted"] += 1
            except KubeError as exc:
                if exc.status != 404:  # 404: patching or deleting an object already deleted
                    errors.append(exc)
            time.sleep(0.002)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        result = migrate(cluster, s, page_size=100, workers=4)
    finally:
        stop.set()
        thread.join(10)
    assert not result.get("failed"), result.get("msg")
    crd = only_crd(result)
    assert crd["failed"] == 0
    assert crd["listed"] == crd["rewritten"] + crd["unchanged"] + crd["gone"] + crd["already_current"]
    assert stats["deleted"] > 0 and stats["created"] > 0
    scan = scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.keys_not_at(s.new()) == []
    # only successful creates/deletes were counted (a 404 on an already-deleted object was not)
    assert scan.total == 1500 + stats["created"] - stats["deleted"]
    assert errors == []
    reliability.record("concurrent creates, updates and deletes during the whole migration",
                       f"{stats['created']} created, {stats['updated']} updated, {stats['deleted']} deleted meanwhile; "
                       f"pass complete, {crd['gone']} counted gone", 1500 + stats["created"] - stats["deleted"],
                       scan.total, not scan.keys_not_at(s.new()))


def test_cluster_scoped_many_namespaces_big_objects_and_empty_crd(cluster, kube, group):
    cluster_scoped = seed_old_objects(kube, group, 30, namespaces=None, plural="gadgets", kind="Gadget")
    spread = seed_old_objects(kube, group, 60, namespaces=[f"spread-{i:02d}" for i in range(20)],
                              plural="sprockets", kind="Sprocket")
    big = seed_old_objects(kube, group, 6, namespaces=["big"], plural="boulders", kind="Boulder",
                           payload_bytes=900_000)
    empty = seed_old_objects(kube, group, 0, plural="voids", kind="Void")

    result = run_module("crd_storage_migrate", dict(auth_args(cluster), group=group))
    assert not result.get("failed"), result.get("msg")
    by_name = {c["name"]: c for c in result["crds"]}
    assert set(by_name) == {x.crd_name for x in (cluster_scoped, spread, big, empty)}
    for seeded, count in ((cluster_scoped, 30), (spread, 60), (big, 6), (empty, 0)):
        assert by_name[seeded.crd_name]["rewritten"] == count
        assert by_name[seeded.crd_name]["listed"] == count
        assert scan_storage(cluster.etcd_url, group, seeded.plural).counts == ({seeded.new(): count} if count else {})


def test_check_mode_writes_nothing(cluster, kube, group):
    s = seed_old_objects(kube, group, 40)
    before = current_revision(cluster.etcd_url)
    info = run_module("crd_storage_info", dict(auth_args(cluster), names=[s.crd_name]), check_mode=True)
    plan = migrate(cluster, s, check_mode=True)
    trimmed = trim(cluster, s, check_mode=True, force=True)
    assert keys_written_since(cluster.etcd_url, before) == []
    assert not info.get("failed") and not plan.get("failed") and not trimmed.get("failed"), (info, plan, trimmed)
    assert only_crd(info)["needs_migration"] is True
    assert only_crd(plan)["listed"] == 40
    assert trimmed["changed"] is True  # it would trim, and says so
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): 40}
    assert stored_versions(kube, s) == ["v1alpha1", "v1beta1"]


def test_bad_input_names_the_problem_and_writes_nothing(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, 5)
    before = current_revision(cluster.etcd_url)

    unknown = run_module("crd_storage_migrate", dict(auth_args(cluster), names=["nope.example.com"]))
    assert unknown["failed"] and "nope.example.com" in unknown["msg"]
    assert unknown["error"]["kind"] == "selection" and unknown["error"]["crd"] == "nope.example.com"

    bad_context = run_module("crd_storage_migrate", dict(auth_args(cluster, "no-such-context"), names=[s.crd_name]))
    assert bad_context["failed"] and "no-such-context" in bad_context["msg"]

    unreachable = run_module("crd_storage_migrate", {"host": "https://127.0.0.1:1", "api_key": "sekrit-token-123",
                                                     "validate_certs": False, "names": [s.crd_name],
                                                     "retry_deadline": 2})
    assert unreachable["failed"] and "127.0.0.1:1" in unreachable["msg"]
    assert unreachable["error"]["kind"] == "connection" and unreachable["error"]["cluster"] == "https://127.0.0.1:1"
    assert "sekrit-token-123" not in str(unreachable)

    from tests.controlplane.pki import ensure_pki
    foreign = ensure_pki(tmp_path / "foreign")
    wrong_ca = run_module("crd_storage_migrate", {"host": cluster.server, "ca_cert": str(foreign.ca_cert),
                                                  "client_cert": str(cluster.pki.admin_cert),
                                                  "client_key": str(cluster.pki.admin_key), "names": [s.crd_name],
                                                  "retry_deadline": 2})
    assert wrong_ca["failed"] and ("certificate" in wrong_ca["msg"].lower() or "ssl" in wrong_ca["msg"].lower())

    from tests.controlplane.pki import sign_client_cert
    cert, key = sign_client_cert(cluster.pki, "nobody", "nobody")
    no_rbac = run_module("crd_storage_migrate", {"host": cluster.server, "ca_cert": str(cluster.pki.ca_cert),
                                                 "client_cert": str(cert), "client_key": str(key),
                                                 "names": [s.crd_name]})
    assert no_rbac["failed"] and ("forbidden" in no_rbac["msg"].lower() or "403" in no_rbac["msg"])
    assert "nobody" in no_rbac["msg"] and no_rbac["error"]["kind"] == "permission"

    for bad in ({"page_size": 0}, {"workers": -1}, {"preflight_sample": -1}, {"workers": "many"}):
        res = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], **bad))
        assert res["failed"] and list(bad)[0] in res["msg"] and res["error"]["kind"] == "bad_input"

    assert keys_written_since(cluster.etcd_url, before) == []
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): 5}


def test_a_spec_change_after_the_pass_makes_the_record_stale(cluster, kube, group):
    s = seed_old_objects(kube, group, 30)
    assert not migrate(cluster, s).get("failed")
    generation = kube.get_crd(s.crd_name)["metadata"]["generation"]
    changed = crd_at(s, "v1beta1", served=("v1alpha1", "v1beta1", "v1"))  # a new served version: generation + 1
    kube.apply_crd(changed)
    assert kube.get_crd(s.crd_name)["metadata"]["generation"] == generation + 1
    refused = trim(cluster, s)
    assert refused["failed"] is True and "generation" in refused["msg"].lower(), refused["msg"]
    assert stored_versions(kube, s) == ["v1alpha1", "v1beta1"]


def test_a_crd_changed_during_the_pass_gets_no_record(cluster, kube, group, tmp_path):
    from tests.integration.modrun import ModuleRun, wait_for_progress
    s = seed_old_objects(kube, group, 1200)
    progress = tmp_path / "progress.json"
    run = ModuleRun("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=100, workers=2,
                                                max_qps=200, progress_file=str(progress)))
    wait_for_progress(progress, lambda st: (st.get("current") or {}).get("done", 0) >= 200)
    kube.apply_crd(crd_at(s, "v1beta1", served=("v1alpha1", "v1beta1", "v1")))  # generation moves mid-pass
    result = run.result()
    entry = only_crd(result)
    assert result["failed"] is True
    assert entry["record_written"] is False and entry["record_error"], entry
    assert "generation" in entry["record_error"].lower()
    annotations = kube.get_crd(s.crd_name)["metadata"].get("annotations") or {}
    assert "migration.crdops.io/storage-migration" not in annotations
    assert trim(cluster, s)["failed"] is True
    # every object was still re-stored: the pass itself was complete, only its proof is refused
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): 1200}

"""Faults on a real control plane: each ends with an etcd read; nothing lost, no unproven trim."""
from __future__ import annotations

import copy

import pytest

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError, objects_path
from tests.controlplane.webhook import (WebhookServer, conversion_spec, deny_updates_policy,
                                        deny_updates_webhook)
from tests.integration import reliability
from tests.integration.modrun import ModuleRun, auth_args, run_module, wait_for_progress
from tests.integration.seed import Seeded, create_objects, crd_at


def migrate(cluster, s: Seeded, check_mode=False, **extra) -> dict:
    return run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], **extra), check_mode)


def trim(cluster, s: Seeded, **extra) -> dict:
    return run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name], **extra))


def stored_versions(kube, s: Seeded) -> list[str]:
    return kube.get_crd(s.crd_name)["status"]["storedVersions"]


def with_conversion(crd: dict, server: WebhookServer) -> dict:
    crd = copy.deepcopy(crd)
    crd["spec"]["conversion"] = conversion_spec(server)
    return crd


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def test_conversion_webhook_down_mid_run_stops_the_pass_and_a_rerun_completes(cluster, kube, group, webhook,
                                                                              tmp_path):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    # half written at v1alpha1, half at v1beta1 (stored at v1alpha1 either way): the managedFields entries of the
    # second half are at the new storage version and must survive; the first half's are translated through the
    # webhook (v1alpha1 is being removed, kubernetes#111937), each exactly once across the stopped run and the rerun
    kube.apply_crd(with_conversion(crd_at(s, "v1alpha1"), webhook))
    create_objects(kube, s, "v1alpha1", 300, ["ns-a", "ns-b"])
    create_objects(kube, s, "v1beta1", 300, ["ns-a", "ns-b"], start=300)
    kube.apply_crd(with_conversion(crd_at(s, "v1beta1"), webhook))
    managed_before = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"]["managedFields"]
                      for o in kube.get(objects_path(group, "v1alpha1", s.plural))["items"]}

    progress = tmp_path / "progress.json"
    run = ModuleRun("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], page_size=50, workers=2,
                                                max_qps=100, progress_file=str(progress),
                                                removed_versions=["v1alpha1"]))
    wait_for_progress(progress, lambda st: (st.get("current") or {}).get("done", 0) >= 150)
    webhook.stop()
    result = run.result()

    assert result["failed"] is True
    crd = result["crds"][0]
    assert crd["complete"] is False and crd["record_written"] is False
    assert "conversion webhook" in result["msg"].lower(), result["msg"]
    assert s.crd_name in result["msg"] and "test-a" in result["msg"]
    partial = scan_storage(cluster.etcd_url, group, s.plural)
    assert partial.total == 600
    assert 150 <= partial.counts.get(s.new(), 0) < 600
    refused = trim(cluster, s)
    assert refused["failed"] and stored_versions(kube, s) == ["v1alpha1", "v1beta1"]

    webhook.start()
    rerun = migrate(cluster, s, removed_versions=["v1alpha1"])
    assert not rerun.get("failed"), rerun.get("msg")
    crd = rerun["crds"][0]
    # the rerun resumed after the last cleanly finished page instead of starting over
    assert crd["skipped_by_checkpoint"] >= 100
    assert crd["rewritten"] == 600 - partial.counts[s.new()]
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): 600}
    managed_after = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["metadata"].get("managedFields") or []
                     for o in kube.get(objects_path(group, "v1alpha1", s.plural))["items"]}
    assert set(managed_after) == set(managed_before)
    at_new = {k for k, entries in managed_before.items() if {e["apiVersion"] for e in entries} == {s.new()}}
    assert len(at_new) == 300
    assert all(managed_after[k] == managed_before[k] for k in at_new), "managedFields were wiped (kubernetes#136919)"
    assert not any(e["apiVersion"] == s.old() for entries in managed_after.values() for e in entries)
    assert result["crds"][0]["managed_fields_translated"] + crd["managed_fields_translated"] == 300
    # the same paths in both versions: each entry keeps every path it owned, the struct .spec itself included
    translated = [(before, after) for k in set(managed_after) - at_new
                  for before, after in zip(managed_before[k], managed_after[k], strict=True)]
    assert len(translated) == 300 and all(
        (after["fieldsV1"], after["manager"]) == (before["fieldsV1"], before["manager"]) for before, after in translated
    ), "ownership of the v1alpha1 writers translated, not dropped"
    assert not trim(cluster, s).get("failed")
    reliability.record("conversion webhook down mid-run",
                       f"pass stopped at the first conversion failure after {partial.counts[s.new()]} objects; "
                       f"no record, trim refused; rerun resumed (skipped {crd['skipped_by_checkpoint']}) "
                       "and completed; managedFields intact", 600, final.total, final.counts == {s.new(): 600})


@pytest.mark.parametrize("kind", ["webhook", "policy"])
def test_admission_rejecting_updates_is_predicted_and_reported(cluster, kube, group, webhook, kind):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    create_objects(kube, s, "v1alpha1", 40, ["ns-a"])
    kube.apply_crd(crd_at(s, "v1beta1"))
    message = f"crdops-test {kind}: updates of widgets are frozen"
    name = f"deny-{group.split('.')[0]}"
    if kind == "webhook":
        webhook.deny_message = message
        kube.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                  deny_updates_webhook(name, webhook, group, s.plural))
    else:
        policy, binding = deny_updates_policy(name, group, s.plural, message)
        kube.post("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy)
        kube.post("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", binding)
    try:
        _wait_until_rejected(kube, s)
        plan = migrate(cluster, s, check_mode=True)
        predicted = plan["crds"][0].get("predicted_rejections") or []
        assert predicted and message in predicted[0]["message"], plan["crds"][0]

        result = migrate(cluster, s)
        assert result["failed"] is True
        crd = result["crds"][0]
        assert crd["failed"] == 40 and crd["rewritten"] == 0
        assert message in crd["first_failures"][0]["message"]
        assert message in result["msg"] and s.crd_name in result["msg"]
        assert trim(cluster, s)["failed"] is True
        assert stored_versions(kube, s) == ["v1alpha1", "v1beta1"]
        scan = scan_storage(cluster.etcd_url, group, s.plural)
        assert scan.counts == {s.old(): 40}
    finally:
        for res in ("validatingwebhookconfigurations", "validatingadmissionpolicies",
                    "validatingadmissionpolicybindings"):
            try:
                kube.delete(f"/apis/admissionregistration.k8s.io/v1/{res}/{name}")
            except KubeError:
                pass
    _wait_until_accepted(kube, s)
    rerun = migrate(cluster, s)
    assert not rerun.get("failed"), rerun.get("msg")
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): 40}
    reliability.record(f"validating admission {kind} rejects UPDATE",
                       "check mode predicted the rejection with the admission message; the run reported all 40 "
                       "objects failed with that message; no record, trim refused; rule removed, rerun completed",
                       40, final.total, final.counts == {s.new(): 40})


def _probe_update(kube, s: Seeded) -> int:
    path = objects_path(s.group, "v1beta1", s.plural, "ns-a", "obj-000000")
    try:
        kube.request("PATCH", path, {}, "application/merge-patch+json", query={"dryRun": "All"})
        return 200
    except KubeError as exc:
        return exc.status


def _wait_until_rejected(kube, s: Seeded, timeout: float = 30) -> None:
    import time
    deadline = time.monotonic() + timeout
    while _probe_update(kube, s) == 200:  # admission configuration reaches the apiserver asynchronously
        assert time.monotonic() < deadline, "admission rule never took effect"
        time.sleep(0.2)


def _wait_until_accepted(kube, s: Seeded, timeout: float = 30) -> None:
    import time
    deadline = time.monotonic() + timeout
    while _probe_update(kube, s) != 200:
        assert time.monotonic() < deadline, "admission rule never went away"
        time.sleep(0.2)

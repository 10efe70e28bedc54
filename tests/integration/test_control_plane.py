"""The control plane is real and shows the problem the collection solves (issue: control plane).

Every count is exact and every claim about storage is read from etcd, not from the apiserver.
"""
from __future__ import annotations

import os
import time

import pytest

from tests.controlplane.cluster import admin_kube, start_cluster, start_fleet, start_ha_pair
from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import KubeError, make_crd, objects_path
from tests.controlplane.processes import port_is_listening

NAMESPACES = ["alpha", "beta", "gamma"]


def _seed_old_version(kube, group: str, count: int):
    """CRD served+stored at v1alpha1 with `count` objects, then flipped to store v1beta1."""
    plural = "widgets"
    kube.apply_crd(make_crd(group, plural, "Widget", [("v1alpha1", True, True)]))
    for ns in NAMESPACES:
        kube.ensure_namespace(ns)
    for i in range(count):
        ns = NAMESPACES[i % len(NAMESPACES)]
        kube.post(objects_path(group, "v1alpha1", plural, ns),
                  {"apiVersion": f"{group}/v1alpha1", "kind": "Widget",
                   "metadata": {"name": f"w-{i:03d}"}, "spec": {"size": i}})
    kube.apply_crd(make_crd(group, plural, "Widget", [("v1alpha1", True, False), ("v1beta1", True, True)]))
    return plural


def test_objects_stay_at_the_old_version_after_a_storage_flip(cluster, kube, group):
    plural = _seed_old_version(kube, group, 50)

    scan = scan_storage(cluster.etcd_url, group, plural)
    assert scan.counts == {f"{group}/v1alpha1": 50}

    listed = kube.get(objects_path(group, "v1beta1", plural))
    assert len(listed["items"]) == 50
    assert {item["apiVersion"] for item in listed["items"]} == {f"{group}/v1beta1"}

    crd = kube.get_crd(f"{plural}.{group}")
    assert crd["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]

    dropped = make_crd(group, plural, "Widget", [("v1beta1", True, True)])
    with pytest.raises(KubeError) as refused:
        kube.apply_crd(dropped)
    assert refused.value.status == 422
    assert "status.storedVersions[0]" in refused.value.message
    # kube-apiserver 1.37 wording (older releases said "must appear in spec.versions")
    assert 'Invalid value: "v1alpha1": missing from spec.versions' in refused.value.message
    assert "must remain in spec.versions until a storage migration" in refused.value.message
    # the refusal wrote nothing: still both versions served
    assert [v["name"] for v in kube.get_crd(f"{plural}.{group}")["spec"]["versions"]] == ["v1alpha1", "v1beta1"]


def test_an_object_written_after_the_flip_is_stored_at_the_new_version(cluster, kube, group):
    plural = _seed_old_version(kube, group, 50)
    path = objects_path(group, "v1beta1", plural, "alpha", "w-000")
    kube.delete(path)
    kube.post(objects_path(group, "v1beta1", plural, "alpha"),
              {"apiVersion": f"{group}/v1beta1", "kind": "Widget", "metadata": {"name": "w-000"}})

    scan = scan_storage(cluster.etcd_url, group, plural)
    assert scan.counts == {f"{group}/v1alpha1": 49, f"{group}/v1beta1": 1}
    assert scan.keys_not_at(f"{group}/v1alpha1") == [f"/registry/{group}/{plural}/alpha/w-000"]


def test_etcd_reader_pages_and_keeps_sibling_prefixes_apart(cluster, kube, group):
    # 1,203 keys cross the reader's 500-key pages; a sibling plural sharing the prefix must not leak in
    kube.apply_crd(make_crd(group, "things", "Thing", [("v1", True, True)], scope="Cluster"))
    kube.apply_crd(make_crd(group, "thingsx", "Thingx", [("v1", True, True)], scope="Cluster"))
    for i in range(1203):
        kube.post(objects_path(group, "v1", "things"), {"apiVersion": f"{group}/v1", "kind": "Thing",
                                                        "metadata": {"name": f"t-{i:04d}"}})
    kube.post(objects_path(group, "v1", "thingsx"), {"apiVersion": f"{group}/v1", "kind": "Thingx",
                                                     "metadata": {"name": "other"}})
    scan = scan_storage(cluster.etcd_url, group, "things")
    assert scan.total == 1203
    assert scan.counts == {f"{group}/v1": 1203}


def test_fleet_of_three_each_answers_on_its_own_context(binaries, tmp_path):
    fleet = start_fleet(3, tmp_path / "fleet", binaries)
    try:
        from kubernetes import config
        seen = set()
        for c in fleet.clusters:
            api = config.new_client_from_config(config_file=str(fleet.kubeconfig), context=c.context)
            try:
                from kubernetes import client
                version = client.VersionApi(api).get_code()
                assert version.git_version == "v1.37.2"
                # each cluster has its own etcd: a namespace made in one is absent in the others
                admin_kube(c).ensure_namespace(f"only-{c.name}")
                names = {n["metadata"]["name"] for n in admin_kube(c).get("/api/v1/namespaces")["items"]}
                assert f"only-{c.name}" in names
                assert not any(f"only-{o.name}" in names for o in fleet.clusters if o is not c)
                seen.add(c.etcd_url)
            finally:
                api.close()
        assert len(seen) == 3
    finally:
        fleet.stop()


def test_ha_pair_shares_data_and_has_two_identities(binaries, tmp_path):
    ha = start_ha_pair("ha", tmp_path / "ha", binaries)
    try:
        a, b = admin_kube(ha, 0), admin_kube(ha, 1)
        assert ha.apiservers[0].address == "127.0.0.1" and ha.apiservers[1].address == "127.0.0.2"
        a.ensure_namespace("made-on-a")
        assert b.get("/api/v1/namespaces/made-on-a")["metadata"]["name"] == "made-on-a"
        # distinct hostnames give each apiserver its own identity lease
        deadline = time.monotonic() + 60
        while True:
            leases = a.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                           labelSelector="apiserver.kubernetes.io/identity=kube-apiserver")["items"]
            if len(leases) == 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
        holders = sorted(lease["spec"]["holderIdentity"] for lease in leases)
        assert len(holders) == 2 and holders[0] != holders[1]
    finally:
        ha.stop()


def test_teardown_leaves_no_process_and_no_port(binaries, tmp_path):
    c = start_cluster("short-lived", tmp_path / "short", binaries)
    pids, ports = c.pids(), c.ports()
    assert all(port_is_listening("127.0.0.1", p) for p in ports)
    c.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not any(port_is_listening("127.0.0.1", p) for p in ports)

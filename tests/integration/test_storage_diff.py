"""What the re-store changes in etcd beyond apiVersion, on a real kube-apiserver + etcd.

The API shows objects with the storage version's defaults applied and unknown fields pruned already
when it reads them, so only etcd shows what a re-store persists or deletes. These tests predict it
with crd_storage_info (etcd_url), check the prediction against etcd before and after a real re-store,
and prove that the role stops before any write when stored fields would be deleted.
"""
from __future__ import annotations

import base64
import json
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.controlplane.etcd_reader import _prefix_end, keys_written_since, resource_prefix, scan_storage
from tests.controlplane.etcd_values import read_values
from tests.controlplane.kube import objects_path
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook, auth_args, run_module

REPO = Path(__file__).resolve().parents[2]
GW = REPO / "tests" / "data" / "fixtures" / "gateway-api"
GROUP = "gateway.networking.k8s.io"
GATEWAY_API_CRDS = [f"{p}.{GROUP}" for p in ("gatewayclasses", "gateways", "referencegrants")]
EXTRA_GATEWAYS = 23  # + my-gateway and prod-web from the examples: 25 Gateways, more than the sample of 20


def _crds(release: str) -> list[dict]:
    out = []
    for f in sorted((GW / release).glob("*.yaml")):
        doc = yaml.safe_load(f.read_text())
        doc.pop("status", None)  # a manifest's status block is never applied
        out.append(doc)
    return out


def _examples(release: str) -> list[dict]:
    docs = []
    for f in sorted((GW / "examples" / release).iterdir()):
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


def _create(kube, obj: dict, namespace: str | None) -> None:
    version = obj["apiVersion"].split("/")[1]
    plural = {"GatewayClass": "gatewayclasses", "Gateway": "gateways", "ReferenceGrant": "referencegrants"}[obj["kind"]]
    kube.post(objects_path(GROUP, version, plural, namespace), obj)


def _info(cluster, names, **extra) -> dict:
    res = run_module("crd_storage_info", dict(auth_args(cluster), names=names, **extra))
    assert not res.get("failed"), res
    return {c["name"]: c for c in res["crds"]}


def _key_revisions(etcd_url: str, group: str, plural: str) -> dict:
    """key -> mod_revision: unchanged means the object was not written."""
    prefix = resource_prefix(group, plural)
    body = json.dumps({"key": base64.b64encode(prefix).decode(), "keys_only": True,
                       "range_end": base64.b64encode(_prefix_end(prefix)).decode()}).encode()
    req = urllib.request.Request(etcd_url.rstrip("/") + "/v3/kv/range", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        kvs = json.loads(resp.read()).get("kvs", [])
    return {base64.b64decode(kv["key"]).decode(): int(kv["mod_revision"]) for kv in kvs}


@pytest.fixture()
def gateway_api(kube):
    yield
    for name in GATEWAY_API_CRDS:
        kube.delete_crd(name)


def _seed_gateway_api_v062(kube) -> None:
    for crd in _crds("v0.6.2"):
        kube.apply_crd(crd)
    kube.ensure_namespace("default")
    kube.ensure_namespace("gw-extra")
    examples = _examples("v0.8.1")  # at v1beta1, served by v0.6.2 (v0.6.2's own examples are not in the fixtures)
    for obj in examples:
        if obj["kind"] in ("GatewayClass", "Gateway", "ReferenceGrant"):
            _create(kube, obj, None if obj["kind"] == "GatewayClass" else "default")
    prod_web = next(o for o in examples if o["kind"] == "Gateway" and o["metadata"]["name"] == "prod-web")
    for i in range(EXTRA_GATEWAYS):
        _create(kube, dict(prod_web, metadata={"name": f"prod-web-{i:02d}"}), "gw-extra")


def test_gateway_api_v062_to_v110_reports_the_status_defaults_the_restore_persists(cluster, kube, gateway_api, tmp_path):
    _seed_gateway_api_v062(kube)
    names = GATEWAY_API_CRDS
    # raw values, straight from etcd: created with a status subresource, so no status is stored
    _rev, gateways = read_values(cluster.etcd_url, GROUP, "gateways")
    assert len(gateways) == 25 and sum(1 for v in gateways.values() if "status" in v) == 0
    assert scan_storage(cluster.etcd_url, GROUP, "referencegrants").counts == {f"{GROUP}/v1alpha2": 1}

    # apply v1.1.0 (storage v1 for GatewayClass/Gateway) without migrating
    for crd in _crds("v1.1.0"):
        kube.apply_crd(crd)
    before = _key_revisions(cluster.etcd_url, GROUP, "gateways")

    without = _info(cluster, names)
    assert {n: c["storage_diff"]["checked"] for n, c in without.items()} == dict.fromkeys(names, False)
    assert "no etcd_url" in without[f"gateways.{GROUP}"]["storage_diff"]["reason"]

    info = _info(cluster, names, etcd_url=cluster.etcd_url)
    gw, gc = info[f"gateways.{GROUP}"]["storage_diff"], info[f"gatewayclasses.{GROUP}"]["storage_diff"]
    rg = info[f"referencegrants.{GROUP}"]["storage_diff"]
    print("storage_diff gateways:", json.dumps(gw), "\ngatewayclasses:", json.dumps(gc), "\nreferencegrants:", json.dumps(rg))
    assert (gw["storage_version"], gw["keys"], gw["sampled"], gw["compared"]) == ("v1", 25, 20, 20)
    assert (gw["would_change"], gw["at_other_version"]) == (20, 20)
    assert gw["added"] == {".status.conditions": 20}
    assert (gw["removed"], gw["changed"], gw["skipped"]) == ({}, {}, {})
    assert gw["examples"][".status.conditions"] == ["default/my-gateway", "default/prod-web", "gw-extra/prod-web-00"]
    assert (gc["keys"], gc["compared"], gc["would_change"], gc["added"], gc["removed"]) == (1, 1, 1, {".status.conditions": 1}, {})
    # None conversion, stored at v1alpha2, storage v1beta1: only apiVersion changes
    assert (rg["keys"], rg["compared"], rg["at_other_version"], rg["would_change"]) == (1, 1, 1, 0)
    assert (rg["added"], rg["removed"], rg["changed"]) == ({}, {}, {})

    # the role in check mode shows it (and writes nothing)
    inv = _inventory(tmp_path, cluster, "gw-check", names, {})
    proc = ansible_playbook("--check", "-i", str(inv), str(REPO / "playbooks" / "fleet_audit.yml"),
                            "-e", json.dumps({"crd_upgrade_report_dir": str(tmp_path / "r")}))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert (f"gateways.{GROUP}: 20 of 25 stored objects compared at v1, 20 would change beyond apiVersion; "
            "adds (defaults persisted) .status.conditions (20 of 20)") in proc.stdout, proc.stdout[-4000:]
    assert _key_revisions(cluster.etcd_url, GROUP, "gateways") == before

    # the prediction holds: a real re-store persists the default in every Gateway, and nothing else changed
    res = run_module("crd_storage_migrate", dict(auth_args(cluster), names=[f"gateways.{GROUP}"]))
    assert not res.get("failed"), res
    _rev, after = read_values(cluster.etcd_url, GROUP, "gateways")
    assert sum(1 for v in after.values() if v.get("status", {}).get("conditions")) == 25
    assert [c["type"] for c in after["/registry/gateway.networking.k8s.io/gateways/default/prod-web"]["status"]["conditions"]] \
        == ["Accepted", "Programmed"]
    again = _info(cluster, [f"gateways.{GROUP}"], etcd_url=cluster.etcd_url)[f"gateways.{GROUP}"]["storage_diff"]
    assert (again["compared"], again["would_change"], again["added"], again["at_other_version"]) == (20, 0, {}, 0)


# --- a CRD whose next schema drops a field: the role stops before writing ---------------------------

LEGACY_EVERY = 3  # objects 0, 3, 6, ... carry spec.legacy: 10 of 30, 7 of the first 20 keys


def _strict_crd(group: str) -> dict:
    loose = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    strict = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "size": {"type": "integer"}, "mode": {"type": "string", "default": "Auto"}}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"pads.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "pads", "singular": "pad", "kind": "Pad", "listKind": "PadList"},
                     "versions": [{"name": "v1", "served": True, "storage": False, "schema": loose},
                                  {"name": "v2", "served": True, "storage": True, "schema": strict}]}}


def _inventory(tmp_path: Path, cluster, host: str, names: list[str], extra: dict) -> Path:
    hostvars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
                "crd_upgrade_crd_names": names, "crd_upgrade_etcd_url": cluster.etcd_url,
                "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}
    hostvars.update(extra)
    path = tmp_path / f"{host}.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {host: hostvars}}}}}))
    return path


def test_the_role_stops_before_writing_when_stored_fields_would_be_pruned(cluster, kube, group, tmp_path):
    crd = _strict_crd(group)
    v1_only = json.loads(json.dumps(crd))
    v1_only["spec"]["versions"] = [dict(v1_only["spec"]["versions"][0], storage=True)]
    kube.apply_crd(v1_only)
    kube.ensure_namespace("ns-a")
    for i in range(30):
        spec = {"size": i}
        if i % LEGACY_EVERY == 0:
            spec["legacy"] = f"kept-{i}"
        kube.post(objects_path(group, "v1", "pads", "ns-a"),
                  {"apiVersion": f"{group}/v1", "kind": "Pad", "metadata": {"name": f"pad-{i:03d}"}, "spec": spec})
    kube.apply_crd(crd)  # v2 (strict, spec.mode defaulted) becomes the storage version; no migration
    name = crd["metadata"]["name"]

    diff = _info(cluster, [name], etcd_url=cluster.etcd_url)[name]["storage_diff"]
    print("storage_diff pads:", json.dumps(diff))
    assert (diff["view"], diff["keys"], diff["sampled"], diff["compared"], diff["would_change"]) == ("dry-run", 30, 20, 20, 20)
    assert diff["removed"] == {".spec.legacy": 7}
    assert diff["added"] == {".spec.mode": 20}
    assert diff["examples"][".spec.legacy"] == ["ns-a/pad-000", "ns-a/pad-003", "ns-a/pad-006"]
    # why the dry-run and not a GET: a read of an object stored at v1 applies v1's defaults (none), so a GET
    # at v2 shows neither the pruned field nor the default the write will store
    got = kube.get(objects_path(group, "v2", "pads", "ns-a", "pad-000"))["spec"]
    assert "legacy" not in got and "mode" not in got

    before = _key_revisions(cluster.etcd_url, group, "pads")
    start_rev = max(before.values())
    proc = ansible_playbook("-i", str(_inventory(tmp_path, cluster, "prune-stop", [name], {})),
                            str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r1")}))
    assert proc.returncode != 0
    assert ("cluster prune-stop: the re-store would delete stored fields that the storage version's schema no "
            f"longer has, and a rollback could not bring them back: {name}: .spec.legacy (7 of 20) (e.g. ns-a/pad-000). "
            "Nothing was written. Set crd_upgrade_accept_pruning: true") in proc.stdout, proc.stdout[-4000:]
    assert _key_revisions(cluster.etcd_url, group, "pads") == before  # not one object written
    assert [k for k in keys_written_since(cluster.etcd_url, start_rev) if f"/{group}/" in k] == []
    assert kube.get_crd(name)["status"]["storedVersions"] == ["v1", "v2"]
    _rev, raw = read_values(cluster.etcd_url, group, "pads")
    assert sum(1 for v in raw.values() if "legacy" in v["spec"]) == 10
    reliability.record("storage diff: the re-store would prune stored fields (no crd_upgrade_accept_pruning)",
                       "role stopped in discover, 0 of 30 keys written", 30, len(raw), None)

    proc = ansible_playbook("-i", str(_inventory(tmp_path, cluster, "prune-accept", [name],
                                                 {"crd_upgrade_accept_pruning": True})),
                            str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r2")}))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "crd_upgrade_accept_pruning is true: the re-store deletes these stored fields for good" in proc.stdout
    scan = scan_storage(cluster.etcd_url, group, "pads")
    assert scan.counts == {f"{group}/v2": 30}
    _rev, raw = read_values(cluster.etcd_url, group, "pads")
    assert sum(1 for v in raw.values() if "legacy" in v["spec"]) == 0  # gone for good, as predicted
    assert sum(1 for v in raw.values() if v["spec"].get("mode") == "Auto") == 30
    assert kube.get_crd(name)["status"]["storedVersions"] == ["v2"]
    reliability.record("storage diff: pruning accepted (crd_upgrade_accept_pruning: true)",
                       "re-store ran; spec.legacy deleted from 10 of 30 keys as reported", 30, scan.total, True)


def test_a_loss_under_release_ns_schema_stops_the_role_before_the_flip(cluster, kube, group, tmp_path):
    """Release N moves the storage version to a strict v2 that prunes `spec.legacy`: the live v1 schema keeps it, so
    only release N's schema shows the loss. It is forecast in discover and the role stops before applying release N
    (before, the check after the flip stopped it with release N already applied)."""
    crd = _strict_crd(group)
    v1_only = json.loads(json.dumps(crd))
    v1_only["spec"]["versions"] = [dict(v1_only["spec"]["versions"][0], storage=True)]
    kube.apply_crd(v1_only)
    kube.ensure_namespace("ns-b")
    for i in range(6):
        body = {"apiVersion": f"{group}/v1", "kind": "Pad", "metadata": {"name": f"pad-{i:03d}"},
                "spec": {"size": i, "legacy": f"kept-{i}"}}
        kube.post(objects_path(group, "v1", "pads", "ns-b"), body)
    release_n = tmp_path / "release-n"
    release_n.mkdir()
    (release_n / "pads.yaml").write_text(yaml.safe_dump(crd))  # the flip to the strict v2
    name = crd["metadata"]["name"]
    before = _key_revisions(cluster.etcd_url, group, "pads")

    proc = ansible_playbook("-i", str(_inventory(tmp_path, cluster, "prune-flip", [name],
                                                 {"crd_upgrade_release_manifests": [str(release_n / "*.yaml")]})),
                            str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")}))
    assert proc.returncode != 0
    assert "Storage diff | compare a sample of stored objects with the API's view (before any change)" in proc.stdout
    assert "(after the storage flip)" not in proc.stdout
    assert (f"{name} (after release N, storage version v2): .spec.legacy (6 of 6) (e.g. ns-b/pad-000). "
            "Nothing was written.") in proc.stdout, proc.stdout[-4000:]
    live = kube.get_crd(name)
    assert live["status"]["storedVersions"] == ["v1"] and [v["name"] for v in live["spec"]["versions"]] == ["v1"]
    assert _key_revisions(cluster.etcd_url, group, "pads") == before  # no object written
    _rev, raw = read_values(cluster.etcd_url, group, "pads")
    assert sum(1 for v in raw.values() if "legacy" in v["spec"]) == 6
    reliability.record("storage diff forecast for release N (strict schema prunes a field)",
                       "role stopped in discover, release N not applied; 0 of 6 keys written", 6, len(raw), None)

"""Release N stops serving a version that a Flux source and kubectl still declare: nothing breaks, and the source is
named.

cert-manager v1.6 lists its legacy versions with `served: false` while objects are still stored at them. To a client
that version is gone the moment release N is applied, before any check of release N+1. Here release N lists
v1alpha1 with `served: false` (v1beta1 the new storage version) and release N+1 drops v1alpha1. The objects were
applied at v1alpha1 by Flux's apply library (`fluxcd/pkg/ssa`, labelled with a Kustomization whose real CRD and
inventory kustomize-controller would write) and by client-side `kubectl apply`.

1. The role at defaults: the clients are looked for before release N; release N is applied with v1alpha1 still
   served (the console and `crd_upgrade_result.kept_served` say so), the objects are re-stored and trimmed, release
   N+1 is held back naming the Kustomization, and each client's unchanged v1alpha1 re-apply still works.
2. The sources move to v1beta1; the rerun applies release N+1 with nothing accepted, and both clients apply again.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.clients import Flux, Kubectl, Kustomizations, kustomization_crd
from tests.controlplane import etcd_reader
from tests.controlplane.kube import make_crd
from tests.integration.modrun import ansible_playbook

REPO = Path(__file__).resolve().parents[2]
NS = "unserved"
KUSTOMIZATION = "flux-system/unserved-apps"
COUNTS = {"flux": 5, "csa": 3}
SCHEMA = {"openAPIV3Schema": {"type": "object", "properties": {
    "spec": {"type": "object", "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}}}}}


def crd(group: str, versions: list[tuple[str, bool, bool]]) -> dict:
    doc = make_crd(group, "widgets", "Widget", versions)
    for v in doc["spec"]["versions"]:
        v["schema"] = SCHEMA
    return doc


def docs(group: str, client: str, version: str) -> list[dict]:
    return [{"apiVersion": f"{group}/{version}", "kind": "Widget",
             "metadata": {"name": f"{client}-{i}", "namespace": NS}, "spec": {"size": i, "color": "blue"}}
            for i in range(COUNTS[client])]


def apply_all(group: str, flux: Flux, kubectl: Kubectl, kustomizations: Kustomizations, version: str) -> list[str]:
    """Both sources apply at ``version``; what failed (the Kustomization's status follows Flux's apply)."""
    problems = []
    res = flux.apply(docs(group, "flux", version), kustomization=KUSTOMIZATION)
    if res.ok:
        kustomizations.reconciled(KUSTOMIZATION, res.inventory, f"main@sha1:{version}")
    else:
        problems.append(f"flux at {version}: {res.error}")
    out = kubectl.apply(docs(group, "csa", version))
    if not out.ok:
        problems.append(f"kubectl at {version}: {out.stderr.strip()[-300:]}")
    return problems


def run_role(cluster, tmp_path: Path, group: str, **host_vars) -> tuple[str, dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    release, target = tmp_path / "release.yaml", tmp_path / "target.yaml"
    release.write_text(yaml.safe_dump(crd(group, [("v1alpha1", False, False), ("v1beta1", True, True)])))
    target.write_text(yaml.safe_dump(crd(group, [("v1beta1", True, True)])))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(release)], "crd_upgrade_target_manifests": [str(target)],
            "crd_upgrade_crd_names": [f"widgets.{group}"], "crd_upgrade_settle_seconds": 0,
            "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0, "crd_upgrade_preflight": False,
            **host_vars}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {
        "unserved-cluster": host}}}}}))
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")}))
    assert proc.returncode == 0, proc.stdout[-6000:]
    report = json.loads(next((tmp_path / "r" / "latest").glob("*.json")).read_text())
    return proc.stdout, report["clusters"][0]


def served(kube, name: str) -> dict[str, bool]:
    return {v["name"]: v["served"] for v in kube.get_crd(name)["spec"]["versions"]}


def test_a_version_release_n_stops_serving_stays_served_while_a_source_declares_it(cluster, kube, group, tmp_path):
    name = f"widgets.{group}"
    context = cluster.contexts()[0]
    flux, kubectl = Flux(cluster.kubeconfig, context), Kubectl(cluster.kubeconfig, context)
    kube.apply_crd(kustomization_crd())
    kustomizations = Kustomizations(kube)
    kustomizations.create(KUSTOMIZATION, "./apps")
    kube.ensure_namespace(NS)
    kube.apply_crd(crd(group, [("v1alpha1", True, True)]))
    assert not apply_all(group, flux, kubectl, kustomizations, "v1alpha1")

    stdout, result = run_role(cluster, tmp_path / "first", group)
    problems = []
    if served(kube, name) != {"v1alpha1": True, "v1beta1": True}:
        problems.append(f"release N stopped serving v1alpha1 under its clients: {served(kube, name)}")
    if result["status"] != "held back" or result.get("kept_served") != {name: ["v1alpha1"]}:
        problems.append(f"status {result['status']}, kept_served {result.get('kept_served')}")
    if "applied with v1alpha1 still served" not in stdout:
        problems.append("the console does not say release N is applied with v1alpha1 still served")
    held = " ".join(c for h in result["held_back"] if h["crd"] == name for c in h["clients"])
    for words in (f"source: Flux Kustomization {KUSTOMIZATION} (GitRepository flux-system/repo, path ./apps",
                  f"applier kustomize-controller (declares at v1alpha1) on {COUNTS['flux']} objects",
                  f"(declares (client-side apply) at v1alpha1) on {COUNTS['csa']} objects"):
        if words not in held:
            problems.append(f"release N+1 held back without naming {words!r}: {held}")
    crd_now = kube.get_crd(name)
    scan = etcd_reader.scan_storage(cluster.etcd_url, group, "widgets")
    if crd_now["status"]["storedVersions"] != ["v1beta1"] or dict(scan.counts) != {f"{group}/v1beta1": sum(COUNTS.values())}:
        problems.append(f"not re-stored and trimmed: {crd_now['status']['storedVersions']}, etcd {dict(scan.counts)}")
    problems += [f"unchanged re-apply after release N: {p}" for p in apply_all(group, flux, kubectl, kustomizations,
                                                                               "v1alpha1")]
    assert not problems, "\n".join(problems) + "\n" + stdout[-3000:]

    # the sources move; the rerun applies release N+1 with nothing accepted
    assert not apply_all(group, flux, kubectl, kustomizations, "v1beta1")
    stdout, result = run_role(cluster, tmp_path / "second", group)
    assert result["status"] == "ok" and served(kube, name) == {"v1beta1": True}, (result["status"], stdout[-3000:])
    assert not apply_all(group, flux, kubectl, kustomizations, "v1beta1")
    scan = etcd_reader.scan_storage(cluster.etcd_url, group, "widgets")
    assert scan.total == sum(COUNTS.values()) and dict(scan.counts) == {f"{group}/v1beta1": scan.total}


def test_without_clients_release_n_stops_serving_and_the_runs_own_listing_is_no_client(cluster, kube, group, tmp_path):
    # objects created once (a POST long before the run: a leftover, no client) and the request counters read over a
    # window: the check lists at v1beta1, so its own LIST does not count as a request at v1alpha1 (listed at the
    # storage version, still v1alpha1 before release N, it did, and kept v1alpha1 served for nobody)
    name = f"widgets.{group}"
    kube.ensure_namespace(NS)
    kube.apply_crd(crd(group, [("v1alpha1", True, True)]))
    for doc in docs(group, "csa", "v1alpha1"):
        kube.request("POST", f"/apis/{group}/v1alpha1/namespaces/{NS}/widgets", doc, query={"fieldManager": "seed"})
    stdout, result = run_role(cluster, tmp_path, group, crd_upgrade_writers_window=3)
    assert result.get("kept_served") == {} and served(kube, name) == {"v1beta1": True}, (result, stdout[-3000:])
    assert result["status"] == "ok", stdout[-3000:]

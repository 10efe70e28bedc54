"""Flux's Kustomization as kustomize-controller keeps it: its real CRD, and the status it writes after a reconcile.

The CRD comes from kustomize-controller's own module (`config/crd/bases`), fetched through the Go module proxy into
Go's module cache, so the tests serve exactly the schema Flux ships. The status is what the controller writes after
each reconcile: `status.inventory.entries[]` from the change set of its apply (`internal/inventory/inventory.go`,
`AddChangeSet`; `Flux.apply` returns those entries as `FluxResult.inventory`) and `status.lastAppliedRevision`.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import yaml

# the newest kustomize-controller whose go.mod the machine's Go (1.26) accepts
KUSTOMIZE_CONTROLLER = "github.com/fluxcd/kustomize-controller"
KUSTOMIZE_CONTROLLER_VERSION = "v1.9.6"
CRD_FILE = "config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml"
GROUP = "kustomize.toolkit.fluxcd.io"


def kustomization_crd(version: str = KUSTOMIZE_CONTROLLER_VERSION) -> dict:
    """The Kustomization CRD of kustomize-controller ``version``, from Go's module cache (downloaded once)."""
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-modcacherw")
    with tempfile.TemporaryDirectory() as empty:  # outside any go.mod
        proc = subprocess.run(["go", "mod", "download", "-json", f"{KUSTOMIZE_CONTROLLER}@{version}"], cwd=empty,
                              env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        where = json.loads(proc.stdout)
    except ValueError:
        raise RuntimeError(f"go mod download {KUSTOMIZE_CONTROLLER}@{version}: {proc.stderr.strip()}") from None
    if where.get("Error") or not where.get("Dir"):
        raise RuntimeError(f"go mod download {KUSTOMIZE_CONTROLLER}@{version}: {where.get('Error')}")
    return yaml.safe_load((Path(where["Dir"]) / CRD_FILE).read_text())


class Kustomizations:
    """Kustomization objects on one cluster (through a tests.controlplane.kube client), written as the controller
    writes them."""

    def __init__(self, kube, source: str = "repo"):
        self.kube = kube
        self.source = source  # the GitRepository every Kustomization here reads, in its own namespace

    def path(self, ref: str, subresource: str = "") -> str:
        namespace, name = ref.split("/", 1)
        return f"/apis/{GROUP}/v1/namespaces/{namespace}/kustomizations/{name}" + (f"/{subresource}" if subresource else "")

    def create(self, ref: str, path: str) -> None:
        namespace, name = ref.split("/", 1)
        self.kube.ensure_namespace(namespace)
        self.kube.post(f"/apis/{GROUP}/v1/namespaces/{namespace}/kustomizations", {
            "apiVersion": f"{GROUP}/v1", "kind": "Kustomization", "metadata": {"name": name, "namespace": namespace},
            "spec": {"interval": "10m", "path": path, "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": self.source}}})

    def reconciled(self, ref: str, inventory: list[dict], revision: str) -> dict:
        """The status kustomize-controller writes after a reconcile whose apply gave ``inventory``."""
        return self.kube.merge_patch(self.path(ref, "status"), {"status": {
            "inventory": {"entries": inventory}, "lastAppliedRevision": revision,
            "lastAttemptedRevision": revision}})

"""Existing-cluster mode: run the tests against a cluster you already have (kind, a lab cluster).

    CRDOPS_KUBECONFIG=~/.kube/config CRDOPS_CONTEXT=kind-kind [CRDOPS_ETCD_URL=http://127.0.0.1:2379] make test

Nothing is built or started. The identity in the kubeconfig needs cluster-admin (tests create CRDs,
namespaces, RBAC and admission objects). Every proof reads etcd, so without CRDOPS_ETCD_URL (an etcd
client URL reachable without TLS client auth, e.g. through `kubectl port-forward` of a kind etcd) the
tests that read etcd fail with a message saying so instead of passing without proof.
"""
from __future__ import annotations

import base64
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .kube import Kube


@dataclass
class ExistingApiserver:
    url: str


@dataclass
class ExistingCluster:
    kubeconfig: Path
    context: str
    etcd: str | None
    name: str = "existing"
    _files: list[str] = field(default_factory=list)

    @property
    def etcd_url(self) -> str:
        if not self.etcd:
            raise RuntimeError("this test reads etcd: set CRDOPS_ETCD_URL for the existing cluster")
        return self.etcd

    @property
    def pki(self):
        import pytest
        pytest.skip("existing-cluster mode: this test signs certificates with the cluster CA's key, which only "
                    "the built control plane has")

    def contexts(self) -> list[str]:
        return [self.context]

    def _entry(self) -> tuple[dict, dict]:
        doc = yaml.safe_load(self.kubeconfig.read_text())
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == self.context)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        return cluster, user

    @property
    def server(self) -> str:
        return self._entry()[0]["server"]

    @property
    def apiservers(self) -> list[ExistingApiserver]:
        return [ExistingApiserver(self.server)]

    def _file(self, entry: dict, key: str) -> str | None:
        if entry.get(key):
            return os.path.expanduser(entry[key])
        data = entry.get(f"{key}-data")
        if not data:
            return None
        fd, path = tempfile.mkstemp(prefix="crdops-existing-")
        os.write(fd, base64.b64decode(data))
        os.close(fd)
        self._files.append(path)
        return path

    def kube(self) -> Kube:
        cluster, user = self._entry()
        return Kube(cluster["server"], self._file(cluster, "certificate-authority"),
                    self._file(user, "client-certificate"), self._file(user, "client-key"), token=user.get("token"))

    def stop(self) -> None:
        for path in self._files:
            os.unlink(path)


def existing_cluster_from_env() -> ExistingCluster | None:
    kubeconfig = os.environ.get("CRDOPS_KUBECONFIG")
    if not kubeconfig:
        return None
    path = Path(kubeconfig).expanduser()
    context = os.environ.get("CRDOPS_CONTEXT") or yaml.safe_load(path.read_text())["current-context"]
    return ExistingCluster(path, context, os.environ.get("CRDOPS_ETCD_URL"))

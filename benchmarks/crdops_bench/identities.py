"""ServiceAccounts for the contenders and the observers, with tokens from the TokenRequest API; and the admin
certificate as the second observer.

The admin certificate is in group system:masters, which API Priority and Fairness exempts: a migration run
as admin is never queued, and neither is an observer run as admin. The migrating contenders run as one
ServiceAccount and the first observer as another; both fall into the apiserver's default `service-accounts`
FlowSchema (priority level `workload-low`) as distinct flows, which is where a real migration and a real
workload meet. The second observer runs as admin: what a client that APF never queues sees (the apiserver's
CPU and etcd alone), beside what a queued one sees.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

NAMESPACE = "crdops-bench"
MIGRATOR, PROBE = "bench-migrator", "bench-probe"
TOKEN_SECONDS = 4 * 3600


@dataclass(frozen=True)
class Identity:
    name: str
    namespace: str
    server: str
    ca_cert: str
    token: str = field(repr=False)

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    def probe_auth(self) -> dict:
        """The observer's credentials (probe.py)."""
        return {"token": self.token}

    def engine_auth(self) -> dict:
        """ConnectionOptions for the engine (and crd_storage_migrate): host + api_key + ca_cert."""
        return {"host": self.server, "api_key": self.token, "ca_cert": self.ca_cert}

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig with this token, for kubectl and kube-controller-manager."""
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": self.name,
               "clusters": [{"name": "bench", "cluster": {"server": self.server, "certificate-authority": self.ca_cert}}],
               "users": [{"name": self.name, "user": {"token": self.token}}],
               "contexts": [{"name": self.name, "context": {"cluster": "bench", "user": self.name}}]}
        path.write_text(json.dumps(doc))
        path.chmod(0o600)
        return path


@dataclass(frozen=True)
class CertIdentity:
    """A client certificate: the admin's (system:masters) for the APF-exempt observer."""
    name: str
    server: str
    ca_cert: str
    cert_file: str
    key_file: str
    user: str = "admin (client certificate, group system:masters)"

    def probe_auth(self) -> dict:
        return {"cert_file": self.cert_file, "key_file": self.key_file}


def admin(cluster) -> CertIdentity:
    """The cluster's admin certificate (tests/controlplane/pki.py): APF exempts it."""
    pki = cluster.pki
    return CertIdentity("admin", cluster.server, str(pki.ca_cert), str(pki.admin_cert), str(pki.admin_key))


def _ensure(kube, path: str, body: dict) -> None:
    from tests.controlplane.kube import KubeError

    try:
        kube.post(path, body)
    except KubeError as exc:
        if exc.status != 409:
            raise


def service_account(kube, server: str, ca_cert: str, name: str, cluster_role: str | None = None,
                    role_rules: list | None = None) -> Identity:
    """A ServiceAccount in NAMESPACE bound to `cluster_role` (cluster-wide) or to `role_rules` (a Role in
    NAMESPACE), and a token for it."""
    kube.ensure_namespace(NAMESPACE)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]
    _ensure(kube, f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    if cluster_role:
        _ensure(kube, f"{rbac}/clusterrolebindings",
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": f"{name}-{cluster_role}"}, "subjects": subject,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role}})
    if role_rules:
        _ensure(kube, f"{rbac}/namespaces/{NAMESPACE}/roles",
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name},
                 "rules": role_rules})
        _ensure(kube, f"{rbac}/namespaces/{NAMESPACE}/rolebindings",
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
                 "subjects": subject, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}})
    token = kube.post(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{name}/token",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": TOKEN_SECONDS}})["status"]["token"]
    return Identity(name, NAMESPACE, server, ca_cert, token)


def migrator(kube, server: str, ca_cert: str) -> Identity:
    """Every migrating contender's identity. cluster-admin because kube-controller-manager (garbage collector
    and migrator) needs to list everything; it is a binding, not system:masters, so APF does not exempt it."""
    return service_account(kube, server, ca_cert, MIGRATOR, cluster_role="cluster-admin")


def probe(kube, server: str, ca_cert: str) -> Identity:
    """The probe's identity: read ConfigMaps in NAMESPACE, nothing else."""
    return service_account(kube, server, ca_cert, PROBE,
                           role_rules=[{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])

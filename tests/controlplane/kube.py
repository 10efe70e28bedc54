"""A small raw-JSON Kubernetes client for test setup and assertions (not the product's client).

Tests use it to build the situation (CRDs, objects, storage flips) so that what the collection does is
checked by something independent of the collection's own code.
"""
from __future__ import annotations

import json
import time
import urllib.parse
from pathlib import Path

import urllib3


def status_conditions(obj: dict) -> dict:
    """An object's status conditions, type -> status ("True", "False", "Unknown")."""
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


class KubeError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: dict | str):
        self.status = status
        self.body = body
        message = body.get("message", body) if isinstance(body, dict) else body
        self.message = str(message)
        super().__init__(f"{method} {path} -> HTTP {status}: {self.message}")


class Kube:
    def __init__(self, server: str, ca_cert: Path, client_cert: Path | None = None,
                 client_key: Path | None = None, token: str | None = None, maxsize: int = 16):
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.pool = urllib3.PoolManager(
            maxsize=maxsize, cert_reqs="CERT_REQUIRED", ca_certs=str(ca_cert),
            cert_file=str(client_cert) if client_cert else None,
            key_file=str(client_key) if client_key else None,
            retries=False, timeout=urllib3.Timeout(connect=5, read=60))

    def request(self, method: str, path: str, body=None, content_type: str = "application/json",
                query: dict | None = None, ok=(200, 201, 202)) -> dict:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = dict(self.headers, Accept="application/json")
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        deadline = time.monotonic() + 60
        while True:
            resp = self.pool.request(method, url, body=data, headers=headers)
            # 429 right after a CRD change: "storage is (re)initializing" while the watch cache refills
            if resp.status != 429 or time.monotonic() > deadline:
                break
            time.sleep(min(float(resp.headers.get("Retry-After", "1")), 1.0))
        try:
            parsed = json.loads(resp.data) if resp.data else {}
        except ValueError:
            parsed = resp.data.decode(errors="replace")
        if resp.status not in ok:
            raise KubeError(method, path, resp.status, parsed)
        return parsed

    def get(self, path: str, **query) -> dict:
        return self.request("GET", path, query=query or None)

    def post(self, path: str, body) -> dict:
        return self.request("POST", path, body)

    def put(self, path: str, body) -> dict:
        return self.request("PUT", path, body)

    def merge_patch(self, path: str, body) -> dict:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def delete(self, path: str) -> dict:
        return self.request("DELETE", path)

    # --- conveniences -------------------------------------------------------------------------
    def ensure_namespace(self, name: str) -> None:
        try:
            self.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except KubeError as exc:
            if exc.status != 409:
                raise

    def crd_path(self, name: str) -> str:
        return f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"

    def get_crd(self, name: str) -> dict:
        return self.get(self.crd_path(name))

    def apply_crd(self, crd: dict, timeout: float = 30.0) -> dict:
        """Create or replace a CRD, then wait until it is Established and its storage is in effect."""
        name = crd["metadata"]["name"]
        try:
            current = self.get_crd(name)
            body = json.loads(json.dumps(crd))
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            # like server-side apply, keep annotations other managers set (e.g. a migration record)
            merged = dict(current["metadata"].get("annotations") or {})
            merged.update(body["metadata"].get("annotations") or {})
            body["metadata"]["annotations"] = merged
            self.put(self.crd_path(name), body)
        except KubeError as exc:
            if exc.status != 404:
                raise
            self.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        established = self.wait_established(name, timeout)
        # the new storage is in use once a list at the storage version is served (429 is retried)
        spec = established["spec"]
        storage = next(v["name"] for v in spec["versions"] if v["storage"])
        if not any(v["served"] for v in spec["versions"] if v["storage"]):
            return established  # nothing to probe: the storage version has no endpoint
        path = objects_path(spec["group"], storage, spec["names"]["plural"])
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.get(path, limit=1)
                return established
            except KubeError as exc:  # 404 "page not found" until the handler for a new version is up
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def wait_established(self, name: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            crd = self.get_crd(name)
            conditions = status_conditions(crd)
            if conditions.get("Established") == "True":
                return crd
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not Established: {conditions}")
            time.sleep(0.1)

    def wait_api_services(self, name: str, timeout: float = 30.0) -> None:
        """Wait until every served version of CRD ``name`` has its APIService, marked Available. The apiservers
        register them in the background after the CRD changes: writes of the control plane's own, which a test
        that compares etcd revisions around a module run must not see land after it took its revision."""
        crd = self.get_crd(name)
        wanted = [f"{v['name']}.{crd['spec']['group']}" for v in crd["spec"]["versions"] if v.get("served")]
        deadline = time.monotonic() + timeout
        for service in wanted:
            while not self._api_service_available(service):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"APIService {service} of CRD {name} not registered and Available")
                time.sleep(0.1)

    def _api_service_available(self, service: str) -> bool:
        try:
            body = self.get(f"/apis/apiregistration.k8s.io/v1/apiservices/{service}")
        except KubeError as exc:
            if exc.status != 404:
                raise
            return False
        return status_conditions(body).get("Available") == "True"

    def delete_crd(self, name: str, timeout: float = 90.0) -> None:
        """Delete a CRD and wait until it is gone: the apiserver first deletes every object of it (a finalizer), and
        a CRD of the same name cannot be created meanwhile (HTTP 409 "already exists")."""
        try:
            self.delete(self.crd_path(name))
        except KubeError as exc:
            if exc.status != 404:
                raise
        deadline = time.monotonic() + timeout
        while True:
            try:
                crd = self.get_crd(name)
            except KubeError as exc:
                if exc.status == 404:
                    return
                raise
            if time.monotonic() > deadline:
                conditions = (crd.get("status") or {}).get("conditions") or []
                raise TimeoutError(f"CRD {name} still there {timeout:.0f} s after its deletion: {conditions}")
            time.sleep(0.2)


def objects_path(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None) -> str:
    path = f"/apis/{group}/{version}"
    if namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    if name:
        path += f"/{name}"
    return path


def make_crd(group: str, plural: str, kind: str, versions: list[tuple[str, bool, bool]],
             scope: str = "Namespaced", labels: dict | None = None) -> dict:
    """A CRD whose versions are (name, served, storage); schemas accept any fields."""
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": labels or {}},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
                 "versions": [{"name": v, "served": served, "storage": storage, "schema": schema}
                              for v, served, storage in versions]},
    }

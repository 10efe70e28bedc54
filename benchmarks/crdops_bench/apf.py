"""The shipped API Priority and Fairness objects (docs/rbac/), applied for one contender (`--apf`).

The FlowSchema's subject is set to the benchmark's migrator ServiceAccount; that the apiserver really
classifies its requests under it is checked from the `X-Kubernetes-PF-FlowSchema-UID` response header
before the contender starts, and the objects are deleted afterwards.
"""
from __future__ import annotations

import contextlib
import time

import urllib3
import yaml

from . import REPO
from .probe import FLOW_SCHEMA_HEADER

BASE = "/apis/flowcontrol.apiserver.k8s.io/v1"


def manifests(identity) -> tuple[dict, dict]:
    level = yaml.safe_load((REPO / "docs" / "rbac" / "prioritylevel.yaml").read_text())
    schema = yaml.safe_load((REPO / "docs" / "rbac" / "flowschema.yaml").read_text())
    for rule in schema["spec"]["rules"]:
        rule["subjects"] = [{"kind": "ServiceAccount",
                             "serviceAccount": {"name": identity.name, "namespace": identity.namespace}}]
    return level, schema


def classified_uid(identity) -> str:
    """The FlowSchema UID the apiserver names for a request of `identity`."""
    pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=identity.ca_cert, retries=False)
    resp = pool.request("GET", identity.server + "/apis", headers={"Authorization": f"Bearer {identity.token}"})
    pool.clear()
    return resp.headers.get(FLOW_SCHEMA_HEADER, "")


@contextlib.contextmanager
def shipped(kube, identity, timeout: float = 30):
    """Apply prioritylevel.yaml + flowschema.yaml for `identity`; yields once its requests match them."""
    level, schema = manifests(identity)
    kube.post(f"{BASE}/prioritylevelconfigurations", level)
    created = kube.post(f"{BASE}/flowschemas", schema)
    try:
        deadline = time.monotonic() + timeout
        while classified_uid(identity) != created["metadata"]["uid"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the apiserver does not classify the migrator under the shipped FlowSchema")
            time.sleep(0.2)
        yield created["metadata"]["name"]
    finally:
        kube.delete(f"{BASE}/flowschemas/{schema['metadata']['name']}")
        kube.delete(f"{BASE}/prioritylevelconfigurations/{level['metadata']['name']}")

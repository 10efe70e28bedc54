"""Print, as JSON, what etcd holds for the fixture CRDs of every cluster in a `tests.controlplane up` dir.

Output: {cluster: {crd: {"counts": {apiVersion: n}, "total": n}}}. Used by the molecule verify playbooks:
the proof that objects were migrated is read from etcd, not from the apiserver.
"""
import json
import sys
from pathlib import Path

from tests.controlplane.etcd_reader import scan_storage

CRDS = [("toolhive.stacklok.dev", p) for p in ("mcpgroups", "mcpservers", "mcptoolconfigs", "mcpserverentries", "mcpoidcconfigs")]
CRDS.append(("gateway.networking.k8s.io", "referencegrants"))

state = json.loads((Path(sys.argv[1]) / "state.json").read_text())
extra = [tuple(x.split("/", 1)) for x in sys.argv[2:]]
out = {}
for cluster in state["clusters"]:
    out[cluster["name"]] = {}
    for group, plural in CRDS + extra:
        scan = scan_storage(cluster["etcd"], group, plural)
        out[cluster["name"]][f"{plural}.{group}"] = {"counts": dict(scan.counts), "total": scan.total}
print(json.dumps(out))

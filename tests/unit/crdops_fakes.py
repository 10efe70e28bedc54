# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""An in-memory apiserver good enough for engine unit tests (faults a real server cannot produce).

Mimics: CRD GET/LIST/merge-PATCH (annotations, resourceVersion precondition), CRD /status PATCH,
metadata-only LIST with limit/continue/remainingItemCount, empty merge PATCH of objects that bumps
resourceVersion only when the stored version differs from the storage version (GuaranteedUpdate).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from datetime import datetime, timezone
from email.utils import formatdate

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import ApiResponse

CRD_PREFIX = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/"


def resp(status, body=None, headers=None):
    data = b"" if body is None else json.dumps(body).encode()
    return ApiResponse(status, headers or {}, data)


def status(code, message, reason="", continue_token=None, details=None):
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
            "reason": reason, "code": code, "metadata": {}}
    if continue_token:
        body["metadata"]["continue"] = continue_token
    if details is not None:
        body["details"] = details
    return resp(code, body)


def not_found(group, plural, name):
    """The Status a real apiserver answers for a missing custom object (details name it)."""
    return status(404, '%s.%s "%s" not found' % (plural, group, name), "NotFound",
                  details={"name": name, "group": group, "kind": plural})


class Clock:
    """A monotonic clock and its sleep, driven by the test: ``clock()`` reads ``t``; ``clock.sleep(s)`` records ``s``
    in ``sleeps`` and moves ``t`` on by it."""

    def __init__(self, t=100.0):
        self.t = t
        self.sleeps = []

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.sleeps.append(s)
        self.t += s


def make_crd(name="crontabs.stable.example.com", versions=(("v1", True, False), ("v2", True, True)),
             stored=("v1", "v2"), scope="Namespaced", generation=2, conversion=None, annotations=None,
             labels=None):
    plural, group = name.split(".", 1)
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "generation": generation, "resourceVersion": "10", "uid": "u-" + name,
                     "annotations": dict(annotations or {}), "labels": dict(labels or {}),
                     # the spec's last change (the storage flip), long before the fake's clock: no drain to wait
                     "managedFields": [{"manager": "kubectl", "operation": "Apply", "time": "2026-01-01T00:00:00Z",
                                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"group": group, "scope": scope,
                 "names": {"plural": plural, "kind": plural.capitalize()[:-1]},
                 "versions": [{"name": n, "served": s, "storage": st} for n, s, st in versions],
                 "conversion": conversion or {"strategy": "None"}},
        "status": {"storedVersions": list(stored)},
    }


class FakeCluster:
    cluster_label = "test-cluster"

    def __init__(self):
        self.crds = {}
        self.objects = {}  # crd name -> {key: {"ns", "name", "rv", "stored"}}
        self._rv = 1000
        self.lock = threading.Lock()
        self.calls = []
        self.hooks = []  # fn(method, path, query, body) -> ApiResponse | None
        self.object_writes = 0
        self.crd_writes = 0
        self.base_url = "https://fake.invalid"
        self.stale_storage_view = {}  # crd name -> storage version this "apiserver" still believes in
        # -- control plane topology and Events (HA barrier, Events on CRDs) --
        self.identity_leases = [("apiserver-fake", 5.0)]  # (name, seconds since renewTime); None: HTTP 403
        self.endpoint_slices = []  # items of discovery.k8s.io/v1 EndpointSlice for default/kubernetes
        self.endpoints_by_url = {}  # url -> transport for_endpoint() hands out (default: this fake itself)
        self.now = 1796099600.0  # the fake apiserver's wall clock (HTTP Date header)
        self.events = []  # bodies of posted core/v1 Events
        self.leases = {}  # (namespace, name) -> coordination.k8s.io/v1 Lease (pass leases, pass_lease.py)

    # -- setup -----------------------------------------------------------------
    def next_rv(self):
        self._rv += 1
        return str(self._rv)

    def add_crd(self, **kw):
        crd = make_crd(**kw)
        self.crds[crd["metadata"]["name"]] = crd
        self.objects.setdefault(crd["metadata"]["name"], {})
        return crd

    def add_objects(self, crd_name, count, namespaces=("default",), stored="v1"):
        objs = self.objects[crd_name]
        cluster_scoped = self.crds[crd_name]["spec"]["scope"] == "Cluster"
        for i in range(count):
            ns = "" if cluster_scoped else namespaces[i % len(namespaces)]
            name = "obj-%05d" % i
            key = "%s/%s" % (ns, name) if ns else name
            objs[key] = {"ns": ns, "name": name, "rv": self.next_rv(), "stored": stored}

    def storage_of(self, crd_name):
        for v in self.crds[crd_name]["spec"]["versions"]:
            if v["storage"]:
                return v["name"]

    def stored_versions_on_disk(self, crd_name):
        return sorted(set(o["stored"] for o in self.objects[crd_name].values()))

    # -- transport protocol ------------------------------------------------------
    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        q = dict(query or [])
        with self.lock:
            self.calls.append((method, path, q))
        for hook in list(self.hooks):
            r = hook(method, path, q, body)
            if r is not None:
                return r
        with self.lock:
            answer = self._control_plane(method, path, body) or self._route(method, path, q, body, content_type)
        if isinstance(answer.headers, dict):  # every apiserver answer carries its clock (drain window, Leases)
            answer.headers.setdefault("Date", formatdate(self.now, usegmt=True))
        return answer

    def for_endpoint(self, url, new_connection_per_request=False):
        return self.endpoints_by_url.get(url, self)

    def _control_plane(self, method, path, body):
        """Identity Leases, the kubernetes EndpointSlice and Events; None for any other path."""
        date = {"Date": formatdate(self.now, usegmt=True)}
        if path.startswith(LEASES) and not (method == "GET" and path.endswith("/leases")):
            answer = self._lease(method, path, body, date)
            answer.headers.update(date)  # every apiserver answer carries Date (the pass Lease's clock)
            return answer
        if path == "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases":
            if self.identity_leases is None:
                return status(403, 'leases.coordination.k8s.io is forbidden: User "x" cannot list resource '
                              '"leases" in API group "coordination.k8s.io" in the namespace "kube-system"',
                              "Forbidden")
            items = [{"metadata": {"name": n, "namespace": "kube-system"},
                      "spec": {"holderIdentity": n + "_uuid", "leaseDurationSeconds": 3600,
                               "renewTime": _micro_time(self.now - age)}} for n, age in self.identity_leases]
            return resp(200, {"kind": "LeaseList", "items": items}, date)
        if path == "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices":
            return resp(200, {"kind": "EndpointSliceList", "items": list(self.endpoint_slices)}, date)
        if path == "/version":
            return resp(200, {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}, date)
        if path == "/api/v1/namespaces/default/events" and method == "POST":
            self.events.append(json.loads(body))
            return resp(201, self.events[-1], date)
        return None

    def _lease(self, method, path, body, date):
        """Named Leases with create (409 AlreadyExists), GET, PUT and DELETE (resourceVersion preconditions)."""
        ns, _leases, name = (path[len(LEASES):].split("/") + [""])[:3]
        if not name:  # POST to the collection
            obj = json.loads(body)
            key = (ns, obj["metadata"]["name"])
            if key in self.leases:
                return status(409, 'leases.coordination.k8s.io "%s" already exists' % key[1], "AlreadyExists")
            obj["metadata"]["resourceVersion"] = self.next_rv()
            self.leases[key] = obj
            return resp(201, obj, date)
        cur = self.leases.get((ns, name))
        if cur is None:
            return status(404, 'leases.coordination.k8s.io "%s" not found' % name, "NotFound",
                          details={"name": name, "group": "coordination.k8s.io", "kind": "leases"})
        if method == "GET":
            return resp(200, cur, date)
        want = ((json.loads(body) if body else {}).get("preconditions") or {}).get("resourceVersion") \
            if method == "DELETE" else json.loads(body)["metadata"].get("resourceVersion")
        if want and want != cur["metadata"]["resourceVersion"]:
            return status(409, 'Operation cannot be fulfilled on leases.coordination.k8s.io "%s": the object has '
                          'been modified; please apply your changes to the latest version and try again' % name,
                          "Conflict")
        if method == "DELETE":
            del self.leases[(ns, name)]
            return resp(200, {"kind": "Status", "status": "Success"}, date)
        obj = json.loads(body)
        obj["metadata"]["resourceVersion"] = self.next_rv()
        self.leases[(ns, name)] = obj
        return resp(200, obj, date)

    def _route(self, method, path, q, body, content_type):
        if path.startswith(CRD_PREFIX):
            rest = path[len(CRD_PREFIX):].strip("/")
            if not rest:
                items = list(self.crds.values())
                sel = q.get("labelSelector")
                if sel:
                    k, _sep, v = sel.partition("=")
                    items = [c for c in items if c["metadata"].get("labels", {}).get(k) == v]
                return resp(200, {"kind": "CustomResourceDefinitionList", "items": items, "metadata": {}})
            name, _sep, sub = rest.partition("/")
            crd = self.crds.get(name)
            if crd is None:
                return status(404, 'customresourcedefinitions.apiextensions.k8s.io "%s" not found' % name,
                              "NotFound")
            if method == "GET":
                return resp(200, crd)
            if method == "PATCH" and content_type == "application/json-patch+json":
                return self._crd_json_patch(crd, json.loads(body))
            if method == "PATCH":
                patch = json.loads(body)
                rv = (patch.get("metadata") or {}).get("resourceVersion")
                if rv and rv != crd["metadata"]["resourceVersion"]:
                    return status(409, "Operation cannot be fulfilled on customresourcedefinitions."
                                  "apiextensions.k8s.io \"%s\": the object has been modified" % name, "Conflict")
                if sub == "status":
                    crd["status"]["storedVersions"] = list(patch["status"]["storedVersions"])
                else:
                    ann = crd["metadata"].setdefault("annotations", {})
                    for k, v in ((patch.get("metadata") or {}).get("annotations") or {}).items():
                        if v is None:
                            ann.pop(k, None)
                        else:
                            ann[k] = v
                crd["metadata"]["resourceVersion"] = self.next_rv()
                self.crd_writes += 1
                return resp(200, crd)
        parts = path.strip("/").split("/")
        if len(parts) == 3:  # discovery: /apis/<group>/<version> with each resource's storageVersionHash
            return self._discovery(parts[1], parts[2])
        # custom objects: /apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>]
        group = parts[1]
        ns = None
        rest = parts[3:]
        if rest and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        crd_name = "%s.%s" % (plural, group)
        if crd_name not in self.crds:
            return status(404, "the server could not find the requested resource", "NotFound")
        objs = self.objects[crd_name]
        if name is None:
            keys = sorted(objs)
            token = q.get("continue")
            if token:
                keys = [k for k in keys if k > token]
            limit = int(q.get("limit", 0)) or len(keys)
            page, remaining = keys[:limit], keys[limit:]
            meta = {"resourceVersion": str(self._rv)}
            if remaining:
                meta["continue"] = page[-1]
                meta["remainingItemCount"] = len(remaining)
            items = [{"metadata": {"namespace": objs[k]["ns"] or None, "name": objs[k]["name"],
                                   "resourceVersion": objs[k]["rv"]}} for k in page]
            return resp(200, {"kind": "PartialObjectMetadataList", "metadata": meta, "items": items})
        key = "%s/%s" % (ns, name) if ns else name
        obj = objs.get(key)
        if obj is None:
            return not_found(group, plural, name)
        if method == "PATCH" and content_type == "application/json-patch+json":
            # the confirming pass: a JSON patch that only tests the resourceVersion (no content)
            ops = json.loads(body)
            assert [op["op"] for op in ops] == ["test"] and ops[0]["path"] == "/metadata/resourceVersion", ops
            if ops[0]["value"] != obj["rv"]:
                return status(422, "the server rejected our request due to an error in our request", "Invalid")
        elif method == "PATCH":
            assert body == b"{}", "the engine must never send object content"
            assert content_type == "application/merge-patch+json"
        if method == "PATCH":
            storage = self.storage_of(crd_name)
            if obj["stored"] != storage:
                obj["stored"] = storage
                obj["rv"] = self.next_rv()
                self.object_writes += 1
        return resp(200, {"metadata": {"namespace": obj["ns"] or None, "name": obj["name"],
                                       "resourceVersion": obj["rv"]}})

    def close(self):
        self.closed = True

    def _crd_json_patch(self, crd, ops):
        """A JSON patch of a CRD's metadata: ``test`` of the resourceVersion, ``replace`` of managedFields."""
        for op in ops:
            if op["op"] == "test" and op["path"] == "/metadata/resourceVersion":
                if op["value"] != crd["metadata"]["resourceVersion"]:
                    return status(422, "the server rejected our request due to an error in our request", "Invalid")
            elif op["op"] == "replace" and op["path"] == "/metadata/managedFields":
                crd["metadata"]["managedFields"] = op["value"]
            elif op["path"].startswith("/metadata/annotations/"):  # test / remove of one annotation (lag_note.py)
                key = op["path"].rsplit("/", 1)[1].replace("~1", "/").replace("~0", "~")
                ann = crd["metadata"].get("annotations") or {}
                if key not in ann or (op["op"] == "test" and ann[key] != op["value"]):
                    return status(422, "the server rejected our request due to an error in our request", "Invalid")
                if op["op"] == "remove":
                    del ann[key]
            else:
                raise AssertionError("unexpected CRD patch op %r" % op)
        crd["metadata"]["resourceVersion"] = self.next_rv()
        self.crd_writes += 1
        return resp(200, crd)

    def _discovery(self, group, version):
        resources = []
        for crd in self.crds.values():
            spec = crd["spec"]
            if spec["group"] != group or version not in [v["name"] for v in spec["versions"] if v["served"]]:
                continue
            storage = self.stale_storage_view.get(crd["metadata"]["name"]) or self.storage_of(crd["metadata"]["name"])
            digest = hashlib.sha256(("%s/%s/%s" % (group, storage, spec["names"]["kind"])).encode()).digest()
            resources.append({"name": spec["names"]["plural"], "kind": spec["names"]["kind"],
                              "storageVersionHash": base64.b64encode(digest[:8]).decode()})
        if not resources:
            return status(404, "the server could not find the requested resource", "NotFound")
        return resp(200, {"kind": "APIResourceList", "groupVersion": "%s/%s" % (group, version),
                          "resources": resources})

    # -- assertions helpers -----------------------------------------------------
    def writes(self, include_events=False):
        """Requests that persist something: dry-run requests (check mode preflight) do not. Events (a note
        to the operator, not cluster state) only when asked for."""
        return [c for c in self.calls if c[0] in ("PATCH", "PUT", "POST", "DELETE")
                and ("dryRun", "All") not in _query_pairs(c[2])
                and (include_events or not c[1].endswith("/events"))]

    def dry_runs(self):
        return [c for c in self.calls if ("dryRun", "All") in _query_pairs(c[2])]


def _micro_time(epoch):
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _query_pairs(query):
    if not query:
        return []
    if isinstance(query, dict):
        return list(query.items())
    return list(query)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""FakeCluster with managedFields: listed and read in metadata, changed only by a JSON patch.

An object may also have a ``spec`` (as read at the storage version, ``set_spec``); like the apiserver, the fake
returns it only to a read that asks for whole objects (an Accept that is not PartialObjectMetadata[List]), and
``accepts`` records the Accept of every read of objects.

The JSON patch is applied as the apiserver does (RFC 6902 on the object), restricted to what the engine may send:
a ``test`` of metadata.resourceVersion and changes under metadata.managedFields. Anything else fails the test
that sent it. A failed ``test`` answers 422 with the generic message kube-apiserver 1.37.2 gives.
Events POSTed to ``default`` are kept in ``events``.
"""

from __future__ import annotations

import copy
import json
import threading

from tests.unit.crdops_fakes import FakeCluster, not_found, resp, status

JSON_PATCH = "application/json-patch+json"


def entry(manager, api_version, operation="Apply", subresource=None):
    e = {"manager": manager, "operation": operation, "apiVersion": api_version, "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:%s" % manager: {}}}}
    if subresource:
        e["subresource"] = subresource
    return e


class MfCluster(FakeCluster):
    def __init__(self):
        super().__init__()
        self.events = []
        self.json_patches = []  # (path, ops)
        self.accepts = []  # (method, path, accept) of every read of objects
        self.local = threading.local()  # the Accept of the request being routed (workers run in threads)

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        self.local.accept = accept or ""
        return super().request(method, path, query=query, body=body, content_type=content_type, accept=accept)

    def whole(self):
        return "as=PartialObjectMetadata" not in getattr(self.local, "accept", "")

    def set_spec(self, crd_name, key, spec):
        self.objects[crd_name][key]["spec"] = copy.deepcopy(spec)

    def set_managed_fields(self, crd_name, key, entries):
        self.objects[crd_name][key]["mf"] = copy.deepcopy(entries)

    def mf(self, crd_name, key):
        return self.objects[crd_name][key].get("mf") or []

    def _locate(self, path):
        parts = path.strip("/").split("/")
        group, rest, ns = parts[1], parts[3:], ""
        if rest and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        key = "%s/%s" % (ns, name) if ns else name
        return "%s.%s" % (plural, group), group, plural, name, key

    def _route(self, method, path, q, body, content_type):
        if method == "POST" and path == "/api/v1/namespaces/default/events":
            self.events.append(json.loads(body))
            return resp(201, {})
        if path.startswith("/apis/apiextensions.k8s.io/") or len(path.strip("/").split("/")) == 3:
            return super()._route(method, path, q, body, content_type)
        crd_name, group, plural, name, key = self._locate(path)
        if method == "PATCH" and content_type == JSON_PATCH and crd_name in self.crds:
            return self._json_patch(crd_name, group, plural, name, key, path, json.loads(body))
        out = super()._route(method, path, q, body, content_type)
        if out.ok and crd_name in self.objects:
            if method == "GET":
                self.accepts.append((method, path, getattr(self.local, "accept", "")))
            data = json.loads(out.data)
            for item in data.get("items") or [data]:
                meta = item["metadata"]
                k = "%s/%s" % (meta["namespace"], meta["name"]) if meta.get("namespace") else meta["name"]
                if self.objects[crd_name].get(k, {}).get("mf"):
                    meta["managedFields"] = copy.deepcopy(self.objects[crd_name][k]["mf"])
                if method == "GET" and self.whole() and "spec" in self.objects[crd_name].get(k, {}):
                    item["spec"] = copy.deepcopy(self.objects[crd_name][k]["spec"])
            out = resp(out.status, data)
        return out

    def _json_patch(self, crd_name, group, plural, name, key, path, ops):
        self.json_patches.append((path, ops))
        obj = self.objects[crd_name].get(key)
        if obj is None:
            return not_found(group, plural, name)
        mf = copy.deepcopy(obj.get("mf") or [])
        for op in ops:
            p = op["path"]
            if op["op"] == "test":
                assert p == "/metadata/resourceVersion", op
                if op["value"] != obj["rv"]:
                    # kube-apiserver 1.37.2's exact answer (observed)
                    return status(422, "the server rejected our request due to an error in our request",
                                  "Invalid", details={})
            elif p == "/metadata/managedFields":
                assert op["op"] == "replace" and op["value"] == [{}], op  # the documented way to strip them
                mf = []
            else:
                assert p.startswith("/metadata/managedFields/"), "object content must never be sent: %r" % op
                idx = int(p.split("/")[3])
                if op["op"] == "remove":
                    del mf[idx]
                elif p.endswith("/apiVersion"):
                    assert op["op"] == "replace", op
                    mf[idx]["apiVersion"] = op["value"]
                else:  # a translated entry replaces the old one whole
                    assert op["op"] == "replace" and p == "/metadata/managedFields/%d" % idx, op
                    mf[idx] = copy.deepcopy(op["value"])
        obj["mf"] = mf
        obj["stored"] = self.storage_of(crd_name)
        obj["rv"] = self.next_rv()  # managedFields changed: always a write
        self.object_writes += 1
        meta = {"namespace": obj["ns"] or None, "name": obj["name"], "resourceVersion": obj["rv"]}
        if mf:
            meta["managedFields"] = copy.deepcopy(mf)
        return resp(200, {"metadata": meta})


def stale_cluster(count, crd_name="crontabs.stable.example.com"):
    """An MfCluster whose CRD has storedVersions [v1, v2] and ``count`` objects in namespace ``a`` stored at v1."""
    c = MfCluster()
    c.add_crd(stored=("v1", "v2"))
    c.add_objects(crd_name, count, namespaces=("a",), stored="v1")
    return c

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A scripted apiserver for the client check: objects with managedFields, dry-run server-side apply.

Mimics the behaviour observed on kube-apiserver 1.37.2 (kubernetes#111937): an apply to an object that has a
managedFields entry at a version the CRD no longer defines answers HTTP 500. A non-forced apply that changes a
value owned by another manager answers 409 naming the owners (struct fields only, enough for these tests); an
Update manager's merge patch is accepted. ``schema_refuses`` lists values the schema rejects (HTTP 422).
"""
from __future__ import annotations

import json
from tests.unit.crdops_fakes import make_crd, resp, status

GROUP = "stable.example.com"
NAME = "crontabs." + GROUP


def entry(manager, version, fields, operation="Apply", subresource=None):
    e = {"manager": manager, "operation": operation, "apiVersion": "%s/%s" % (GROUP, version),
         "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        e["subresource"] = subresource
    return e


class ClientCheckFake:
    cluster_label = "test-cluster"

    def __init__(self, versions=(("v1", False, False), ("v2", True, True))):
        self.crd = make_crd(NAME, versions=versions, stored=("v2",))
        self.objects = {}  # (ns, name) -> object
        self.calls = []
        self.applies = []  # (path, query dict, body dict)
        self.events = []
        self.deleted_before_get = set()
        self.patches = []  # merge patches: (path, query dict, body dict)
        self.schema_refuses = []  # values whose apply answers 422
        self.ownership_ignored = set()  # (ns, name): a change by anyone is accepted (ownership not recorded)

    def add(self, ns, name, spec, managed, labels=None):
        meta = {"name": name, "namespace": ns, "resourceVersion": "1", "managedFields": managed}
        if labels:
            meta["labels"] = labels
        self.objects[(ns, name)] = {"apiVersion": GROUP + "/v2", "kind": "Crontab", "metadata": meta, "spec": spec}

    def close(self):
        pass

    def _defined(self):
        return {v["name"] for v in self.crd["spec"]["versions"]}

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        q = dict(query or [])
        self.calls.append((method, path, q))
        if path == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + NAME:
            return resp(200, self.crd)
        if method == "POST" and path.endswith("/events"):
            self.events.append(json.loads(body))
            return resp(201, {})
        parts = path.split("/")  # '', apis, group, version, [namespaces, ns,] plural[, name[, sub]]
        version = parts[3]
        if parts[4] != "namespaces":
            return self._list(q)
        ns, name = parts[5], parts[7] if len(parts) > 7 else None
        if name is None:
            return self._list(q)
        obj = self.objects.get((ns, name))
        if obj is None or (ns, name) in self.deleted_before_get:
            return status(404, 'crontabs "%s" not found' % name, "NotFound")
        if method == "GET":
            return resp(200, dict(obj, apiVersion="%s/%s" % (GROUP, version)))
        if content_type == "application/merge-patch+json":
            self.patches.append((path, q, json.loads(body)))
            return resp(200, obj)
        assert method == "PATCH" and content_type == "application/apply-patch+yaml"
        sent = json.loads(body)
        self.applies.append((path, q, sent))
        for e in obj["metadata"]["managedFields"]:
            ver = e["apiVersion"].rsplit("/", 1)[1]
            if ver not in self._defined():
                return status(500, "request to convert CR to an invalid group/version: %s" % e["apiVersion"],
                              "InternalError")
        if any(v in self.schema_refuses for v in _leaves(sent.get("spec") or {})):
            return status(422, "Crontab.stable.example.com is invalid: spec: Invalid value", "Invalid")
        conflicts = [] if (ns, name) in self.ownership_ignored else _conflicts(obj, sent, q["fieldManager"])
        if conflicts:
            return status(409, "Apply failed with %d conflicts: %s" % (len(conflicts), "; ".join(
                'conflict with "%s": %s' % c for c in conflicts)), "Conflict")
        return resp(200, obj)

    def _list(self, q):
        items = [{"metadata": o["metadata"]} for key, o in sorted(self.objects.items())]
        limit = int(q.get("limit", "500"))
        start = int(q.get("continue", "0"))
        page = items[start:start + limit]
        meta = {"continue": str(start + limit)} if start + limit < len(items) else {}
        return resp(200, {"items": page, "metadata": meta})


def _leaves(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _leaves(v)
    else:
        yield node


def _owned_paths(trie, prefix=()):
    for key, sub in (trie or {}).items():
        if key.startswith("f:"):
            if [k for k in (sub or {}) if k != "."]:
                yield from _owned_paths(sub, prefix + (key[2:],))
            else:
                yield prefix + (key[2:],)


def _get(node, path):
    for step in path:
        if not isinstance(node, dict) or step not in node:
            return KeyError
        node = node[step]
    return node


def _conflicts(obj, sent, manager):
    """(owner, .path) for every value ``sent`` changes that another manager owns."""
    out = []
    for e in obj["metadata"]["managedFields"]:
        if e["manager"] == manager and e["operation"] == "Apply":
            continue
        for path in _owned_paths(e.get("fieldsV1")):
            new = _get(sent, path)
            if new is not KeyError and new != _get(obj, path):
                out.append((e["manager"], "." + ".".join(path)))
    return out

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Diagnosis for the repair: is a CRD's resource unreadable, and which removed versions are still stored?

The broken state: objects are stored in etcd at a version the CRD no longer has (storedVersions was
trimmed by hand or by a tool that counted unwritten objects as done, then that version was removed).
kube-apiserver 1.37.2 then answers every paginated LIST (``limit``, as kubectl sends) with HTTP 500, reason
``StorageReadError`` (an unpaginated LIST gets 429 ``storage is (re)initializing: failed to list <unspecified>:``
and the same text, a GET 500 ``Internal error occurred: StorageError: corrupt object``):
``failed to read one or more <plural>.<group> from the storage: StorageError: corrupt object, Code: 7,
Key: /registry/..., ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=<n>: request
to convert CR from an invalid group/version: <group>/<version> (and <k> more)``, with one
``details.causes`` entry per unreadable key (at most 100; k8s.io/apiserver pkg/storage/etcd3
corrupt_obj_deleter.go, apiextensions-apiserver pkg/apiserver/conversion/converter.go). The version
named there is one source of evidence; etcd (the apiVersion of every key), the previous release's
manifest and the operator's own ``versions`` are the others.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..kube.crd import Crd
from ..kube.manifests import read_manifests
from ..kube.transport import ACCEPT_PARTIAL_LIST, Transport

REPAIR_ANNOTATION = "migration.crdops.io/storage-repair"
PERMISSIVE_SCHEMA = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
# "... convert CR from an invalid group/version: g.example.com/v1" and "list index 3 has invalid group/version: ..."
_INVALID_GV = re.compile(r"invalid group/version: ([A-Za-z0-9.\-]+)/([A-Za-z0-9]+)")
_MORE = re.compile(r"\(and (\d+) more\)")


@dataclass
class ListProbe:
    """Outcome of a full metadata-only LIST of the resource at its storage version."""

    readable: bool
    listed: int = 0
    status: Optional[int] = None
    reason: Optional[str] = None
    message: Optional[str] = None
    named_versions: List[str] = field(default_factory=list)  # versions the error names as invalid
    unreadable_reported: Optional[int] = None  # how many keys the error says it could not decode

    @property
    def storage_read_error(self) -> bool:
        # a paginated LIST (kubectl's limit=500) reads etcd: 500 StorageReadError; an unpaginated one waits for
        # the watch cache, whose fill fails on the same objects: 429 "storage is (re)initializing: ... corrupt object"
        return self.reason == "StorageReadError" or "corrupt object" in (self.message or "")

    def to_dict(self) -> Dict[str, Any]:
        return {"readable": self.readable, "listed": self.listed, "status": self.status, "reason": self.reason,
                "message": (self.message or "")[:1000] or None, "named_versions": list(self.named_versions),
                "unreadable_reported": self.unreadable_reported}


def versions_named_in_error(body: Dict[str, Any], group: str) -> Tuple[List[str], Optional[int]]:
    """Versions of ``group`` an apiserver error names as invalid, and how many unreadable keys it reports."""
    texts = [str(body.get("message") or "")]
    causes = ((body.get("details") or {}).get("causes") or [])
    texts.extend(str(c.get("message") or "") for c in causes if isinstance(c, dict))
    found: List[str] = []
    for text in texts:
        for grp, ver in _INVALID_GV.findall(text):
            if grp == group and ver not in found:
                found.append(ver)
    key_causes = [c for c in causes if isinstance(c, dict) and c.get("field")]
    reported: Optional[int] = None
    more = _MORE.search(texts[0])
    if key_causes:
        reported = len(key_causes)
    elif "corrupt object" in texts[0]:
        reported = 1 + (int(more.group(1)) if more else 0)
    return found, reported


def probe_list(transport: Transport, crd: Crd, page_size: int = 500) -> ListProbe:
    """LIST every object (metadata only, in pages). One failing page makes the resource unreadable."""
    path = crd.resource_path()
    token: Optional[str] = None
    listed = 0
    while True:
        query = [("limit", str(page_size))] + ([("continue", token)] if token else [])
        resp = transport.request("GET", path, query=query, accept=ACCEPT_PARTIAL_LIST)
        if resp.status == 410 and token:
            token, listed = None, 0  # continue token expired: start over, counting again
            continue
        if not resp.ok:
            body = resp.status_body()
            named, reported = versions_named_in_error(body, crd.group)
            return ListProbe(False, listed, resp.status, resp.api_reason(), resp.api_message(), named, reported)
        body = resp.json()
        listed += len(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue") or None
        if not token:
            return ListProbe(True, listed)


def etcd_versions(counts: Dict[str, int], group: str) -> Dict[str, int]:
    """Keys per version of ``group`` from an etcd scan's ``counts`` (``<group>/<version>`` -> n)."""
    out: Dict[str, int] = {}
    for api_version, n in counts.items():
        grp, sep, ver = api_version.rpartition("/")
        if sep and grp == group:
            out[ver] = out.get(ver, 0) + n
    return out


def repair_note(crd: Crd) -> Optional[Dict[str, Any]]:
    """The note an earlier, interrupted repair left on this CRD; None when there is none, it is unreadable, or it
    was written for another CRD (another uid: copied with the CRD's annotations from another cluster)."""
    try:
        data = json.loads(crd.annotations.get(REPAIR_ANNOTATION) or "null")
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("crdUid") != crd.uid:
        return None
    return data


def repair_in_progress(crd: Crd) -> List[str]:
    """Versions an earlier, interrupted repair added back (recorded on the CRD before it added them)."""
    note = repair_note(crd)
    added = note.get("addedVersions") if note is not None else None
    return [str(v) for v in added] if isinstance(added, list) else []


def previous_crd(manifests: Sequence[Any], crd_name: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The CRD named ``crd_name`` in the previous release's manifests (file paths, globs or dicts), and its source."""
    for manifest in read_manifests(manifests, label="previous_manifests").crds:
        if manifest.name == crd_name:
            return manifest.doc, manifest.source
    return None, None


def previous_versions(doc: Optional[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    if not doc:
        return {}
    return dict((str(v.get("name")), v) for v in (doc.get("spec") or {}).get("versions") or []
                if isinstance(v, dict) and v.get("name"))


def version_entry(name: str, previous: Dict[str, Dict[str, Any]], source: Optional[str]) -> Tuple[Dict[str, Any], str]:
    """The spec.versions entry to add back: served, never storage; schema from the previous release, or
    a permissive one (every field kept) when the release is not given."""
    if name in previous:
        entry = copy.deepcopy(previous[name])
        origin = "previous release manifest %s" % source
    else:
        entry = {"name": name, "schema": copy.deepcopy(PERMISSIVE_SCHEMA)}
        origin = "permissive schema (type: object, x-kubernetes-preserve-unknown-fields: true)"
    entry.update({"name": name, "served": True, "storage": False})
    entry.setdefault("schema", copy.deepcopy(PERMISSIVE_SCHEMA))
    entry.pop("deprecationWarning", None)
    entry["deprecated"] = True  # clients that read it get a warning: it exists only for the repair
    return entry, origin

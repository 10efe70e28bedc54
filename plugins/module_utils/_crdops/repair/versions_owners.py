# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Give ``spec.versions`` of a CRD back to the managers that owned it before a repair edited it.

``spec.versions`` is an atomic list for server-side apply (``+listType=atomic``): the repair's two merge
patches (add a version back, remove it again) make the repair's manager the only owner of the whole list, as an
Update. The list ends as it began, but the release tool that applied it (Helm, Flux, Argo CD, this role) is no
longer its owner: its next apply without force conflicts on ``.spec.versions``, and a release that drops a
version no longer removes it. A write that changes nothing but ``metadata.managedFields`` sets them as sent
(the apiserver records no field for the writer), so one optimistic-locked JSON patch puts the ownership of
``spec.versions`` back: taken from every entry that has it now, given to the entries that had it before.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from ..kube.crd import crd_path
from ..kube.selection import get_crd_raw
from ..kube.transport import JSON_PATCH, Transport, dumps, error_from_response

Entry = Dict[str, Any]


def _identity(entry: Mapping[str, Any]) -> Tuple[str, str, str, str]:
    return (str(entry.get("manager") or ""), str(entry.get("operation") or ""),
            str(entry.get("subresource") or ""), str(entry.get("apiVersion") or ""))


def owns_versions(entry: Mapping[str, Any]) -> bool:
    spec = ((entry.get("fieldsV1") or {}).get("f:spec")) or {}
    return isinstance(spec, dict) and "f:versions" in spec


def owners(managed: Sequence[Mapping[str, Any]]) -> List[str]:
    return [str(e.get("manager")) for e in managed or () if owns_versions(e)]


def _without_versions(entry: Entry) -> Entry:
    out = copy.deepcopy(entry)
    fields = out.get("fieldsV1") or {}
    spec = dict(fields.get("f:spec") or {})
    spec.pop("f:versions", None)
    if [k for k in spec if k != "."]:
        fields["f:spec"] = spec
    else:
        fields.pop("f:spec", None)
    return out


def _with_versions(entry: Entry) -> Entry:
    out = copy.deepcopy(entry)
    fields = out.setdefault("fieldsV1", {})
    fields.setdefault("f:spec", {})["f:versions"] = {}
    return out


def _empty(entry: Mapping[str, Any]) -> bool:
    return not [k for k in (entry.get("fieldsV1") or {}) if k != "."]


def restored(current: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]]) -> List[Entry]:
    """``current`` with ``spec.versions`` owned exactly by the entries of ``before`` that owned it."""
    had = [e for e in before if owns_versions(e)]
    wanted = set(_identity(e) for e in had)
    out: List[Entry] = []
    for entry in current:
        kept = _without_versions(dict(entry))
        if _identity(entry) in wanted:
            kept = _with_versions(kept)
            wanted.discard(_identity(entry))
        if not _empty(kept):
            out.append(kept)
    for entry in had:  # an owner whose entry went away with the ownership the repair took from it
        if _identity(entry) in wanted:
            back = {k: copy.deepcopy(v) for k, v in entry.items() if k != "fieldsV1"}
            out.append(_with_versions(dict(back, fieldsV1={})))
    return out


def owner_entries(managed: Sequence[Mapping[str, Any]]) -> List[Entry]:
    """The entries owning ``spec.versions``, reduced to that field (what a repair records before its first edit)."""
    return [_with_versions(dict({k: copy.deepcopy(v) for k, v in e.items() if k != "fieldsV1"}, fieldsV1={}))
            for e in managed or () if owns_versions(e)]


def give_back(transport: Transport, name: str, before: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Set the owners of ``spec.versions`` of CRD ``name`` back to those in ``before``; returns what was done."""
    live = get_crd_raw(transport, name)
    meta = live.get("metadata") or {}
    current = meta.get("managedFields") or []
    wanted = restored(current, before)
    out: Dict[str, Any] = {"owners_before": owners(before), "owners_after_edit": owners(current),
                           "owners_now": owners(wanted), "changed": wanted != current}
    if not out["changed"]:
        return out
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
           {"op": "replace", "path": "/metadata/managedFields", "value": wanted}]
    resp = transport.request("PATCH", crd_path(name), body=dumps(ops), content_type=JSON_PATCH)
    if not resp.ok:
        raise error_from_response(resp, "PATCH CRD metadata.managedFields (spec.versions back to %s)"
                                  % ", ".join(out["owners_before"]), cluster=transport.cluster_label, crd=name)
    return out

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Choose the CRDs a task works on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .crd import CRD_API, Crd, crd_path
from .errors import BadInputError, SelectionError
from .transport import Transport, error_from_response


@dataclass(frozen=True)
class Selection:
    """Exactly one of: ``names``; ``group`` and/or ``label_selector``; ``all``."""

    names: Tuple[str, ...] = ()
    group: Optional[str] = None
    label_selector: Optional[str] = None
    all: bool = False
    allow_empty: bool = False

    def validate(self) -> None:
        filters = bool(self.group or self.label_selector)
        ways = sum([bool(self.names), filters, bool(self.all)])
        if ways == 0:
            raise BadInputError("select CRDs with one of: names, group and/or label_selector, all=true")
        if ways > 1:
            raise BadInputError(
                "names, group/label_selector and all are mutually exclusive; "
                "use exactly one way to select CRDs")
        for n in self.names:
            if not n or "/" in n:
                raise BadInputError("invalid CRD name %r (expected <plural>.<group>)" % n)


def get_crd_raw(transport: Transport, name: str) -> Dict[str, Any]:
    """GET one CRD as the apiserver sent it (for an edit that must keep every field, managedFields included);
    raises NotFoundError (with cluster and CRD) when it does not exist."""
    resp = transport.request("GET", crd_path(name))
    if not resp.ok:
        raise error_from_response(resp, "GET CRD", cluster=transport.cluster_label, crd=name)
    raw: Dict[str, Any] = resp.json()
    return raw


def get_crd(transport: Transport, name: str) -> Crd:
    """GET one CRD; raises NotFoundError (with cluster and CRD) when it does not exist."""
    return Crd.from_api(get_crd_raw(transport, name))


def list_crds(transport: Transport, label_selector: Optional[str] = None) -> List[Crd]:
    out: List[Crd] = []
    token: Optional[str] = None
    while True:
        query = [("limit", "500")]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if token:
            query.append(("continue", token))
        resp = transport.request("GET", CRD_API, query=query)
        if not resp.ok:
            raise error_from_response(resp, "LIST CRDs", cluster=transport.cluster_label)
        body = resp.json()
        out.extend(Crd.from_api(item) for item in body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return out


def select_crds(transport: Transport, selection: Selection) -> List[Crd]:
    """Resolve a (validated) selection to CRDs sorted by name. Unknown names and empty results are errors."""
    cluster = transport.cluster_label
    if selection.names:
        crds = []
        missing = []
        for name in dict.fromkeys(selection.names):  # de-duplicate, keep order
            resp = transport.request("GET", crd_path(name))
            if resp.status == 404:
                missing.append(name)
                continue
            if not resp.ok:
                raise error_from_response(resp, "GET CRD", cluster=cluster, crd=name)
            crds.append(Crd.from_api(resp.json()))
        if missing:
            raise SelectionError("unknown CRD name(s): %s" % ", ".join(missing), cluster=cluster,
                                 crd=missing[0])
    else:
        crds = list_crds(transport, selection.label_selector)
        if selection.group:
            crds = [c for c in crds if c.group == selection.group]
    crds.sort(key=lambda c: c.name)
    if not crds and not selection.allow_empty:
        what = []
        if selection.group:
            what.append("group=%s" % selection.group)
        if selection.label_selector:
            what.append("label_selector=%s" % selection.label_selector)
        raise SelectionError("no CRD matches %s" % (" ".join(what) or "all"), cluster=cluster)
    return crds

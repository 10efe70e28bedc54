# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Read-only description of a CRD: versions, storage state, count, record, plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..kube.crd import Crd, stale_managed_fields_of
from ..kube.errors import at_least
from ..restore.listing import count_objects
from ..release.removal_plan import TargetCrd, plan_for
from ..record.record import CHECKPOINT_ANNOTATION, read_checkpoint, validate_record
from ..kube.transport import ACCEPT_PARTIAL_LIST, Transport, error_from_response


@dataclass(frozen=True)
class InfoOptions:
    count_objects: bool = True
    managed_fields_sample: int = 0  # objects whose managedFields are looked at; 0 = none
    diff_sample: int = 20  # stored objects compared with the API's view (storage_diff.py); 0 = none

    def validate(self) -> None:
        at_least("managed_fields_sample", self.managed_fields_sample, 0)
        at_least("diff_sample", self.diff_sample, 0)


def sample_stale_managed_fields(transport: Transport, crd: Crd, limit: int = 100) -> List[Dict[str, Any]]:
    """managedFields entries (on the first ``limit`` objects) whose apiVersion is no longer served
    (kubernetes#111937). A sample, not a full scan."""
    resp = transport.request("GET", crd.resource_path(), query=[("limit", str(limit))], accept=ACCEPT_PARTIAL_LIST)
    if not resp.ok:
        raise error_from_response(resp, "LIST (managedFields sample)", cluster=transport.cluster_label,
                                  crd=crd.name)
    out = []
    served = crd.served_versions
    for item in resp.json().get("items") or []:
        meta = item.get("metadata") or {}
        stale = stale_managed_fields_of(meta.get("managedFields"), crd.group, served)
        if stale:
            out.append({"namespace": meta.get("namespace"), "name": meta.get("name"), "entries": stale})
    return out


def describe_crd(
    transport: Transport,
    crd: Crd,
    *,
    count: bool = True,
    targets: Optional[Dict[str, TargetCrd]] = None,
    managed_fields_sample: int = 0,
) -> Dict[str, Any]:
    out = crd.to_dict()
    out["object_count"] = count_objects(transport, crd) if count else None
    out["migration_record"] = validate_record(crd).to_dict()
    ckpt, note = read_checkpoint(crd)
    out["checkpoint"] = {"present": CHECKPOINT_ANNOTATION in crd.annotations,
                         "usable": ckpt is not None, "last": ckpt.last if ckpt else None, "note": note}
    out.update(plan_for(crd, targets or {}))
    if managed_fields_sample:
        out["stale_managed_fields"] = sample_stale_managed_fields(transport, crd, managed_fields_sample)
    return out

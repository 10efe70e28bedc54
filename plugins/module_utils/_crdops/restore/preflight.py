# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Predict admission rejections before writing: the same no-op write, sent with dryRun=All.

A dry-run request runs conversion, admission webhooks (those declaring no side effects) and
ValidatingAdmissionPolicies exactly as the real write would, and persists nothing, so a policy that
refuses UPDATEs shows up here with its own message.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Tuple

from ..kube.crd import Crd
from .listing import ObjectRef
from ..kube.transport import ACCEPT_PARTIAL, MERGE_PATCH, Transport, error_from_response


def predict_rejections(transport: Transport, crd: Crd, refs: List[ObjectRef], sample: int) -> List[Dict[str, Any]]:
    """Dry-run the no-op write on the first ``sample`` objects; return the ones the API refused."""
    rejections: List[Dict[str, Any]] = []
    for ref in refs[:sample]:
        path = crd.resource_path(namespace=ref.namespace or None, name=ref.name)
        resp = transport.request("PATCH", path, query=[("dryRun", "All")], body=b"{}",
                                 content_type=MERGE_PATCH, accept=ACCEPT_PARTIAL)
        if resp.ok or resp.status == 404:
            continue
        err = error_from_response(resp, "dry-run re-store", cluster=transport.cluster_label, crd=crd.name,
                                  obj=ref.key)
        rejections.append({"namespace": ref.namespace or None, "name": ref.name, "status": resp.status,
                           "kind": err.kind, "message": err.api_message or err.message})
    return rejections


def timed_rejections(transport: Transport, crd: Crd, refs: List[ObjectRef],
                     sample: int) -> Tuple[List[Dict[str, Any]], Optional[float]]:
    """``predict_rejections`` and the mean latency of one dry-run write in ms (None: no object to sample).

    A dry-run write runs the same conversion and admission as the re-store's write, so its latency is the
    plan's estimate of a write when no earlier pass left a pace in the migration record."""
    started = time.monotonic()
    rejections = predict_rejections(transport, crd, refs, sample)
    sent = min(len(refs), sample)
    return rejections, (round(1000.0 * (time.monotonic() - started) / sent, 2) if sent else None)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Apply a release's CRD manifests: a forced server-side apply per CRD as one field manager, then wait until each
is Established; sent with ``dryRun=All`` for a dry-run (the apiserver validates it all, stores nothing).

The same request kubernetes.core.k8s sends for ``apply: true`` with ``server_side_apply`` (a PATCH of content type
``application/apply-patch+yaml`` with ``fieldManager`` and ``force``), made here so that a cluster's upgrade costs no
module process and no API discovery; ``changed`` compares the apiserver's answer with the CRD read just before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ..kube.crd import Crd, crd_path, is_established
from ..kube.errors import CrdOpsError, NotFoundError, OutcomeError
from ..record.record import carry_record
from ..kube.selection import get_crd_raw
from .crd_changes import differences, without_volatile
from ..kube.transport import APPLY_PATCH, Transport, dumps, error_from_response

POLL_S = 0.5


@dataclass
class Applied:
    """One CRD's apply: ``action`` is created, configured, unchanged or refused (``error`` then says why)."""

    name: str
    action: str
    changes: List[str]
    error: Optional[str] = None
    established: Optional[bool] = None
    record: Optional[str] = None  # the migration record carried to the new generation, or why not (record.py)

    @property
    def changed(self) -> bool:
        return self.action in ("created", "configured")

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "action": self.action, "changed": self.changed, "changes": self.changes,
                "error": self.error, "established": self.established, "record": self.record}


def _name(doc: Mapping[str, Any]) -> str:
    return str((doc.get("metadata") or {}).get("name") or "")


def _live(transport: Transport, name: str) -> Optional[Dict[str, Any]]:
    """The CRD as the apiserver sends it; None when it does not exist yet."""
    try:
        return get_crd_raw(transport, name)
    except NotFoundError:
        return None


def apply_one(transport: Transport, doc: Mapping[str, Any], field_manager: str, force: bool = True,
              dry_run: bool = False) -> Applied:
    """Apply one CRD manifest; a refusal is returned (with the API's message), a failed read raises."""
    name = _name(doc)
    before = _live(transport, name)
    query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
    query += [("dryRun", "All")] if dry_run else []
    resp = transport.request("PATCH", crd_path(name), query=query, body=dumps(dict(doc)), content_type=APPLY_PATCH)
    if not resp.ok:
        error = error_from_response(resp, "PATCH CRD (server-side apply%s)" % (", dryRun=All" if dry_run else ""),
                                    cluster=transport.cluster_label, crd=name)
        return Applied(name, "refused", [], error=error.api_message or str(error))
    if before is None:
        return Applied(name, "created", ["."])
    after = resp.json()
    changes = differences(without_volatile(before), without_volatile(after))
    applied = Applied(name, "configured" if changes else "unchanged", changes)
    if not dry_run:
        # our apply bumped the generation: the record of the pass still holds (same storage version), say so in it
        applied.record = carry_record(transport, Crd.from_api(before), int((after.get("metadata") or {}).get(
            "generation") or 0))
    return applied


def wait_established(transport: Transport, names: Sequence[str], timeout: float,
                     clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
    """Until every CRD named reports the condition Established True; raises after ``timeout`` seconds, naming them."""
    deadline = clock() + timeout
    waiting = list(names)
    while True:
        waiting = [n for n in waiting if not is_established(_live(transport, n) or {})]
        if not waiting:
            return
        if clock() >= deadline:
            raise OutcomeError("not_established", "cluster %s: CRD %s not Established after %ss: the apiserver has not "
                               "accepted its names yet (kubectl describe crd %s shows the condition's message)"
                               % (transport.cluster_label, ", ".join(waiting), timeout, waiting[0]),
                               cluster=transport.cluster_label, crd=waiting[0])
        sleep(POLL_S)


def apply_release(transport: Transport, docs: Sequence[Mapping[str, Any]], field_manager: str, force: bool = True,
                  dry_run: bool = False, wait: bool = True, timeout: float = 120.0,
                  continue_on_error: bool = False,
                  record: Callable[[Applied], None] = lambda applied: None) -> List[Applied]:
    """Every manifest in order, each outcome handed to ``record`` as it comes. Without ``continue_on_error`` the first
    refusal raises (the CRDs before it stay applied: a release is checked whole by a dry-run first); with it, every
    manifest is tried and each refusal returned. Only a real apply waits for Established, for the CRDs it applied."""
    out: List[Applied] = []
    for doc in docs:
        applied = apply_one(transport, doc, field_manager, force=force, dry_run=dry_run)
        out.append(applied)
        record(applied)
        if applied.error is not None and not continue_on_error:
            raise CrdOpsError("server-side apply%s refused" % (" (dryRun=All)" if dry_run else ""),
                              cluster=transport.cluster_label, crd=applied.name, api_message=applied.error)
    if wait and not dry_run:
        done = [a for a in out if a.error is None]
        wait_established(transport, [a.name for a in done], timeout)
        for a in done:
            a.established = True
    return out

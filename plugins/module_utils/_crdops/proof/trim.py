# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Trim ``status.storedVersions`` — only with proof, never the storage version, optimistic-locked.

Each trim and each refusal leaves a Kubernetes Event on the CRD (``kubectl describe crd`` shows it), except
in check mode. An Event that cannot be posted is reported in the result, never raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..kube.crd import Crd, crd_path
from ..kube.errors import ConflictError, CrdOpsError, NotFoundError, RecordError, RefusalError
from ..kube.selection import get_crd
from ..record.events import TRIM_REFUSED, TRIM_SUCCEEDED, emit_crd_event
from ..record.record import PROOF_ETCD, PROOF_NONE, RecordValidation, validate_record
from ..kube.transport import MERGE_PATCH, Transport, dumps, error_from_response

SETTLE_MODE = "settle-fallback"  # the HA barrier's mode when it waited instead of polling every apiserver


@dataclass
class TrimResult:
    name: str
    storage_version: Optional[str]
    before: List[str]
    after: List[str]
    changed: bool
    record: Dict[str, Any] = field(default_factory=dict)
    forced: bool = False
    check_mode: bool = False
    event_error: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "storage_version": self.storage_version,
                "stored_versions_before": list(self.before), "stored_versions_after": list(self.after),
                "changed": self.changed, "migration_record": dict(self.record), "forced": self.forced,
                "check_mode": self.check_mode, "event_error": self.event_error}

    def diff(self) -> Dict[str, Any]:
        return {"before": {"storedVersions": list(self.before)}, "after": {"storedVersions": list(self.after)},
                "before_header": "%s status" % self.name, "after_header": "%s status" % self.name}


def compute_stored_versions(crd: Crd, drop: Optional[Sequence[str]] = None) -> List[str]:
    """New storedVersions: ``[storage]``, or current minus ``drop`` (storage version always kept)."""
    storage = crd.storage_version
    if not storage:
        raise RefusalError("CRD has no storage version", crd=crd.name)
    if drop:
        if storage in drop:
            raise RefusalError("refusing to drop the storage version %s from status.storedVersions" % storage,
                               crd=crd.name)
        new = [v for v in crd.stored_versions if v not in drop]
        if storage not in new:
            new.append(storage)
        return new
    return [storage]


def refused(transport: Transport, crd: Crd, error: CrdOpsError, check_mode: bool,
            event_errors: Optional[List[str]]) -> CrdOpsError:
    """``error``, after leaving a Warning Event on the CRD that says why the trim was refused."""
    if not check_mode:
        problem = emit_crd_event(transport, crd, TRIM_REFUSED, "storedVersions %s not trimmed: %s"
                                 % (crd.stored_versions, error.message), warning=True)
        if problem and event_errors is not None:
            event_errors.append("[CRD %s] %s" % (crd.name, problem))
    return error.with_context(cluster=transport.cluster_label)


def trimmed(transport: Transport, crd: Crd, result: TrimResult) -> None:
    message = "status.storedVersions trimmed from %s to %s (storage version %s)" % (
        result.before, result.after, result.storage_version)
    if result.forced:
        message += " WITHOUT a valid migration record (force=true): %s" % result.record.get("reason")
    result.event_error = emit_crd_event(transport, crd, TRIM_SUCCEEDED, message, warning=result.forced)


def trim_stored_versions(
    transport: Transport,
    crd_name: str,
    *,
    versions: Optional[Sequence[str]] = None,
    force: bool = False,
    check_mode: bool = False,
    event_errors: Optional[List[str]] = None,
    accept_unproven: bool = False,
    accept_settle_fallback: bool = False,
) -> TrimResult:
    """Trim one CRD. ``event_errors`` collects Events that could not be posted about a refusal."""
    crd = read_crd(transport, crd_name)
    try:
        after = compute_stored_versions(crd, versions)
    except RefusalError as exc:
        refused(transport, crd, exc, check_mode, event_errors)
        raise
    before = list(crd.stored_versions)
    validation: RecordValidation = validate_record(crd)
    result = TrimResult(name=crd.name, storage_version=crd.storage_version, before=before, after=after,
                        changed=False, record=validation.to_dict(), check_mode=check_mode)
    if after == before:
        return result
    refusal = record_refusal(crd, validation, before, after, force=force, accept_unproven=accept_unproven,
                             accept_settle_fallback=accept_settle_fallback)
    if refusal is not None:
        raise refused(transport, crd, refusal, check_mode, event_errors)
    result.forced = not validation.ok
    result.changed = True
    if not check_mode:
        write_trim(transport, crd, result, event_errors)
        trimmed(transport, crd, result)
    return result


def read_crd(transport: Transport, crd_name: str) -> Crd:
    """The CRD to trim; one deleted since it was selected is a refusal of its own (docs/troubleshooting.md)."""
    try:
        return get_crd(transport, crd_name)
    except NotFoundError as exc:
        raise NotFoundError("refusing to trim: CRD not found", cluster=transport.cluster_label, crd=crd_name,
                            status=404, api_message=exc.api_message) from None


def record_refusal(crd: Crd, validation: RecordValidation, before: List[str], after: List[str], *, force: bool,
                   accept_unproven: bool, accept_settle_fallback: bool) -> Optional[RecordError]:
    """Why the migration record does not allow this trim, or None: it has no proof, its pass began after the HA
    barrier's settle fallback and is proven only by a confirming pass, or it is not valid (unless ``force``)."""
    record = validation.record if validation.ok else None
    if record is not None and record.proof == PROOF_NONE and not (accept_unproven or force):
        return RecordError(
            "refusing to trim status.storedVersions %s -> %s: the migration record has no proof (proof none: no etcd "
            "scan and no confirming pass showed that every object is at the storage version; written with "
            "confirm_passes=0, or by an earlier run that recorded no proof). Run crd_storage_migrate again with force=true (a "
            "confirming pass, or etcd_url), or check etcd with crd_storage_verify and then set accept_unproven=true"
            % (before, after), crd=crd.name)
    if record is not None and record.barrier_mode == SETTLE_MODE and not (
            accept_settle_fallback or force or record.proof == PROOF_ETCD):
        return RecordError(
            "refusing to trim status.storedVersions %s -> %s: the pass behind the migration record began after the HA "
            "barrier's settle fallback (not every apiserver could be reached, so the run waited instead of seeing each "
            "one write %s), and its proof is a confirming pass: an apiserver still encoding an older version answers "
            "'unchanged' to it too. Prove it from etcd (etcd_url), run again with every apiserver in "
            "apiserver_endpoints, or accept the risk with accept_settle_fallback=true (role: "
            "crd_upgrade_accept_settle_fallback)" % (before, after, crd.storage_version), crd=crd.name)
    if not validation.ok and not force:
        return RecordError("refusing to trim status.storedVersions %s -> %s: migration record %s"
                           % (before, after, validation.reason), crd=crd.name)
    return None


def write_trim(transport: Transport, crd: Crd, result: TrimResult, event_errors: Optional[List[str]]) -> None:
    """The status patch, locked on the resourceVersion read; ``result.after`` becomes what the apiserver kept."""
    body = {"metadata": {"resourceVersion": crd.resource_version}, "status": {"storedVersions": result.after}}
    resp = transport.request("PATCH", crd_path(crd.name) + "/status", body=dumps(body), content_type=MERGE_PATCH)
    if resp.status == 409:
        raise refused(transport, crd, ConflictError(
            "CRD changed since it was read; storedVersions not trimmed, read it again",
            crd=crd.name, status=409, api_message=resp.api_message()), False, event_errors)
    if not resp.ok:
        raise error_from_response(resp, "PATCH CRD status", cluster=transport.cluster_label, crd=crd.name)
    result.after = list(Crd.from_api(resp.json()).stored_versions)

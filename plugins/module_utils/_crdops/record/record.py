# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The durable migration record and the resume checkpoint, both annotations on the CRD.

The record is the only thing that authorises a storedVersions trim. It is written only after a
complete pass with zero failures, and only when the CRD's storage version and generation are still
those seen when the pass started (re-read, then merge-patched with ``metadata.resourceVersion`` as
an optimistic lock).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Dict, Optional, Tuple

from ..kube.crd import Crd, crd_path
from ..kube.errors import ConflictError, CrdOpsError, RecordError
from ..kube.transport import MERGE_PATCH, Transport, dumps, error_from_response

RECORD_ANNOTATION = "migration.crdops.io/storage-migration"
# what, beyond "every write returned", shows that no object was left at an old version (DESIGN invariant 12):
# every key read from etcd; a confirming pass of no-op writes that changed nothing; or neither
PROOF_ETCD, PROOF_CONFIRMING_PASS, PROOF_NONE = "etcd-scan", "confirming-pass", "none"
PROOFS = (PROOF_ETCD, PROOF_CONFIRMING_PASS, PROOF_NONE)
CHECKPOINT_ANNOTATION = "migration.crdops.io/storage-migration-checkpoint"


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass(frozen=True)
class MigrationRecord:
    storage_version: str
    generation: int
    started_at: str
    completed_at: str
    listed: int = 0
    rewritten: int = 0
    unchanged: int = 0
    gone: int = 0
    failed: int = 0
    # objects listed but not written because a checkpoint (or this pass before a relist) shows them done;
    # absent from records of earlier runs, read as 0 (their identity is rewritten+unchanged+gone == listed)
    skipped_by_checkpoint: int = 0
    # objects listed but not written because they were last written after the HA barrier passed, with no
    # managedFields entry at another version (freshness.py); absent from older records, read as 0
    already_current: int = 0
    managed_fields_rewritten: int = 0
    managed_fields_dropped: int = 0
    objects_with_stale_managed_fields: int = 0
    # the proof behind the record (PROOFS); records written before it existed are read as "none"
    proof: str = PROOF_NONE
    # metadata.uid of the CRD the pass ran on: a record copied with the CRD's annotations onto another cluster (a
    # bundle exported with `kubectl get crd -o yaml`, a backup restore) names another uid and proves nothing there
    crd_uid: str = ""
    # how the HA barrier knew every apiserver wrote the new storage version before the pass (barrier.py): "single",
    # "endpoints", or "settle-fallback" (a wait, not an observation; a confirming pass cannot see a lagging member
    # that still encodes the old version, its bytes are equal), "" when not recorded
    barrier_mode: str = ""

    def to_annotation(self) -> str:
        return json.dumps({
            "proof": self.proof, "crdUid": self.crd_uid, "barrierMode": self.barrier_mode,
            "storageVersion": self.storage_version, "generation": self.generation,
            "startedAt": self.started_at, "completedAt": self.completed_at,
            "listed": self.listed, "rewritten": self.rewritten, "unchanged": self.unchanged,
            "gone": self.gone, "failed": self.failed, "skippedByCheckpoint": self.skipped_by_checkpoint,
            "alreadyCurrent": self.already_current,
            "managedFieldsRewritten": self.managed_fields_rewritten,
            "managedFieldsDropped": self.managed_fields_dropped,
            "objectsWithStaleManagedFields": self.objects_with_stale_managed_fields,
        }, separators=(",", ":"), sort_keys=True)

    @property
    def accounted(self) -> int:
        """Listed objects the record accounts for: written (rewritten or unchanged), gone, skipped as done, or
        already current (written after the barrier)."""
        return self.rewritten + self.unchanged + self.gone + self.skipped_by_checkpoint + self.already_current

    @classmethod
    def from_annotation(cls, text: str) -> MigrationRecord:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("record is not a JSON object")
        return cls(
            storage_version=str(data["storageVersion"]), generation=int(data["generation"]),
            started_at=str(data.get("startedAt", "")), completed_at=str(data.get("completedAt", "")),
            listed=int(data.get("listed", 0)), rewritten=int(data.get("rewritten", 0)),
            unchanged=int(data.get("unchanged", 0)), gone=int(data.get("gone", 0)),
            failed=int(data.get("failed", 0)), skipped_by_checkpoint=int(data.get("skippedByCheckpoint", 0)),
            already_current=int(data.get("alreadyCurrent", 0)),
            managed_fields_rewritten=int(data.get("managedFieldsRewritten", 0)),
            managed_fields_dropped=int(data.get("managedFieldsDropped", 0)),
            objects_with_stale_managed_fields=int(data.get("objectsWithStaleManagedFields", 0)),
            proof=str(data.get("proof") or PROOF_NONE), crd_uid=str(data.get("crdUid") or ""),
            barrier_mode=str(data.get("barrierMode") or ""),
        )

    def to_dict(self) -> Dict[str, Any]:
        data: Dict[str, Any] = json.loads(self.to_annotation())
        return data


@dataclass(frozen=True)
class RecordValidation:
    ok: bool
    reason: str
    record: Optional[MigrationRecord] = None

    def to_dict(self) -> Dict[str, Any]:
        out = dict(self.record.to_dict()) if self.record else {}
        out.update({"valid": self.ok, "reason": self.reason, "present": self.record is not None})
        return out


def foreign_reason(what: str, uid: str, crd: Crd) -> Optional[str]:
    """Why an annotation written for a CRD is not this CRD's (another uid, or none); None when it is."""
    if not uid:
        return ("unbound: the %s names no CRD uid (written before records were bound to their CRD, or made by "
                "hand) and proves nothing" % what)
    if uid != crd.uid:
        return ("foreign: the %s was written for CRD uid %s, this CRD's uid is %s: it came with the CRD's "
                "annotations from another cluster or an earlier install (a bundle exported with kubectl get crd, "
                "a restore) and proves nothing here" % (what, uid, crd.uid or "unknown"))
    return None


def validate_record(crd: Crd) -> RecordValidation:
    """Is there a record proving a complete, failure-free pass at the current storage version
    and generation? A stale record (storage version or generation differs) never authorises a trim.

    The counts must account for every listed object: rewritten + unchanged + gone + skipped_by_checkpoint +
    already_current == listed, and failed == 0. Every listed object is either skipped (done by an earlier run
    or before a relist; a relist lists such objects again, and each listing is counted once in both ``listed``
    and ``skipped_by_checkpoint``), already current (last written after the barrier passed, not written), or
    written exactly once, so the identity is exact. A record written before
    ``skippedByCheckpoint`` existed is read with 0 there: it is valid only if rewritten + unchanged + gone ==
    listed, so a pass that resumed from a checkpoint under an older version must run again."""
    text = crd.annotations.get(RECORD_ANNOTATION)
    if not text:
        return RecordValidation(False, "missing: no %s annotation on the CRD" % RECORD_ANNOTATION)
    try:
        record = MigrationRecord.from_annotation(text)
    except (ValueError, KeyError, TypeError) as exc:
        return RecordValidation(False, "unreadable: %s annotation is not a valid record (%s)"
                                % (RECORD_ANNOTATION, exc))
    foreign = foreign_reason("record", record.crd_uid, crd)
    if foreign:
        return RecordValidation(False, foreign + "; run the migration again", record)
    if record.storage_version != crd.storage_version:
        return RecordValidation(False, "stale: record is for storage version %s, the CRD's storage version is %s"
                                % (record.storage_version, crd.storage_version), record)
    if record.generation != crd.generation:
        return RecordValidation(False, "stale: record is for CRD generation %d, the CRD's generation is %d"
                                % (record.generation, crd.generation), record)
    if record.failed:
        return RecordValidation(False, "record reports %d failed objects" % record.failed, record)
    counts = (record.listed, record.rewritten, record.unchanged, record.gone, record.skipped_by_checkpoint,
              record.already_current)
    if min(counts) < 0 or record.accounted != record.listed:
        return RecordValidation(False, "unaccounted: record lists %d objects but accounts for %d (rewritten %d + "
                                "unchanged %d + gone %d + skipped by checkpoint %d + already current %d); run the "
                                "migration again" % (record.listed, record.accounted, record.rewritten,
                                                     record.unchanged, record.gone, record.skipped_by_checkpoint,
                                                     record.already_current), record)
    return RecordValidation(True, "valid: complete pass at storage version %s, generation %d, completed %s, proof %s%s"
                            % (record.storage_version, record.generation, record.completed_at, record.proof,
                               ", barrier %s" % record.barrier_mode if record.barrier_mode else ""), record)


# the counts a checkpoint carries to the run that resumes from it (record field names, snake case)
CARRIED_COUNTS = ("listed", "rewritten", "unchanged", "gone", "skipped_by_checkpoint", "already_current",
                  "managed_fields_rewritten", "managed_fields_dropped", "objects_with_stale_managed_fields")


@dataclass(frozen=True)
class Checkpoint:
    storage_version: str
    generation: int
    last: str  # key ("ns/name" or "name") of the last object of the last clean page, in list order
    started_at: str
    # the whole pass's counts through ``last`` (every run so far), so that the record of a resumed pass covers the
    # whole pass; None for a checkpoint written by an earlier version (then the resumed objects count as skipped only)
    counts: Optional[Dict[str, int]] = None
    crd_uid: str = ""  # the CRD it was written on: a copied checkpoint would skip objects never written here

    def to_annotation(self) -> str:
        data: Dict[str, Any] = {"storageVersion": self.storage_version, "generation": self.generation,
                                "last": self.last, "startedAt": self.started_at, "crdUid": self.crd_uid}
        if self.counts is not None:
            data["counts"] = dict((k, int(self.counts.get(k, 0))) for k in CARRIED_COUNTS)
        return json.dumps(data, separators=(",", ":"), sort_keys=True)


def _carried(data: Any) -> Optional[Dict[str, int]]:
    """The checkpoint's counts, or None when absent or not self-consistent (then nothing is carried)."""
    if not isinstance(data, dict):
        return None
    counts = dict((k, int(data.get(k, 0))) for k in CARRIED_COUNTS)
    accounted = (counts["rewritten"] + counts["unchanged"] + counts["gone"] + counts["skipped_by_checkpoint"]
                 + counts["already_current"])
    if min(counts.values()) < 0 or accounted != counts["listed"]:
        return None
    return counts


def read_checkpoint(crd: Crd) -> Tuple[Optional[Checkpoint], Optional[str]]:
    """Return (checkpoint, None) when a usable checkpoint exists, else (None, why-not or None)."""
    text = crd.annotations.get(CHECKPOINT_ANNOTATION)
    if not text:
        return None, None
    try:
        data = json.loads(text)
        ckpt = Checkpoint(str(data["storageVersion"]), int(data["generation"]), str(data["last"]),
                          str(data.get("startedAt", "")), _carried(data.get("counts")), str(data.get("crdUid") or ""))
    except (ValueError, KeyError, TypeError):
        return None, "checkpoint ignored: unreadable"
    if ckpt.storage_version != crd.storage_version or ckpt.generation != crd.generation:
        return None, ("checkpoint ignored: stale (storage version %s generation %d, CRD has %s generation %d)"
                      % (ckpt.storage_version, ckpt.generation, crd.storage_version, crd.generation))
    foreign = foreign_reason("checkpoint", ckpt.crd_uid, crd)
    if foreign:
        return None, "checkpoint ignored: %s" % foreign
    return ckpt, None


def _patch_annotations(transport: Transport, crd_name: str, annotations: Dict[str, Optional[str]],
                       resource_version: Optional[str] = None) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"annotations": annotations}
    if resource_version:
        meta["resourceVersion"] = resource_version
    resp = transport.request("PATCH", crd_path(crd_name), body=dumps({"metadata": meta}),
                             content_type=MERGE_PATCH)
    if not resp.ok:
        raise error_from_response(resp, "PATCH CRD annotations", cluster=transport.cluster_label, crd=crd_name)
    patched: Dict[str, Any] = resp.json()
    return patched


def write_checkpoint(transport: Transport, crd_name: str, checkpoint: Checkpoint) -> None:
    _patch_annotations(transport, crd_name, {CHECKPOINT_ANNOTATION: checkpoint.to_annotation()})


def clear_checkpoint(transport: Transport, crd_name: str) -> None:
    _patch_annotations(transport, crd_name, {CHECKPOINT_ANNOTATION: None})


def write_record(transport: Transport, started: Crd, record: MigrationRecord, attempts: int = 3) -> Crd:
    """Write ``record`` (and drop the checkpoint) if the CRD's storage version and generation are
    still those of ``started``; optimistic-locked on resourceVersion, re-checked on conflict."""
    from ..kube.selection import get_crd

    cluster = transport.cluster_label
    if record.failed:
        raise RecordError("refusing to record a pass with %d failures" % record.failed, cluster=cluster,
                          crd=started.name)
    last_error: Optional[CrdOpsError] = None
    for _attempt in range(max(1, attempts)):
        current = get_crd(transport, started.name)
        if current.uid != started.uid:
            raise RecordError("the CRD was deleted and created again during the pass (uid %s -> %s); record not "
                              "written, run the migration again" % (started.uid, current.uid),
                              cluster=cluster, crd=started.name)
        if current.storage_version != started.storage_version or current.generation != started.generation:
            raise RecordError(
                "CRD changed during the pass (storage version %s -> %s, generation %d -> %d); "
                "record not written, run the migration again"
                % (started.storage_version, current.storage_version, started.generation, current.generation),
                cluster=cluster, crd=started.name)
        if (record.storage_version != current.storage_version or record.generation != current.generation
                or record.crd_uid != current.uid):
            raise RecordError("record does not match the CRD", cluster=cluster, crd=started.name)
        try:
            body = _patch_annotations(
                transport, started.name,
                {RECORD_ANNOTATION: record.to_annotation(), CHECKPOINT_ANNOTATION: None},
                resource_version=current.resource_version)
            return Crd.from_api(body)
        except ConflictError as exc:
            last_error = exc
            continue
    if last_error is None:  # unreachable: the loop runs at least once and either returns or records a conflict
        raise RecordError("record not written", cluster=cluster, crd=started.name)
    raise last_error


def carry_record(transport: Transport, before: Crd, generation: int, attempts: int = 5) -> Optional[str]:
    """After our own spec write moved the CRD from ``before`` to ``generation`` (a release's apply, the removal of
    what it no longer declares), stamp the record with the new generation, so that a generation the record does not
    name keeps meaning a change nobody proved harmless (nothing_to_do.py). What the record proves holds on: every object is
    at the storage version, which our write did not change, and storedVersions shows nothing stored elsewhere since.

    Carried only when ``before``'s record was valid (this CRD's, its generation, its storage version), the write
    moved the generation by exactly one (nobody else's spec change in between) and the CRD still is as the write
    left it: that generation, storage version, storedVersions the storage version alone, the same record. Returns
    what happened, or None when there was no valid record to carry or no generation change."""
    check = validate_record(before)
    if not check.ok or check.record is None or generation == before.generation:
        return None
    if generation != before.generation + 1:
        return "not carried: generation %d -> %d, not our write alone" % (before.generation, generation)
    from ..kube.selection import get_crd

    text = before.annotations.get(RECORD_ANNOTATION)
    carried = replace(check.record, generation=generation)
    for _attempt in range(max(1, attempts)):
        current = get_crd(transport, before.name)
        if (current.uid != before.uid or current.generation != generation or current.needs_migration
                or current.storage_version != before.storage_version
                or current.annotations.get(RECORD_ANNOTATION) != text):
            return "not carried: the CRD changed after the write (generation %d, storedVersions %s)" % (
                current.generation, list(current.stored_versions))
        try:  # resourceVersion-locked: a status update in between (conditions) makes us look again
            _patch_annotations(transport, before.name, {RECORD_ANNOTATION: carried.to_annotation()},
                               resource_version=current.resource_version)
            return "carried to generation %d" % generation
        except ConflictError:
            continue
    return "not carried: the CRD kept changing (%d attempts)" % max(1, attempts)


@dataclass
class Proof:
    """What the pass's proof found: ``kind`` (PROOFS), whether it holds, why not, and its figures."""

    kind: str
    ok: bool
    reason: Optional[str] = None
    details: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"kind": self.kind, "ok": self.ok, "reason": self.reason}
        out.update(self.details or {})
        return out

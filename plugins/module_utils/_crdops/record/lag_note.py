# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""A lag an earlier run saw, kept on the CRD until a later run has drained after it (DESIGN invariant 12).

The drain counts from the barrier round in which the last lagging apiserver first reported the new storage version.
That round only exists in the run that saw the lag: a run whose barrier timed out (or was stopped) while a member
lagged leaves nothing behind, and the member may catch up before the next run's first poll. The next run would then
count from the flip alone, though that member swapped its storage only a moment ago and its requests begun with the
old storage may still commit. So a run writes the annotation ``migration.crdops.io/lagged`` in the barrier round that
first sees a member lag (:class:`LagKeeper`), not when it fails: a run killed later (SIGKILL, a lost controller host)
runs no exception path. The next run's barrier treats those members as having lagged (its window counts from the
first round of its final all-current streak). A run removes the annotation only after a complete drain counted from
an all-current round, and only the text it last wrote or read (a JSON patch ``test``).

The annotation is metadata only: kube-apiserver's crdHandler keeps a CRD's storage when neither spec nor accepted
names change (customresource_handler.go, updateCustomResourceDefinition), and the generation does not move, so the
write neither disturbs requests in flight nor stales a record. Release manifests never carry it (manifests.py drops
``migration.crdops.io/*``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..kube.crd import Crd, crd_path
from ..kube.errors import ConflictError, CrdOpsError
from ..kube.transport import JSON, JSON_PATCH, MERGE_PATCH, Transport, dumps, error_from_response

LAGGED_ANNOTATION = "migration.crdops.io/lagged"


@dataclass(frozen=True)
class LagNote:
    crd_uid: str
    storage_version: str
    members: List[str]
    seen_at: str  # RFC 1123 Date of the apiserver that answered the write: the last lag was seen at or before it

    def to_annotation(self) -> str:
        return json.dumps({"crdUid": self.crd_uid, "storageVersion": self.storage_version,
                           "members": sorted(set(self.members)), "seenAt": self.seen_at},
                          separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str) -> LagNote:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("members"), list):
            raise ValueError("not a lag note")
        return cls(str(data.get("crdUid") or ""), str(data.get("storageVersion") or ""),
                   [str(m) for m in data["members"]], str(data.get("seenAt") or ""))


def earlier_lag(crd: Crd) -> Optional[LagNote]:
    """The lag note that applies to ``crd`` as it is now: same uid and storage version; None otherwise.

    One for another storage version (the CRD flipped again since) or another uid (copied from elsewhere) says
    nothing about the storage this run will write with."""
    text = crd.annotations.get(LAGGED_ANNOTATION)
    if not text:
        return None
    try:
        note = LagNote.from_annotation(text)
    except (ValueError, TypeError):
        return None
    if note.crd_uid != crd.uid or note.storage_version != crd.storage_version:
        return None
    return note


def remember_lag(transport: Transport, crd: Crd, members: Sequence[str],
                 attempts: int = 3) -> Tuple[Optional[str], Optional[str]]:
    """Write (or widen) the lag note of ``crd``: (the note's text as written, None), or (None, why it was not).

    Optimistic-locked on the resourceVersion of the read that checked the CRD is still the one the barrier ran for
    (same uid, same storage version): a note must never land on a CRD flipped again meanwhile. The read's ``Date``
    is ``seenAt``, on the apiserver's clock, at or after the last round that saw a member lag."""
    for _attempt in range(max(1, attempts)):
        resp = transport.request("GET", crd_path(crd.name), accept=JSON)
        if not resp.ok:
            return None, str(error_from_response(resp, "GET CRD (lag note)", cluster=transport.cluster_label,
                                                 crd=crd.name))
        current = Crd.from_api(resp.json() or {})
        if current.uid != crd.uid or current.storage_version != crd.storage_version:
            return None, "the CRD changed (uid or storage version) since the barrier; no lag note written"
        known = earlier_lag(current)
        text = LagNote(crd.uid, crd.storage_version or "", list(members) + (known.members if known else []),
                       resp.header("Date") or "").to_annotation()
        body = {"metadata": {"resourceVersion": current.resource_version, "annotations": {LAGGED_ANNOTATION: text}}}
        patched = transport.request("PATCH", crd_path(crd.name), body=dumps(body), content_type=MERGE_PATCH)
        if patched.ok:
            return text, None
        err = error_from_response(patched, "PATCH CRD (lag note)", cluster=transport.cluster_label, crd=crd.name)
        if not isinstance(err, ConflictError):
            return None, str(err)
    return None, "the CRD kept changing (%d attempts); no lag note written" % max(1, attempts)


def forget_lag(transport: Transport, crd_name: str, text: str) -> Optional[str]:
    """Remove the lag note if it still reads ``text`` (a JSON patch ``test`` of its value, so a note another run
    wrote meanwhile stays); returns why it was not removed, or None."""
    path = "/metadata/annotations/" + LAGGED_ANNOTATION.replace("~", "~0").replace("/", "~1")
    ops: List[Dict[str, Any]] = [{"op": "test", "path": path, "value": text}, {"op": "remove", "path": path}]
    resp = transport.request("PATCH", crd_path(crd_name), body=dumps(ops), content_type=JSON_PATCH)
    if resp.ok:
        return None
    err: CrdOpsError = error_from_response(resp, "PATCH CRD (remove lag note)", cluster=transport.cluster_label,
                                           crd=crd_name)
    return "%s annotation left on the CRD (the next run waits a whole drain window again): %s" % (
        LAGGED_ANNOTATION, err)


class LagKeeper:
    """The lag note of one pass: written in the barrier round that first sees a member lag, removed after the drain.

    Written at once because nothing later is sure to run: a run killed inside its drain (SIGKILL, a lost controller
    host) leaves the note, and the next run drains a whole window after every member is current, though the flip
    is old by then and an update begun with the lagging member's old storage may still be in flight. Never written
    in check mode. ``text`` is the note on the CRD as this pass last read or wrote it: :meth:`forget` removes
    exactly that text, so a note another run wrote meanwhile stays."""

    def __init__(self, transport: Transport, crd: Crd, check_mode: bool = False) -> None:
        self.transport, self.crd, self.check_mode = transport, crd, check_mode
        note = earlier_lag(crd)
        self.earlier: List[str] = list(note.members) if note else []  # members an earlier run saw lag
        self.noted: List[str] = list(self.earlier)  # members the note on the CRD names now
        self.text: Optional[str] = crd.annotations.get(LAGGED_ANNOTATION) or None
        self.problem: Optional[str] = None  # why the last write of the note failed (None: it did not fail)

    def covers(self, members: Sequence[str]) -> bool:
        return all(m in self.noted for m in members)

    def seen(self, members: Sequence[str]) -> None:
        """The barrier's ``on_lag``: note ``members`` unless the note names them already. Never raises: the barrier
        goes on, and a pass that ends early tries again (:meth:`keep`)."""
        if self.check_mode or self.covers(members):
            return
        try:
            text, why = remember_lag(self.transport, self.crd, self.noted + [m for m in members if m not in self.noted])
        except CrdOpsError as exc:
            text, why = None, str(exc)
        if text is None:
            self.problem = why
            return
        self.text, self.problem = text, None
        self.noted = LagNote.from_annotation(text).members

    def keep(self, members: Sequence[str]) -> Optional[str]:
        """The pass ends early after ``members`` lagged: make sure the note names them; why it does not, or None."""
        if self.check_mode:
            return "check mode writes nothing"
        self.seen(members)
        return None if self.covers(members) else self.problem

    def forget(self) -> Optional[str]:
        """After a complete drain counted from an all-current round: remove the note as this pass last saw it (also
        one for another flip or CRD); why it stays, or None."""
        if self.check_mode or not self.text:
            return None
        why = forget_lag(self.transport, self.crd.name, self.text)
        if why is None:
            self.text, self.noted = None, []
        return why

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Is release N already in effect on a live CRD? Then the role's storage flip does not apply it again.

The role applies release N by server-side apply as its own field manager, forced. Where another client (Helm, Flux,
kubectl, a PUT) applied release N before, that apply changes nothing but ``managedFields``: it adds the role's entry
owning ``spec``, timed now. The drain before the proof (drain.py) counts from the newest ``time`` of an entry owning
``f:spec``, the only flip time the apiserver records, so that no-op apply cost a whole drain window where nothing
flipped. Hence the same apply (manager, force) is sent with ``dryRun=All`` first and its answer compared with the CRD
read just before (a quorum GET): release N is in effect when the two differ in nothing but ``managedFields`` and
``resourceVersion`` and the CRD is Established. The storage version is then already release N's: there is no flip.

What can write the CRD after the dry-run looked:

* Between the GET and the dry-run: the answer carries that write and differs from the GET, so the release counts as
  not in effect and is applied, as before. A dry-run answered from a stale copy differs from the GET as well, unless
  applying release N to the stale copy gives the live CRD, and then the conclusion holds for the live CRD.
* After the dry-run, before the apply would have been sent (a Helm or Flux rollback, an operator re-applying its
  CRD, someone flipping the storage back): not applying leaves the CRD as that writer left it, the state the run
  meets anyway when the writer comes just after its apply. No phase relies on the apply staying in effect: each
  reads the CRD again. The re-store re-reads it under the pass Lease, re-stores at the storage version it has then
  and plans its barrier from that read. The drain counts from the writer's time: the storage version is a field of
  ``spec.versions``, an atomic list, so a write that changes it owns that list, and its entry's ``time`` is set to
  the write's. The record names the storage version and generation it was made under and the verify compares them
  with the live CRD; the trim is optimistic-locked on the CRD's resourceVersion; the apiserver refuses release N+1
  while a version it removes is still stored. A writer after the dry-run costs at worst a refusal at one of those
  checks, never a record or a trim that does not hold.
* Nothing the drain counts from is lost by not applying: the newest ``spec`` owner's time is then the last real
  change of the spec, never earlier than the last storage flip (above).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ..kube.crd import is_established
from ..kube.errors import CrdOpsError
from ..kube.selection import get_crd_raw
from .crd_changes import VOLATILE_METADATA, apply_changes
from ..kube.transport import Transport

# what a no-op apply by a new manager still changes: who owns what, and when
OWNERSHIP = VOLATILE_METADATA + ("managedFields",)


def release_changes(transport: Transport, doc: Mapping[str, Any], field_manager: str) -> List[str]:
    """What applying release N's ``doc`` as ``field_manager`` (forced) would change on the live CRD besides field
    ownership; [] when release N is in effect. An error is a change: the real apply then reports it in its words."""
    name = str((doc.get("metadata") or {}).get("name") or "")
    try:
        live = get_crd_raw(transport, name)
        changes = [] if is_established(live) else ["the CRD is not Established"]
        return changes + apply_changes(transport, doc, field_manager, ignored=OWNERSHIP, release="release N",
                                       live=live)
    except (CrdOpsError, ValueError, KeyError, TypeError) as exc:  # TypeError, KeyError: a malformed manifest
        return ["could not check: %s" % exc]


def releases_in_effect(transport: Transport, docs: Sequence[Mapping[str, Any]], names: Sequence[str],
                       field_manager: str) -> Dict[str, List[str]]:
    """Per CRD of ``names`` that ``docs`` (release N) contains: what applying its document would change (above)."""
    out: Dict[str, List[str]] = {}
    for doc in docs:
        name = str((doc.get("metadata") or {}).get("name") or "")
        if name in names and name not in out:
            out[name] = release_changes(transport, doc, field_manager)
    return out

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Before a release removes versions: move the Helm releases that still declare them, where the names do not change.

``helm upgrade`` rebuilds the objects of the release's current revision from its stored manifest; one at a version
the CRD no longer serves fails the upgrade for good (helm/helm#7361). Under conversion ``None`` every version has the
same fields, so setting the stored documents' ``apiVersion`` to the storage version is what the object already is,
the way the helm-mapkubeapis plugin moves removed Kubernetes APIs. Under a conversion webhook the field names may
differ, so nothing is rewritten there: those releases hold the next release back until their chart moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..kube.crd import Crd
from ..kube.errors import CrdOpsError, NotFoundError
from .helm_releases import HelmScan, plan_rewrite, rewrite_release, scan_helm_releases
from ..kube.selection import get_crd
from ..kube.transport import Transport


@dataclass
class HelmMoves:
    """What was (in check mode: would be) rewritten, and what was left and why."""

    scan: Optional[HelmScan] = None
    rewritten: List[Dict[str, Any]] = field(default_factory=list)
    left: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"checked": self.scan.checked if self.scan else None, "note": self.scan.note if self.scan else None,
                "rewritten": list(self.rewritten), "left": list(self.left)}


def _live(transport: Transport, name: str) -> Optional[Crd]:
    try:
        return get_crd(transport, name)
    except NotFoundError:
        return None


def removals(transport: Transport, docs: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """CRD name -> (live CRD, versions the release removes, its storage version) for CRDs losing a version."""
    out: Dict[str, Any] = {}
    for doc in docs:
        release = Crd.from_api(dict(doc))  # the manifest read as a CRD: its versions and storage version
        live = _live(transport, release.name)
        declared = [v.name for v in release.versions]
        gone = [v.name for v in live.versions if v.name not in declared] if live else []
        if live is not None and gone and release.storage_version:
            out[release.name] = (live, gone, release.storage_version)
    return out


def move_helm_releases(transport: Transport, docs: Sequence[Mapping[str, Any]], check_mode: bool) -> HelmMoves:
    """Rewrite the Helm releases that declare a version ``docs`` remove, for CRDs with conversion None."""
    losing = removals(transport, docs)
    moves = HelmMoves()
    if not losing:
        return moves
    moves.scan = scan_helm_releases(transport, dict((n, (live.group, live.kind, gone))
                                                    for n, (live, gone, _s) in losing.items()))
    storage = dict((n, s) for n, (_live_crd, _g, s) in losing.items())
    plain = set(n for n, (live, _g, _s) in losing.items() if live.conversion_strategy == "None")
    for release in moves.scan.releases:
        crds = sorted(set(o.crd for o in release.objects))
        if any(c not in plain for c in crds):
            moves.left.append("%s: declares %s, converted by a webhook (field names may differ): move its chart"
                              % (release.label, ", ".join(c for c in crds if c not in plain)))
            continue
        try:
            if check_mode:
                plan_rewrite(transport, release, storage)
            else:
                rewrite_release(transport, release, storage)
        except CrdOpsError as exc:
            moves.left.append("%s: %s" % (release.label, exc.message))
            continue
        moves.rewritten.append({"release": release.label, "revision": release.revision,
                                "objects": [dict(o.to_dict(), to=storage[o.crd]) for o in release.objects]})
    return moves

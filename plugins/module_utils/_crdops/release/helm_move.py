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

Each rewrite is a new revision of the release (helm_releases.py), as helm-mapkubeapis writes it. One that fails
holds the next release back for the CRDs its release declares: applied, it would leave a release that every later
``helm upgrade`` fails on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..kube.crd import Crd
from ..kube.errors import CrdOpsError, NotFoundError
from .helm_releases import HelmRelease, HelmScan, look_up_releases, plan_rewrite, rewrite_release, scan_helm_releases
from ..kube.selection import get_crd
from ..kube.transport import Transport


def rewrite_sentence(r: Mapping[str, Any]) -> str:
    """One rewrite in words: the new revision, and that a rollback behind it still names the removed version."""
    removed = ", ".join(sorted(set(o["apiVersion"] for o in r["objects"])))
    return ("Helm release %s: revision %d stores the moved manifest (%s); revision %d is superseded. A rollback to "
            "revision %d or earlier still declares %s and fails, as after helm-mapkubeapis: upgrade or roll back to "
            "revision %d or later" % (r["release"], r["revision"], r["description"], r["previous_revision"],
                                      r["previous_revision"], removed, r["revision"]))


@dataclass
class HelmMoves:
    """What was (in check mode: would be) rewritten, what was left and why, and the rewrites that failed: each of
    those holds release N+1 back for the CRDs its release declares (``held_back``)."""

    scan: Optional[HelmScan] = None
    rewritten: List[Dict[str, Any]] = field(default_factory=list)
    left: List[str] = field(default_factory=list)
    failed: List[Dict[str, Any]] = field(default_factory=list)  # release, crds, why
    removed: Dict[str, List[str]] = field(default_factory=dict)  # CRD name -> the versions the release removes

    def to_dict(self) -> Dict[str, Any]:
        return {"checked": self.scan.checked if self.scan else None, "note": self.scan.note if self.scan else None,
                "rewritten": list(self.rewritten), "left": list(self.left), "failed": list(self.failed)}

    def held_back(self) -> List[Dict[str, Any]]:
        """Per CRD a failed rewrite holds back: as the role's held-back entries (crd, removed_versions, clients,
        fix)."""
        out: Dict[str, Dict[str, Any]] = {}
        for fail in self.failed:
            for crd in fail["crds"]:
                entry = out.setdefault(crd, {"crd": crd, "removed_versions": list(self.removed.get(crd) or []),
                                             "clients": [], "fix": REWRITE_FIX})
                entry["clients"].append("Helm release %s not rewritten as a new revision: %s"
                                        % (fail["release"], fail["why"]))
        return [out[name] for name in sorted(out)]

    def words(self) -> List[str]:
        """One sentence per release rewritten: what moved, and what a rollback to an older revision does."""
        return [rewrite_sentence(r) for r in self.rewritten]


REWRITE_FIX = ("let the Helm operation finish, or grant what the error names (docs/rbac.md), then run again; or "
               "upgrade the release with its chart moved to the version that stays (or accept it by name)")


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


def move_helm_releases(transport: Transport, docs: Sequence[Mapping[str, Any]], check_mode: bool,
                       named: Sequence[str] = ()) -> HelmMoves:
    """Rewrite the Helm releases that declare a version ``docs`` remove, for CRDs with conversion None, each as a
    new revision. ``named``: releases (namespace/name) to read in their own namespace when the lists of all
    namespaces do not show them (those the writers check found so); one that cannot be read fails. A rewrite that
    fails (forbidden, a conflict, a pending operation) is in ``failed``."""
    losing = removals(transport, docs)
    moves = HelmMoves(removed=dict((n, list(gone)) for n, (_live, gone, _s) in losing.items()))
    if not losing:
        return moves
    targets = dict((n, (live.group, live.kind, gone)) for n, (live, gone, _s) in losing.items())
    moves.scan = look_up_releases(transport, scan_helm_releases(transport, targets), named, targets)
    for label, why in sorted(moves.scan.not_checked.items()):
        moves.failed.append({"release": label, "crds": sorted(losing), "why": "not read: %s" % why})
    storage = dict((n, s) for n, (_live_crd, _g, s) in losing.items())
    plain = set(n for n, (live, _g, _s) in losing.items() if live.conversion_strategy == "None")
    for release in moves.scan.releases:
        crds = sorted(set(o.crd for o in release.objects))
        if any(c not in plain for c in crds):
            moves.left.append("%s: declares %s, converted by a webhook (field names may differ): move its chart"
                              % (release.label, ", ".join(c for c in crds if c not in plain)))
            continue
        _move_one(transport, release, storage, check_mode, moves)
    return moves


def _move_one(transport: Transport, release: HelmRelease, storage: Mapping[str, str], check_mode: bool,
              moves: HelmMoves) -> None:
    crds = sorted(set(o.crd for o in release.objects))
    try:
        plan = plan_rewrite(transport, release, storage)
        done = release if check_mode else rewrite_release(transport, release, storage)
    except CrdOpsError as exc:
        moves.failed.append({"release": release.label, "crds": crds, "why": exc.message})
        return
    moves.rewritten.append({"release": release.label, "driver": release.driver, "previous_revision": release.revision,
                            "revision": done.revision if not check_mode else plan.revision,
                            "description": plan.description,
                            "objects": [dict(o.to_dict(), to=storage[o.crd]) for o in release.objects]})

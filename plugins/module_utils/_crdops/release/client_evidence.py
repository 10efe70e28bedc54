# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What one object says about the clients of a version the next release removes, and where their source is.

- An ``Apply`` entry at such a version is its applier's declaration: Flux, Argo CD, kubectl ``--server-side`` or
  Helm send their whole manifest at the version it names on every apply, so the entry means the source (Git, a
  chart) still says that version, however old the entry is. Appliers in sync write nothing (they dry-run and write
  on drift only), so the entry's ``time`` says nothing about whether they are still there.
- kubectl's ``last-applied-configuration`` annotation at such a version is the client-side applier's declaration,
  for the same reason (kubectl apply without ``--server-side``, Argo CD's default sync).
- An ``Update`` entry at such a version written at or after ``since`` is a controller still writing there; an older
  one is a leftover of a one-time create or edit.

Where the objects say which source applied them, the sentence names it, so that a report turns into one change per
source: Flux's Kustomization labels, Argo CD's tracking annotation or instance label, Helm's release annotations.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple

from ..ha.server_clock import parse_time
from ..ownership.last_applied import LAST_APPLIED, annotation_owner, applied_version

DECLARES = "declares"  # an Apply entry: the applier's source still says the version
DECLARES_CLIENT_SIDE = "declares (client-side apply)"  # kubectl's last-applied annotation says the version
WRITES = "writes"  # an Update entry written since the run began (the flip): a controller still writing there
DECLARES_HELM = "declares (Helm release)"  # the release's stored manifest says the version (helm_releases.py)
# a release the objects name whose storage could not be read (forbidden, SQL driver, not found): it may declare it
NOT_CHECKED_HELM = "not checked (Helm release)"
KINDS = (DECLARES, DECLARES_CLIENT_SIDE, DECLARES_HELM, NOT_CHECKED_HELM, WRITES)

FLUX_NAME, FLUX_NAMESPACE = "kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace"
FLUX_KUSTOMIZATION, HELM_RELEASE = "Flux Kustomization", "Helm release"
ARGO_TRACKING, INSTANCE = "argocd.argoproj.io/tracking-id", "app.kubernetes.io/instance"
HELM_NAME, HELM_NAMESPACE = "meta.helm.sh/release-name", "meta.helm.sh/release-namespace"


class Evidence(NamedTuple):
    """One object's sign of a client at a version being removed."""

    kind: str  # KINDS
    manager: str
    operation: str
    version: str
    subresource: str
    written: float  # the entry's time (apiserver clock); 0 when unknown


class Source(NamedTuple):
    """The thing to edit so that the client moves: ``what`` (Flux Kustomization, ...), its ``ref``, and what its
    own controller says of it (``says``: where its source is, or why it was not asked; "" when nobody was)."""

    what: str
    ref: str
    says: str = ""

    def __str__(self) -> str:
        return "%s %s%s" % (self.what, self.ref, " (%s)" % self.says if self.says else "")

    def to_dict(self) -> Dict[str, Any]:
        return {"what": self.what, "ref": self.ref, "says": self.says or None}


def _mapping(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sources_of(meta: Mapping[str, Any]) -> List[Source]:
    """The GitOps or Helm sources the object's own labels and annotations name."""
    labels: Dict[str, Any] = _mapping(meta.get("labels"))
    annotations: Dict[str, Any] = _mapping(meta.get("annotations"))
    out = []
    if labels.get(FLUX_NAME):
        out.append(Source(FLUX_KUSTOMIZATION, "%s/%s" % (labels.get(FLUX_NAMESPACE) or "?", labels[FLUX_NAME])))
    if annotations.get(ARGO_TRACKING):
        # <application>:<group>/<kind>:<namespace>/<name>; the application is what to edit
        out.append(Source("Argo CD Application", str(annotations[ARGO_TRACKING]).split(":", 1)[0]))
    elif labels.get(INSTANCE) and not annotations.get(HELM_NAME):
        out.append(Source("Argo CD Application (instance label)", str(labels[INSTANCE])))
    if annotations.get(HELM_NAME):
        out.append(Source(HELM_RELEASE, "%s/%s" % (annotations.get(HELM_NAMESPACE) or "?", annotations[HELM_NAME])))
    return out


def _split(api_version: Any) -> Tuple[str, str]:
    group, _sep, version = str(api_version or "").rpartition("/")
    return group, version


def _at_removed(entry: Mapping[str, Any], group: str, removed: List[str]) -> bool:
    grp, version = _split(entry.get("apiVersion"))
    return grp == group and version in removed


def entry_evidence(entry: Mapping[str, Any], group: str, removed: List[str], since: float) -> Optional[Evidence]:
    """The evidence of one managedFields entry; None for an entry at a version that stays, or a leftover."""
    if not _at_removed(entry, group, removed):
        return None
    version = _split(entry.get("apiVersion"))[1]
    written = parse_time(entry.get("time")) or 0.0
    operation = str(entry.get("operation") or "")
    if operation == "Apply":
        kind = DECLARES
    elif written and written >= since:
        kind = WRITES
    else:
        return None
    return Evidence(kind, str(entry.get("manager") or ""), operation, version, str(entry.get("subresource") or ""),
                    written)


def annotation_evidence(meta: Mapping[str, Any], group: str, removed: List[str]) -> Optional[Evidence]:
    """kubectl's last-applied annotation at a version being removed, credited to the entry that owns it."""
    annotations = meta.get("annotations")
    found = applied_version(annotations.get(LAST_APPLIED), group) if isinstance(annotations, dict) else None
    if found is None or found[1] not in removed:
        return None
    entries = meta.get("managedFields") or []
    owner, _why = annotation_owner(entries)
    owned = [e for e in entries if isinstance(e, dict) and owner and e.get("manager") == owner]
    written = max((parse_time(e.get("time")) or 0.0 for e in owned), default=0.0)
    return Evidence(DECLARES_CLIENT_SIDE, owner or "kubectl (client-side apply)", "Update", found[1], "", written)


def object_evidence(meta: Mapping[str, Any], group: str, removed: List[str], since: float) -> Iterator[Evidence]:
    """Every sign on one object (metadata as listed) of a client at a version in ``removed``."""
    for entry in meta.get("managedFields") or ():
        if isinstance(entry, dict):
            found = entry_evidence(entry, group, removed, since)
            if found is not None:
                yield found
    annotation = annotation_evidence(meta, group, removed)
    if annotation is not None:
        yield annotation


def leftovers(meta: Mapping[str, Any], group: str, removed: List[str], since: float) -> int:
    """The object's Update entries at a removed version that are not evidence (written before ``since``): one-time
    writes the managedFields passes fix."""
    return sum(1 for entry in meta.get("managedFields") or ()
               if isinstance(entry, dict) and entry.get("operation") != "Apply" and _at_removed(entry, group, removed)
               and entry_evidence(entry, group, removed, since) is None)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Plan against the next release's CRD manifests: which still-stored versions would it remove?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..kube.crd import Crd
from ..kube.errors import BadInputError
from ..kube.manifests import ManifestSet, read_manifests


@dataclass(frozen=True)
class TargetCrd:
    name: str
    versions: Tuple[str, ...]
    storage_version: Optional[str]
    source: str

    def blocked_removals(self, crd: Crd) -> List[str]:
        """Versions still in status.storedVersions that the target removes from spec.versions:
        applying the target would be refused by the apiserver (the skip-a-version trap)."""
        return [v for v in crd.stored_versions if v not in self.versions]

    def removed_versions(self, crd: Crd) -> List[str]:
        return [v.name for v in crd.versions if v.name not in self.versions]


def _target_from_doc(doc: Dict[str, Any], source: str) -> TargetCrd:
    name = doc["metadata"]["name"]
    versions = (doc.get("spec") or {}).get("versions")
    if not isinstance(versions, list) or not versions:
        raise BadInputError("%s: CRD manifest needs a non-empty spec.versions" % source)
    names = []
    storage = None
    for v in versions:
        if not isinstance(v, dict) or not v.get("name"):
            raise BadInputError("%s: every spec.versions entry needs a name" % source)
        names.append(str(v["name"]))
        if v.get("storage"):
            storage = str(v["name"])
    return TargetCrd(name=str(name), versions=tuple(names), storage_version=storage, source=source)


def targets_of(manifests: ManifestSet) -> Dict[str, TargetCrd]:
    """name -> TargetCrd for the CRDs of a ManifestSet; a CRD given twice is an error naming both places."""
    targets: Dict[str, TargetCrd] = {}
    for manifest in manifests.crds:
        target = _target_from_doc(manifest.doc, manifest.label)
        if target.name in targets:
            raise BadInputError("%s: CRD %s already given in %s" % (manifest.label, target.name,
                                                                    targets[target.name].source))
        targets[target.name] = target
    return targets


def load_targets(manifests: Sequence[Any]) -> Dict[str, TargetCrd]:
    """Target CRD manifests (YAML file paths or globs, multi-document; or CRDs as dicts) -> name -> TargetCrd.

    Documents that are not CRDs are skipped (manifests.read_manifests); use it and targets_of to see them.
    """
    return targets_of(read_manifests(manifests, label="target_manifests"))


def plan_for(crd: Crd, targets: Dict[str, TargetCrd]) -> Dict[str, Any]:
    target = targets.get(crd.name)
    if target is None:
        return {"target_found": False, "target_storage_version": None, "blocked_removals": [],
                "removed_versions": []}
    return {"target_found": True, "target_storage_version": target.storage_version,
            "blocked_removals": target.blocked_removals(crd), "removed_versions": target.removed_versions(crd)}

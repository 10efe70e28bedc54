# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Plan against the next release's CRD manifests: which still-stored versions would it remove?"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .crd import Crd
from .errors import BadInputError

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False


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


def _target_from_doc(doc: Any, source: str) -> TargetCrd:
    if not isinstance(doc, dict):
        raise BadInputError("%s: not a mapping" % source)
    if doc.get("kind") != "CustomResourceDefinition" or not str(doc.get("apiVersion", "")).startswith(
            "apiextensions.k8s.io/"):
        raise BadInputError("%s: not a CustomResourceDefinition (apiVersion=%r, kind=%r)"
                            % (source, doc.get("apiVersion"), doc.get("kind")))
    name = (doc.get("metadata") or {}).get("name")
    versions = (doc.get("spec") or {}).get("versions")
    if not name or not isinstance(versions, list) or not versions:
        raise BadInputError("%s: CRD manifest needs metadata.name and a non-empty spec.versions" % source)
    names = []
    storage = None
    for v in versions:
        if not isinstance(v, dict) or not v.get("name"):
            raise BadInputError("%s: every spec.versions entry needs a name" % source)
        names.append(str(v["name"]))
        if v.get("storage"):
            storage = str(v["name"])
    return TargetCrd(name=str(name), versions=tuple(names), storage_version=storage, source=source)


def _docs_of(item: Any, index: int) -> List[Tuple[Any, str]]:
    if isinstance(item, dict):
        label = "target_manifests[%d]" % index
        if item.get("kind") == "List" or (item.get("kind", "").endswith("List") and "items" in item):
            return [(d, "%s.items[%d]" % (label, i)) for i, d in enumerate(item.get("items") or [])]
        return [(item, label)]
    if isinstance(item, str):
        if not HAS_YAML:
            raise BadInputError("PyYAML is required to read target_manifests files")
        try:
            with open(item, encoding="utf-8") as f:
                docs = list(yaml.safe_load_all(f))
        except OSError as exc:
            raise BadInputError("cannot read target manifest %s: %s" % (item, exc.strerror or exc)) from exc
        except yaml.YAMLError as exc:
            raise BadInputError("target manifest %s is not valid YAML: %s" % (item, exc)) from exc
        out: List[Tuple[Any, str]] = []
        for i, d in enumerate(docs):
            if d is None:
                continue  # empty document (e.g. trailing ---)
            label = "%s document %d" % (item, i)
            if isinstance(d, dict) and d.get("kind") == "List":
                out.extend((x, "%s items[%d]" % (label, j)) for j, x in enumerate(d.get("items") or []))
            else:
                out.append((d, label))
        return out
    raise BadInputError("target_manifests[%d]: expected a file path or a CRD dict, got %s"
                        % (index, type(item).__name__))


def load_targets(manifests: Sequence[Any]) -> Dict[str, TargetCrd]:
    """Parse target CRD manifests (dicts or YAML file paths, multi-document) into name -> TargetCrd."""
    targets: Dict[str, TargetCrd] = {}
    for index, item in enumerate(manifests or ()):
        for doc, source in _docs_of(item, index):
            target = _target_from_doc(doc, source)
            if target.name in targets:
                raise BadInputError("%s: CRD %s already given in %s" % (source, target.name,
                                                                        targets[target.name].source))
            targets[target.name] = target
    return targets


def plan_for(crd: Crd, targets: Dict[str, TargetCrd]) -> Dict[str, Any]:
    target = targets.get(crd.name)
    if target is None:
        return {"target_found": False, "target_storage_version": None, "blocked_removals": [],
                "removed_versions": []}
    return {"target_found": True, "target_storage_version": target.storage_version,
            "blocked_removals": target.blocked_removals(crd), "removed_versions": target.removed_versions(crd)}

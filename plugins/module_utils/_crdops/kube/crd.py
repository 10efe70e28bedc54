# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Typed, read-only view of a CustomResourceDefinition (from its raw JSON)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def crd_path(name: str) -> str:
    return "%s/%s" % (CRD_API, name)


@dataclass(frozen=True)
class CrdVersion:
    name: str
    served: bool
    storage: bool
    deprecated: bool = False

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "served": self.served, "storage": self.storage,
                "deprecated": self.deprecated}


@dataclass(frozen=True)
class Crd:
    name: str
    group: str
    plural: str
    kind: str
    scope: str
    versions: Tuple[CrdVersion, ...]
    stored_versions: Tuple[str, ...]
    conversion_strategy: str = "None"
    conversion_webhook: Optional[Dict[str, Any]] = None
    generation: int = 0
    resource_version: str = ""
    uid: str = ""
    annotations: Dict[str, str] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)
    # the webhook's CA (base64 PEM): kept out of conversion_webhook and to_dict, only for calling a url: webhook
    conversion_ca_bundle: str = field(default="", repr=False)

    @classmethod
    def from_api(cls, obj: Dict[str, Any]) -> Crd:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        names = spec.get("names") or {}
        versions = tuple(
            CrdVersion(
                name=str(v.get("name")),
                served=bool(v.get("served")),
                storage=bool(v.get("storage")),
                deprecated=bool(v.get("deprecated", False)),
            )
            for v in spec.get("versions") or []
        )
        conversion = spec.get("conversion") or {}
        webhook = None
        ca_bundle = ""
        if conversion.get("webhook"):
            webhook = copy.deepcopy(conversion["webhook"])
            cc = webhook.get("clientConfig")
            if isinstance(cc, dict):
                ca_bundle = str(cc.pop("caBundle", None) or "")
        return cls(
            name=str(meta.get("name", "")),
            group=str(spec.get("group", "")),
            plural=str(names.get("plural", "")),
            kind=str(names.get("kind", "")),
            scope=str(spec.get("scope", "Namespaced")),
            versions=versions,
            stored_versions=tuple(status.get("storedVersions") or ()),
            conversion_strategy=str(conversion.get("strategy") or "None"),
            conversion_webhook=webhook,
            generation=int(meta.get("generation") or 0),
            resource_version=str(meta.get("resourceVersion") or ""),
            uid=str(meta.get("uid") or ""),
            annotations=dict(meta.get("annotations") or {}),
            labels=dict(meta.get("labels") or {}),
            conversion_ca_bundle=ca_bundle,
        )

    @property
    def namespaced(self) -> bool:
        return self.scope == "Namespaced"

    @property
    def storage_version(self) -> Optional[str]:
        for v in self.versions:
            if v.storage:
                return v.name
        return None

    @property
    def served_versions(self) -> List[str]:
        return [v.name for v in self.versions if v.served]

    @property
    def needs_migration(self) -> bool:
        return list(self.stored_versions) != [self.storage_version]

    def resource_path(self, version: Optional[str] = None, namespace: Optional[str] = None,
                      name: Optional[str] = None) -> str:
        """``/apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>]`` (default: storage version)."""
        ver = version or self.storage_version
        path = "/apis/%s/%s" % (self.group, ver)
        if namespace:
            path += "/namespaces/%s" % namespace
        path += "/%s" % self.plural
        if name:
            path += "/%s" % name
        return path

    def conversion_dict(self) -> Dict[str, Any]:
        return {"strategy": self.conversion_strategy, "webhook": copy.deepcopy(self.conversion_webhook)}

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "plural": self.plural,
            "kind": self.kind,
            "scope": self.scope,
            "versions": [v.to_dict() for v in self.versions],
            "storage_version": self.storage_version,
            "stored_versions": list(self.stored_versions),
            "needs_migration": self.needs_migration,
            "conversion": self.conversion_dict(),
            "generation": self.generation,
            "resource_version": self.resource_version,
            "uid": self.uid,
        }


def stale_managed_fields_of(managed_fields: Any, group: str, served: List[str]) -> List[Dict[str, Any]]:
    """Entries whose apiVersion (``group/version``) is no longer served (kubernetes#111937)."""
    out = []
    for entry in managed_fields or ():
        api_version = str(entry.get("apiVersion", ""))
        if "/" not in api_version:
            continue
        grp, ver = api_version.rsplit("/", 1)
        if grp == group and ver not in served:
            out.append({"manager": entry.get("manager"), "operation": entry.get("operation"),
                        "apiVersion": api_version})
    return out


def is_established(crd: Mapping[str, Any]) -> bool:
    """Whether a CRD as the apiserver sent it reports the condition Established True (its names are accepted)."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Established" and c.get("status") == "True"
               for c in conditions)

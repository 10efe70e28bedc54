# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What a Flux Kustomization's own controller says its source declares now.

Flux applies on drift only: when a source changes nothing but an object's ``apiVersion``, the converted object
is equal to the live one, Flux sends nothing, and its ``Apply`` managedFields entry stays at the old version
although Git has moved. The entry then says nothing about the source any more. The Kustomization does:
kustomize-controller rewrites ``status.inventory.entries[]`` after every reconcile from the change set of its
apply, unchanged objects included (``internal/inventory/inventory.go``, ``AddChangeSet``). Each entry is
``{"id": "<namespace>_<name>_<group>_<Kind>", "v": "<version>"}``: ``id`` is cli-utils' ``ObjMetadata.String()``
(a ``:`` in the name written ``__``), ``v`` the version of the object as its source declared it on that
reconcile (``GroupVersion`` of an ``fluxcd/pkg/ssa`` change set entry).

A Kustomization that cannot be read (not found, forbidden, the CRD not installed) or whose inventory cannot be
parsed is "not asked": the objects' own evidence stands, and the reason is said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from ..kube.transport import JSON, Transport
from .client_evidence import _mapping

KUSTOMIZE_GROUP = "kustomize.toolkit.fluxcd.io"
# newest first: v1 since Flux 2.0; v1beta2 where an older Flux still serves only that
KUSTOMIZE_VERSIONS = ("v1", "v1beta2")
FLUX_MANAGER = "kustomize-controller"  # the field manager kustomize-controller applies as (its controller name)
GET_PERMISSION = "get on kustomizations.%s" % KUSTOMIZE_GROUP


def inventory_id(namespace: str, name: str, group: str, kind: str) -> str:
    """The id kustomize-controller gives an object in its inventory (cli-utils ``ObjMetadata.String()``)."""
    return "%s_%s_%s_%s" % (namespace, name.replace(":", "__"), group, kind)


@dataclass
class Kustomization:
    """One Kustomization as its controller left it: the inventory, and where its source is."""

    ref: str  # namespace/name
    entries: Dict[str, str] = field(default_factory=dict)  # inventory id -> version
    says: str = ""  # "GitRepository flux-system/repo, path ./apps, revision main@sha1:..."
    not_asked: Optional[str] = None  # why the inventory was not read; None when it was

    def declared_version(self, namespace: str, name: str, group: str, kind: str) -> Optional[str]:
        """The version the source declared the object at on the last reconcile; None when not known."""
        if self.not_asked is not None:
            return None
        return self.entries.get(inventory_id(namespace, name, group, kind))

    def words(self) -> str:
        """What the source sentence says of it: where its source is, or why the controller was not asked."""
        if self.not_asked is not None:
            return "inventory not asked: %s" % self.not_asked
        return self.says


def _source_words(ref_namespace: str, spec: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    source = _mapping(spec.get("sourceRef"))
    parts = []
    if source.get("name"):
        parts.append("%s %s/%s" % (source.get("kind") or "source", source.get("namespace") or ref_namespace,
                                   source["name"]))
    if spec.get("path"):
        parts.append("path %s" % spec["path"])
    if status.get("lastAppliedRevision"):
        parts.append("revision %s" % status["lastAppliedRevision"])
    return ", ".join(parts)


def parse_inventory(status: Mapping[str, Any]) -> Dict[str, str]:
    """``status.inventory.entries`` as id -> version; ValueError when it is not the controller's shape."""
    inventory = status.get("inventory")
    if inventory is None:
        raise ValueError("no status.inventory (not reconciled yet, or an inventory-less Flux)")
    entries = inventory.get("entries") if isinstance(inventory, dict) else None
    if inventory == {} or entries is None:
        return {}  # an empty inventory: the controller applied nothing
    if not isinstance(entries, list):
        raise ValueError("status.inventory.entries is not a list")
    out: Dict[str, str] = {}
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("v"), str)):
            raise ValueError("status.inventory.entries has an entry without a string id and v")
        out[entry["id"]] = entry["v"]
    return out


def kustomization_of(ref: str, body: Mapping[str, Any]) -> Kustomization:
    """A Kustomization from its API object."""
    spec, status = _mapping(body.get("spec")), _mapping(body.get("status"))
    says = _source_words(ref.split("/", 1)[0], spec, status)
    try:
        return Kustomization(ref, parse_inventory(status), says)
    except ValueError as exc:
        return Kustomization(ref, says=says, not_asked=str(exc))


class FluxInventories:
    """The Kustomizations the objects name, each read once (GET, so only ``get`` is needed)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._read: Dict[str, Kustomization] = {}

    def get(self, ref: str) -> Kustomization:
        if ref not in self._read:
            self._read[ref] = self._fetch(ref)
        return self._read[ref]

    def _fetch(self, ref: str) -> Kustomization:
        namespace, _sep, name = ref.partition("/")
        if not namespace or not name or namespace == "?":
            return Kustomization(ref, not_asked="the objects' Flux labels do not name its namespace and name")
        answers: List[str] = []
        for version in KUSTOMIZE_VERSIONS:
            path = "/apis/%s/%s/namespaces/%s/kustomizations/%s" % (KUSTOMIZE_GROUP, version, namespace, name)
            resp = self.transport.request("GET", path, accept=JSON)
            if resp.ok:
                return kustomization_of(ref, resp.json())
            if resp.status in (401, 403):
                return Kustomization(ref, not_asked="reading it is forbidden (HTTP %d); grant %s (docs/rbac.md)"
                                     % (resp.status, GET_PERMISSION))
            if resp.status != 404:
                return Kustomization(ref, not_asked="GET answered HTTP %d %s" % (resp.status, resp.api_message()))
            answers.append(version)
        return Kustomization(ref, not_asked="not found at %s: the Kustomization is gone, or Flux's %s is not "
                             "installed" % (" or ".join(answers), KUSTOMIZE_GROUP))

    def asked(self) -> List[Kustomization]:
        return [self._read[ref] for ref in sorted(self._read)]

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The live CRD follows the release that was applied: fields the previous release declared and the applied
one no longer declares are removed, whoever owns them.

Server-side apply removes a field a manifest stopped declaring only when the applying manager was its sole
owner. A CRD first created by ``kubectl create``, Helm or an operator keeps that creator as a co-owner of
every field, so a forced apply of the next release leaves the fields the release dropped in place (seen:
cert-manager v1.7.1 has no ``spec.conversion``; after the apply the CRDs still said ``conversion: Webhook``,
pointing at a webhook that was no longer deployed).

What is removed: paths of the previous release's manifest that the applied manifest does not have. Under
``spec`` a dropped struct goes whole, with whatever other tools wrote inside it (cert-manager's cainjector
writes ``spec.conversion.webhook.clientConfig.caBundle``: once ``spec.conversion`` is dropped a leftover
``caBundle`` is not valid on its own), and is reported with those fields. Labels and annotations are maps of
independent keys: only the keys the previous release declared go. A field no release declared stays (the
``caBundle`` while ``spec.conversion`` is still declared). Every list of a CRD is atomic for server-side
apply (``+listType=atomic`` in apiextensions/v1), so a list is one field here.

How: one JSON patch per CRD, a ``test`` of ``metadata.resourceVersion`` first, then a ``remove`` per path.
The apiserver applies it whole or not at all, only to the CRD that was read; a writer in between makes the
``test`` fail and the CRD is read again. The same patch is sent with ``dryRun=All`` first: a field the
apiserver defaults when absent (``spec.conversion`` comes back as ``strategy: None``) is already as the release
leaves it, so a CRD whose dry-run changes nothing is left alone and nothing is reported (a rerun is a no-op).
A remove-only patch gives the patching manager no field, and the apiserver takes the removed fields out of
every manager's ``managedFields``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..kube.crd import Crd, crd_path
from ..kube.errors import CrdOpsError
from ..record.record import carry_record
from ..kube.selection import get_crd_raw
from ..kube.transport import JSON_PATCH, Transport, dumps, error_from_response

Path = Tuple[str, ...]
# maps whose keys are independent values, not the fields of one struct
_KEYED_MAPS: Tuple[Path, ...] = (("metadata", "labels"), ("metadata", "annotations"))
_ROOTS: Tuple[Path, ...] = _KEYED_MAPS + (("spec",),)
MAX_ATTEMPTS = 3  # a CRD written by someone else between our read and our patch is read again


class FollowError(CrdOpsError):
    """A field the applied release no longer declares could not be removed."""

    kind = "release_follow"


def _walk(value: Any, prefix: Path, out: Dict[Path, Any]) -> None:
    out[prefix] = value
    if isinstance(value, dict):
        for key, child in value.items():
            _walk(child, prefix + (str(key),), out)


def declared(doc: Mapping[str, Any]) -> Dict[Path, Any]:
    """Every path a CRD manifest sets under spec, labels and annotations (a list is one value)."""
    out: Dict[Path, Any] = {}
    for root in _ROOTS:
        node: Any = doc
        for key in root:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            for key, child in node.items():
                _walk(child, root + (str(key),), out)
    return out


def dropped_paths(previous: Mapping[str, Any], applied: Mapping[str, Any]) -> List[Path]:
    """The topmost paths the previous manifest declares and the applied one does not; sorted."""
    before = declared(previous)
    after = declared(applied)
    out = []
    for path in before:
        if path in after:
            continue
        parent = path[:-1]
        if parent in _ROOTS or parent in after:
            out.append(path)
    return sorted(out)


def _lookup(obj: Any, path: Path) -> Tuple[bool, Any]:
    node = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def dotted(path: Path) -> str:
    """``spec.conversion``; a key with a dot or slash is bracketed: ``metadata.annotations[example.com/x]``."""
    text = ""
    for key in path:
        text += "[%s]" % key if ("." in key or "/" in key) else ("." + key if text else key)
    return text


def _pointer(path: Path) -> str:
    return "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def owners(managed_fields: Sequence[Mapping[str, Any]], path: Path) -> List[str]:
    """Managers (with their operation) whose ``fieldsV1`` owns ``path`` or something inside it, sorted."""
    out = []
    for entry in managed_fields or ():
        node: Any = entry.get("fieldsV1") or {}
        for key in path:
            node = node.get("f:" + key) if isinstance(node, dict) else None
        if node is not None:
            name = str(entry.get("manager") or "")
            op = str(entry.get("operation") or "")
            label = "%s (%s)" % (name, op) if op else name
            if label not in out:
                out.append(label)
    return sorted(out)


def _injected(live_value: Any, previous: Mapping[str, Any], path: Path) -> List[str]:
    """Fields inside a dropped struct that the previous release did not declare (another tool wrote them)."""
    inside: Dict[Path, Any] = {}
    _walk(live_value, path, inside)
    before = declared(previous)
    return sorted(dotted(p) for p, v in inside.items()
                  if p != path and p not in before and p[:-1] in before and not isinstance(v, dict))


@dataclass
class FollowResult:
    name: str
    dropped_by_release: List[str] = field(default_factory=list)
    removed: List[Dict[str, Any]] = field(default_factory=list)
    changed: bool = False
    attempts: int = 0
    resource_version_before: Optional[str] = None
    resource_version_after: Optional[str] = None
    record: Optional[str] = None  # the migration record carried to the new generation, or why not (record.py)

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        if not self.removed:
            return "%s: nothing the previous release declared is left over" % self.name
        parts = []
        for r in self.removed:
            extra = " with %s" % ", ".join(r["injected"]) if r["injected"] else ""
            parts.append("%s%s (owned by %s)" % (r["path"], extra, ", ".join(r["owners"]) or "nobody"))
        return "%s: %s %s" % (self.name, "removed" if self.changed else "would remove", "; ".join(parts))


def plan_removal(live: Mapping[str, Any], previous: Mapping[str, Any],
                 applied: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """What to remove from ``live``: the dropped paths it still has, with their owners and injected fields."""
    managed = (live.get("metadata") or {}).get("managedFields") or []
    out = []
    for path in dropped_paths(previous, applied):
        present, value = _lookup(live, path)
        if not present:
            continue
        out.append({"path": dotted(path), "pointer": _pointer(path), "owners": owners(managed, path),
                    "injected": _injected(value, previous, path)})
    return out


def _declared_state(crd: Mapping[str, Any]) -> Tuple[Any, Any, Any]:
    meta = crd.get("metadata") or {}
    return crd.get("spec"), meta.get("labels"), meta.get("annotations")


def _patch(transport: Transport, name: str, resource_version: str, removals: List[Dict[str, Any]],
           field_manager: str, dry_run: bool = False) -> Tuple[bool, Dict[str, Any]]:
    """(applied?, the CRD after). Not applied: the ``test`` failed because the CRD changed since it was read."""
    ops: List[Dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
    ops += [{"op": "remove", "path": r["pointer"]} for r in removals]
    query = [("fieldManager", field_manager)] + ([("dryRun", "All")] if dry_run else [])
    resp = transport.request("PATCH", crd_path(name), query=query, body=dumps(ops), content_type=JSON_PATCH)
    if resp.ok:
        return True, resp.json()
    message = resp.api_message().lower()
    if resp.status == 409 or (resp.status == 422 and "test failed" in message and "resourceversion" in message):
        return False, {}  # the CRD changed since it was read: read it again
    error = error_from_response(resp, "PATCH CRD (remove %s)" % ", ".join(r["path"] for r in removals),
                                cluster=transport.cluster_label, crd=name)
    raise FollowError("the apiserver refused to remove %s, which the applied release no longer declares: %s. "
                      "Remove them by hand (kubectl edit crd %s) or apply a release that declares them"
                      % (", ".join(r["path"] for r in removals), error.api_message or error.message, name),
                      cluster=transport.cluster_label, crd=name, status=resp.status,
                      api_message=error.api_message, reason=error.reason)


def follow_release(transport: Transport, previous: Mapping[str, Any], applied: Mapping[str, Any], *,
                   field_manager: str, check_mode: bool = False) -> FollowResult:
    """Remove from the live CRD what ``previous`` declared and ``applied`` does not (see the module doc)."""
    name = str(applied["metadata"]["name"])
    result = FollowResult(name=name, dropped_by_release=[dotted(p) for p in dropped_paths(previous, applied)])
    for attempt in range(1, MAX_ATTEMPTS + 1):
        live = get_crd_raw(transport, name)
        rv = str((live.get("metadata") or {}).get("resourceVersion") or "")
        result.attempts, result.resource_version_before = attempt, rv
        result.removed = plan_removal(live, previous, applied)
        if result.removed:
            # the apiserver defaults some of these when absent (spec.conversion -> strategy None): removing
            # what it would put back changes nothing, and is not reported (a dry-run shows it; nothing written)
            done, after = _patch(transport, name, rv, result.removed, field_manager, dry_run=True)
            if done and _declared_state(after) == _declared_state(live):
                result.removed = []
            elif not done:
                continue
        if not result.removed or check_mode:
            result.resource_version_after = rv
            return result
        done, after = _patch(transport, name, rv, result.removed, field_manager)
        if done:
            result.changed = True
            result.resource_version_after = str((after.get("metadata") or {}).get("resourceVersion") or "")
            # a removal under spec bumps the generation; the record of the pass still holds, say so in it
            result.record = carry_record(transport, Crd.from_api(live),
                                         int((after.get("metadata") or {}).get("generation") or 0))
            return result
    raise FollowError("the CRD changed between each of %d reads and the removal of %s (another writer keeps "
                      "updating it); nothing removed, run again" % (MAX_ATTEMPTS, ", ".join(
                          r["path"] for r in result.removed)), cluster=transport.cluster_label, crd=name)


def pair_manifests(previous: Sequence[Mapping[str, Any]],
                   applied: Sequence[Mapping[str, Any]]) -> List[Tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(previous, applied) manifest of each CRD in both releases, in the applied release's order."""
    by_name = {str(d["metadata"]["name"]): d for d in previous}
    return [(by_name[str(d["metadata"]["name"])], d) for d in applied if str(d["metadata"]["name"]) in by_name]

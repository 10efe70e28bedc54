# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Client check: do server-side apply clients (Argo CD, Flux, Helm 4, kubectl) still work on these objects?

An object applied at a version that was later removed from the CRD keeps a ``managedFields`` entry at that
version, and every server-side apply to it then fails with HTTP 500 "request to convert CR to an invalid
group/version" (kubernetes#111937): the apiserver converts every entry's field set to the request's version.
A GET, a LIST and a merge patch still work, so only an apply shows it. For a sample of objects per CRD this
check re-applies, as each ``Apply`` manager, exactly the fields that manager owns (``dryRun=All``, no force),
and for objects without ``Apply`` entries applies their bare identity as a probe manager. Nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple

from ..kube.crd import Crd
from ..kube.errors import BadInputError, ConnectionFailed, CrdOpsError, at_least
from ..record.events import emit_crd_event
from ..ownership.fieldsv1 import apply_configuration
from ..ownership.owned_values import Path, describe, different, merge_patch_of, owned_values, set_at, trie_of, value_at
from ..kube.transport import ACCEPT_PARTIAL_LIST, APPLY_PATCH, MERGE_PATCH, ApiResponse, Transport, dumps, error_from_response

PROBE_MANAGER = "crdops-client-check"
RIVAL_MANAGER = "crdops-client-check-rival"  # owns nothing: its change of an owned value must conflict
CHANGE_TRIES = 3  # owned values tried per manager when the schema refuses the changed one (HTTP 422)
MAX_EXAMPLES = 20
# Objects with entries at removed versions are all counted, but a few dry-runs (plus one per new kind of
# entry) already show the API's message: each such apply answers HTTP 500, which the transport retries.
STALE_APPLIES = 3
EVENT_PASSED = "ClientCheckPassed"
EVENT_FAILED = "ClientCheckFailed"


@dataclass
class ApplyFailure:
    obj: str
    manager: str
    operation: str  # Apply (an owned value changed), ownership (a new manager's change), Update, probe, read
    api_version: str
    status: int
    message: str

    def to_dict(self) -> Dict[str, Any]:
        return {"object": self.obj, "manager": self.manager, "operation": self.operation,
                "api_version": self.api_version, "status": self.status, "message": self.message}

    def sentence(self) -> str:
        return "object %s, manager %s (%s at %s): HTTP %d %s" % (
            self.obj, self.manager, self.operation, self.api_version, self.status, self.message)


@dataclass
class ManagerTally:
    """What the check proved for one field manager (one operation) over the sampled objects."""

    manager: str
    operation: str  # Apply or Update
    objects: int = 0  # sampled objects with an entry of this manager
    changed: int = 0  # of them, a dry-run that changed a value it owns succeeded
    unchanged_only: int = 0  # no value it owns could be changed: its fields were sent unchanged
    conflicts_named: int = 0  # Apply: a new manager changing that value got a conflict naming it
    failed: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"manager": self.manager, "operation": self.operation, "objects": self.objects,
                "changed": self.changed, "unchanged_only": self.unchanged_only,
                "conflicts_named": self.conflicts_named, "failed": self.failed}


@dataclass
class CrdClientCheck:
    name: str
    storage_version: str
    listed: int = 0
    checked_objects: int = 0
    applies: int = 0
    probes: int = 0
    gone: int = 0
    stale_not_applied: int = 0
    managers: List[str] = field(default_factory=list)
    failures: List[ApplyFailure] = field(default_factory=list)
    stale_objects: int = 0
    stale_examples: List[str] = field(default_factory=list)
    rivals: int = 0  # dry-run applies by a new manager changing an owned value (each must conflict)
    patches: int = 0  # dry-run merge patches under an Update manager's name
    by_manager: Dict[str, ManagerTally] = field(default_factory=dict)

    def tally(self, manager: str, operation: str) -> ManagerTally:
        key = "%s (%s)" % (manager, operation)
        if key not in self.by_manager:
            self.by_manager[key] = ManagerTally(manager, operation)
        return self.by_manager[key]

    @property
    def ok(self) -> bool:
        return not self.failures and not self.stale_objects

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "storage_version": self.storage_version, "listed": self.listed,
                "checked_objects": self.checked_objects, "applies": self.applies, "probes": self.probes,
                "gone": self.gone, "stale_not_applied": self.stale_not_applied, "managers": sorted(self.managers), "failed": len(self.failures),
                "failures": [f.to_dict() for f in self.failures[:MAX_EXAMPLES]],
                "stale_objects": self.stale_objects, "stale_examples": list(self.stale_examples), "ok": self.ok,
                "rivals": self.rivals, "patches": self.patches,
                "by_manager": [t.to_dict() for _k, t in sorted(self.by_manager.items())]}

    def summary(self) -> str:
        parts = []
        if self.failures:
            parts.append("server-side apply dry-run failed for %d of %d checks, first: %s"
                         % (len(self.failures), self.applies + self.probes, self.failures[0].sentence()))
        if self.stale_objects:
            parts.append("%d of %d objects keep managedFields entries at versions the CRD no longer has "
                         "(for example %s)" % (self.stale_objects, self.listed, ", ".join(self.stale_examples[:3])))
        return "; ".join(parts) or "%d objects checked, %d applies and %d probes succeeded" % (
            self.checked_objects, self.applies, self.probes)


# (manager, operation, apiVersion, subresource) of one managedFields entry
Signature = Tuple[Any, Any, Any, Any]


def _key(meta: Mapping[str, Any]) -> str:
    ns = meta.get("namespace")
    return "%s/%s" % (ns, meta.get("name")) if ns else str(meta.get("name"))


def _version_of(api_version: str, group: str) -> Optional[str]:
    grp, dummy, ver = str(api_version).rpartition("/")
    return ver if grp == group else None


def stale_entries(meta: Mapping[str, Any], crd: Crd) -> List[Dict[str, Any]]:
    """Entries at a version of this group that the CRD no longer defines (served or not): those break apply."""
    defined = {v.name for v in crd.versions}
    out = []
    for entry in meta.get("managedFields") or ():
        version = _version_of(entry.get("apiVersion", ""), crd.group)
        if version is not None and version not in defined:
            out.append(entry)
    return out


def metadata_pages(transport: Transport, crd: Crd, page_size: int,
                   version: Optional[str] = None) -> Iterator[List[Dict[str, Any]]]:
    """Metadata-only pages (they carry managedFields), at ``version`` (default: the storage version)."""
    token: Optional[str] = None
    while True:
        query = [("limit", str(page_size))] + ([("continue", token)] if token else [])
        resp = transport.request("GET", crd.resource_path(version), query=query, accept=ACCEPT_PARTIAL_LIST)
        if resp.status == 410 and (resp.status_body().get("metadata") or {}).get("continue"):
            token = resp.status_body()["metadata"]["continue"]  # a sample needs no consistent snapshot
            continue
        if not resp.ok:
            raise error_from_response(resp, "LIST (client check)", cluster=transport.cluster_label, crd=crd.name)
        body = resp.json()
        yield [item.get("metadata") or {} for item in body.get("items") or ()]
        token = (body.get("metadata") or {}).get("continue") or None
        if not token:
            return


def signatures(meta: Mapping[str, Any]) -> Set[Signature]:
    return {(e.get("manager"), e.get("operation"), e.get("apiVersion"), e.get("subresource", ""))
            for e in meta.get("managedFields") or ()}


class Sampler:
    """Bounded choice while streaming: objects with stale entries first, then one per new combination of
    (manager, operation, apiVersion, subresource), then the first ones; every object while the CRD is small."""

    def __init__(self, sample: int, check_all_below: int) -> None:
        self.sample = sample
        self.check_all_below = check_all_below
        self.everything: Optional[List[Dict[str, Any]]] = []
        self.stale: List[Dict[str, Any]] = []
        self.new_kind: List[Dict[str, Any]] = []
        self.first: List[Dict[str, Any]] = []
        self._seen: Set[Signature] = set()

    def offer(self, meta: Dict[str, Any], is_stale: bool) -> None:
        if self.everything is not None:
            self.everything.append(meta)
            if len(self.everything) > self.check_all_below:
                self.everything = None
        sigs = signatures(meta)
        if is_stale and len(self.stale) < self.sample:
            self.stale.append(meta)
        elif not sigs <= self._seen and len(self.new_kind) < self.sample:
            self.new_kind.append(meta)
        elif len(self.first) < self.sample:
            self.first.append(meta)
        self._seen |= sigs

    def chosen(self) -> List[Dict[str, Any]]:
        if self.everything is not None:
            return self.everything
        out: List[Dict[str, Any]] = []
        keys: Set[str] = set()
        for meta in self.stale + self.new_kind + self.first:
            if _key(meta) not in keys and len(out) < self.sample:
                keys.add(_key(meta))
                out.append(meta)
        return out


def _object_path(crd: Crd, meta: Mapping[str, Any], version: str, subresource: str = "") -> str:
    path = crd.resource_path(version, meta.get("namespace") or None, str(meta.get("name")))
    return path + "/" + subresource if subresource else path


def dry_run_apply(transport: Transport, path: str, manager: str, config: Mapping[str, Any]) -> ApiResponse:
    """Server-side apply as ``manager``, not forced, validated and admitted but never persisted."""
    return transport.request("PATCH", path, query=[("dryRun", "All"), ("fieldManager", manager)],
                             body=dumps(config), content_type=APPLY_PATCH)


def _apply_plan(crd: Crd, meta: Mapping[str, Any], probe_manager: str) -> List[Tuple[str, str, str, Any]]:
    """(manager, operation, version, entry) to try: each Apply entry at its own version when the CRD still
    serves it (that is what the manager sends), else at the storage version; a probe when there is none."""
    served = set(crd.served_versions)
    storage = str(crd.storage_version)
    plan = []
    for entry in meta.get("managedFields") or ():
        if entry.get("operation") != "Apply":
            continue
        version = _version_of(entry.get("apiVersion", ""), crd.group)
        plan.append((str(entry.get("manager", "")), "Apply", version if version in served else storage, entry))
    if not plan:
        plan.append((probe_manager, "probe", storage, None))
    return plan


class _ObjectReader:
    """One GET per version an object's applies need; None once the object is gone."""

    def __init__(self, transport: Transport, crd: Crd, meta: Mapping[str, Any]) -> None:
        self.transport, self.crd, self.meta = transport, crd, meta
        self._cache: Dict[str, Any] = {}

    def get(self, version: str) -> Any:
        if version not in self._cache:
            resp = self.transport.request("GET", _object_path(self.crd, self.meta, version))
            if resp.status == 404:
                self._cache[version] = None
            elif not resp.ok:
                raise error_from_response(resp, "GET (client check)", cluster=self.transport.cluster_label,
                                          crd=self.crd.name, obj=_key(self.meta))
            else:
                self._cache[version] = resp.json()
        return self._cache[version]


class _ObjectCheck:
    """The dry-runs of one sampled object: per Apply manager a changed owned value (and a new manager's conflict
    naming it), per Update manager a merge patch under its name, or a probe when there is no Apply entry."""

    def __init__(self, transport: Transport, crd: Crd, meta: Mapping[str, Any], result: CrdClientCheck,
                 probe_manager: str) -> None:
        self.transport, self.crd, self.meta, self.result = transport, crd, meta, result
        self.probe_manager = probe_manager
        self.reader = _ObjectReader(transport, crd, meta)
        self.key = _key(meta)

    def run(self) -> None:
        for manager, operation, version, entry in _apply_plan(self.crd, self.meta, self.probe_manager):
            obj = self.read(manager, operation, version)
            if obj is None:
                return
            if entry is None:
                self.probe(obj, version)
            else:
                self.apply_as_owner(manager, version, entry, obj)
        for entry in self.meta.get("managedFields") or ():
            if entry.get("operation") == "Update":
                version = _served_or_storage(self.crd, entry)
                obj = self.read(str(entry.get("manager", "")), "Update", version)
                if obj is None:
                    return
                self.patch_as_updater(entry, version, obj)

    def read(self, manager: str, operation: str, version: str) -> Any:
        """The object at ``version``; None when gone or unreadable (a failure is recorded then)."""
        try:
            obj = self.reader.get(version)
        except ConnectionFailed:
            raise
        except CrdOpsError as exc:  # e.g. a conversion webhook that fails: this object cannot be applied either
            self.fail(manager, "read", version, exc.status or 0, exc.api_message or str(exc))
            return None
        if obj is None:
            self.result.gone += 1  # deleted since the listing: nothing to check
        return obj

    def fail(self, manager: str, operation: str, version: str, status: int, message: str) -> None:
        self.result.failures.append(ApplyFailure(self.key, manager, operation, "%s/%s" % (self.crd.group, version),
                                                 status, message))
        if operation != "probe":
            self.result.tally(manager, operation).failed += 1

    def path(self, version: str, subresource: str) -> str:
        return _object_path(self.crd, self.meta, version, subresource)

    def probe(self, obj: Any, version: str) -> None:
        """Identity only, by a manager of its own: converts every entry, so a stale one shows (HTTP 500)."""
        config = apply_configuration(obj, {}, "%s/%s" % (self.crd.group, version), self.crd.kind)
        resp = dry_run_apply(self.transport, self.path(version, ""), self.probe_manager, config)
        self.result.probes += 1
        if not resp.ok:
            self.fail(self.probe_manager, "probe", version, resp.status, resp.api_message())

    def apply_as_owner(self, manager: str, version: str, entry: Mapping[str, Any], obj: Any) -> None:
        """Change one owned value as its owner (no force): must succeed; then a new manager must conflict."""
        tally = self.result.tally(manager, "Apply")
        tally.objects += 1
        self.result.applies += 1
        if manager not in self.result.managers:
            self.result.managers.append(manager)
        api_version = "%s/%s" % (self.crd.group, version)
        subresource = str(entry.get("subresource") or "")
        fields = entry.get("fieldsV1") or {}
        for path in owned_values(obj, fields)[:CHANGE_TRIES]:
            config = apply_configuration(obj, fields, api_version, self.crd.kind)
            set_at(config, path, different(value_at(obj, path)))
            resp = dry_run_apply(self.transport, self.path(version, subresource), manager, config)
            if resp.ok:
                tally.changed += 1
                self.rival(manager, version, subresource, obj, path)
                return
            if resp.status != 422:  # 422: the schema refuses that value; another owned value may do
                self.fail(manager, "Apply", version, resp.status, "changing %s: %s" % (describe(path), resp.api_message()))
                return
        config = apply_configuration(obj, fields, api_version, self.crd.kind)  # no value it owns can change
        resp = dry_run_apply(self.transport, self.path(version, subresource), manager, config)
        tally.unchanged_only += 1
        if not resp.ok:
            self.fail(manager, "Apply", version, resp.status, resp.api_message())

    def rival(self, owner: str, version: str, subresource: str, obj: Any, path: Path) -> None:
        """The same change by a manager that owns nothing: a conflict naming ``owner`` proves the ownership."""
        config = apply_configuration(obj, trie_of(path), "%s/%s" % (self.crd.group, version), self.crd.kind)
        set_at(config, path, different(value_at(obj, path)))
        resp = dry_run_apply(self.transport, self.path(version, subresource), RIVAL_MANAGER, config)
        self.result.rivals += 1
        named = 'conflict with "%s"' % owner
        if resp.status == 409 and named in resp.api_message():
            self.result.tally(owner, "Apply").conflicts_named += 1
            return
        what = "succeeded" if resp.ok else "answered HTTP %d %s" % (resp.status, resp.api_message())
        self.fail(owner, "ownership", version, resp.status,
                  "a new manager changing %s without force %s; a conflict naming %s was expected (ownership lost)"
                  % (describe(path), what, owner))

    def patch_as_updater(self, entry: Mapping[str, Any], version: str, obj: Any) -> None:
        """A merge patch under an Update manager's name, changing a value it owns where one can be changed."""
        manager = str(entry.get("manager", ""))
        tally = self.result.tally(manager, "Update")
        tally.objects += 1
        self.result.patches += 1
        subresource = str(entry.get("subresource") or "")
        for path in owned_values(obj, entry.get("fieldsV1") or {})[:CHANGE_TRIES]:
            patch = merge_patch_of(path, different(value_at(obj, path)))
            if patch is None:
                continue
            resp = dry_run_merge_patch(self.transport, self.path(version, subresource), manager, patch)
            if resp.ok:
                tally.changed += 1
                return
            if resp.status != 422:
                self.fail(manager, "Update", version, resp.status, "changing %s: %s" % (describe(path), resp.api_message()))
                return
        resp = dry_run_merge_patch(self.transport, self.path(version, subresource), manager, {})
        tally.unchanged_only += 1
        if not resp.ok:
            self.fail(manager, "Update", version, resp.status, resp.api_message())


def _served_or_storage(crd: Crd, entry: Mapping[str, Any]) -> str:
    version = _version_of(entry.get("apiVersion", ""), crd.group)
    return version if version in crd.served_versions else str(crd.storage_version)


def dry_run_merge_patch(transport: Transport, path: str, manager: str, patch: Mapping[str, Any]) -> ApiResponse:
    return transport.request("PATCH", path, query=[("dryRun", "All"), ("fieldManager", manager)],
                             body=dumps(patch), content_type=MERGE_PATCH)


def check_object(transport: Transport, crd: Crd, meta: Mapping[str, Any], result: CrdClientCheck,
                 probe_manager: str = PROBE_MANAGER) -> None:
    _ObjectCheck(transport, crd, meta, result, probe_manager).run()


@dataclass(frozen=True)
class ClientCheckOptions:
    """The keyword arguments of ``check_crd``."""

    sample: int = 10
    check_all_below: int = 50
    page_size: int = 500
    probe_manager: str = PROBE_MANAGER

    def validate(self) -> None:
        at_least("sample", self.sample, 0, strict=True)
        at_least("check_all_below", self.check_all_below, 0)
        at_least("page_size", self.page_size, 0, strict=True)
        if not self.probe_manager:
            raise BadInputError("probe_manager must not be empty")


def check_crd(transport: Transport, crd: Crd, *, sample: int = 10, check_all_below: int = 50,
              page_size: int = 500, probe_manager: str = PROBE_MANAGER) -> CrdClientCheck:
    """List every object's metadata (counting stale entries), then dry-run apply a sample."""
    result = CrdClientCheck(crd.name, str(crd.storage_version))
    sampler = Sampler(sample, check_all_below)
    for page in metadata_pages(transport, crd, page_size):
        for meta in page:
            result.listed += 1
            stale = bool(stale_entries(meta, crd))
            if stale:
                result.stale_objects += 1
                if len(result.stale_examples) < MAX_EXAMPLES:
                    result.stale_examples.append(_key(meta))
            sampler.offer(meta, stale)
    stale_seen: Set[Signature] = set()
    stale_checked = 0
    for meta in sampler.chosen():
        if stale_entries(meta, crd):
            if stale_checked >= STALE_APPLIES and signatures(meta) <= stale_seen:
                result.stale_not_applied += 1  # counted in stale_objects; its apply would fail the same way
                continue
            stale_checked += 1
            stale_seen |= signatures(meta)
        result.checked_objects += 1
        check_object(transport, crd, meta, result, probe_manager)
    return result


def post_outcome(transport: Transport, crd: Crd, check: CrdClientCheck) -> Optional[str]:
    """An Event on the CRD, so ``kubectl describe crd`` shows whether clients can still apply."""
    if check.ok:
        return emit_crd_event(transport, crd, EVENT_PASSED, "server-side apply dry-run as the objects' own managers "
                              "succeeded: %s" % check.summary())
    return emit_crd_event(transport, crd, EVENT_FAILED, "server-side apply clients will fail: %s" % check.summary(),
                          warning=True)

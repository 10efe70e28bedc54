# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Repair a resource whose objects are stored at a version the CRD no longer has.

Steps: add each missing version back (served, never storage), re-store every object at the storage
version (``migrate_crd``: a complete, failure-free pass writes the record), verify (etcd when given),
trim storedVersions (``trim.py``, authorised by that record), remove the added versions again. The
CRD edits are optimistic-locked (``metadata.resourceVersion``) and restore the CRD's own spec: they are
a repair, not the application of a release. Before the first edit the added versions are recorded in
an annotation, so a rerun after an interruption finishes the job instead of seeing a "healthy" CRD
that still serves a version only the repair needed.

As the re-store of the role: the repair holds the pass Lease of the CRD (pass_lease.py) from its first edit to
its last, so it never interleaves with a re-store or another repair; once the objects are readable and before
the re-store writes any, the storage diff (storage_diff.py, with etcd) says what the re-store would delete for
good, and a loss stops the repair unless ``accept_pruning``. The owners of ``spec.versions`` (an atomic list
that the repair's edits take over) are recorded with the added versions and given back at the end
(versions_owners.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..kube.crd import Crd, crd_path
from ..kube.errors import BadInputError, CrdOpsError, RefusalError, at_least
from ..record.events import REPAIR_FAILED, REPAIR_STARTED, REPAIR_SUCCEEDED, emit_crd_event
from ..record.record import utc_now
from .diagnosis import (
    REPAIR_ANNOTATION,
    repair_note,
    ListProbe,
    etcd_versions,
    previous_crd,
    previous_versions,
    probe_list,
    repair_in_progress,
    version_entry,
)
from ..ha.pass_lease import DEFAULT_NAMESPACE, PassLease
from ..restore.restore import RestoreOptions, migrate_crd
from ..kube.selection import get_crd, get_crd_raw
from ..proof.storage_diff import storage_diff_of
from ..kube.transport import MERGE_PATCH, Transport, dumps, error_from_response
from ..proof.trim import trim_stored_versions
from .versions_owners import give_back, owner_entries

MAX_ADD_ROUNDS = 3  # a LIST error names one version; each round may reveal another one


class RepairError(CrdOpsError):
    """A repair step did not reach its goal; the CRD is left as the message says."""

    kind = "repair"


@dataclass(frozen=True)
class RepairOptions:
    versions: Tuple[str, ...] = ()  # explicit versions to add back
    previous_manifests: Tuple[Any, ...] = ()  # previous release's CRD manifests (paths or dicts)
    restore: RestoreOptions = RestoreOptions()
    check_mode: bool = False
    wait_timeout: float = 60.0
    accept_pruning: bool = False  # the storage diff found stored fields the re-store deletes: go on anyway
    lease_namespace: str = DEFAULT_NAMESPACE
    lease_wait: float = 60.0

    def validate(self) -> None:
        at_least("wait_timeout", self.wait_timeout, 0)
        at_least("lease_wait", self.lease_wait, 0)
        self.restore.validate()


@dataclass
class RepairResult:
    name: str
    storage_version: Optional[str]
    conversion_strategy: str
    check_mode: bool = False
    broken: bool = False
    changed: bool = False
    missing_versions: List[str] = field(default_factory=list)
    evidence: Dict[str, List[str]] = field(default_factory=dict)
    schema_sources: Dict[str, str] = field(default_factory=dict)
    object_count: Optional[int] = None
    list_before: Dict[str, Any] = field(default_factory=dict)
    steps: List[str] = field(default_factory=list)
    done: List[str] = field(default_factory=list)
    added_versions: List[str] = field(default_factory=list)
    removed_versions: List[str] = field(default_factory=list)
    versions_before: List[str] = field(default_factory=list)
    versions_after: List[str] = field(default_factory=list)
    stored_versions_before: List[str] = field(default_factory=list)
    stored_versions_after: List[str] = field(default_factory=list)
    restore: Optional[Dict[str, Any]] = None
    etcd_before: Optional[Dict[str, Any]] = None
    etcd_after: Optional[Dict[str, Any]] = None
    readable_after: Optional[int] = None
    storage_diff: Optional[Dict[str, Any]] = None
    versions_owners: Optional[Dict[str, Any]] = None
    lease: Optional[Dict[str, Any]] = None
    warnings: List[str] = field(default_factory=list)
    message: str = ""

    def to_dict(self) -> Dict[str, Any]:
        out = dict(self.__dict__)
        out["evidence"] = dict(self.evidence)
        return out


EtcdScanFn = Callable[[Crd], Dict[str, Any]]
DiffFn = Callable[[Crd], Dict[str, Any]]  # storage_diff_of for one CRD (with etcd)


def _quick(transport: Transport) -> Transport:
    """The same connection with a short retry deadline: the probe expects 500s and must not retry them for minutes."""
    for_endpoint = getattr(transport, "for_endpoint", None)
    base_url = getattr(transport, "base_url", None)
    return for_endpoint(base_url) if callable(for_endpoint) and base_url else transport


def _names(crd: Crd) -> List[str]:
    return [v.name for v in crd.versions]


def decide_missing(crd: Crd, probe: ListProbe, etcd_counts: Optional[Dict[str, int]],
                   previous: Dict[str, Dict[str, Any]], explicit: Sequence[str],
                   cluster: Optional[str]) -> Tuple[List[str], Dict[str, List[str]], bool]:
    """(versions to add back, evidence per source, broken?). Refuses when it cannot tell."""
    spec = set(_names(crd))
    in_etcd = [v for v in etcd_versions(etcd_counts or {}, crd.group) if v not in spec]
    evidence = {"list_error": [v for v in probe.named_versions if v not in spec], "etcd": in_etcd,
                "previous_manifest": [v for v in previous if v not in spec], "option": list(explicit),
                "interrupted_repair": [v for v in repair_in_progress(crd) if v in spec]}
    broken = (not probe.readable) or bool(in_etcd) or bool(evidence["interrupted_repair"])
    if not broken:
        return [], evidence, False
    if not probe.readable and not probe.storage_read_error:
        raise RepairError("LIST of the resource fails, but not because of objects at a removed version; "
                          "not a case for the repair", cluster=cluster, crd=crd.name, status=probe.status,
                          reason=probe.reason, api_message=probe.message)
    if explicit:
        # a version an interrupted repair already added back is not an error: the rerun continues with it
        present = [v for v in explicit if v in spec and v not in evidence["interrupted_repair"]]
        if present:
            raise BadInputError("versions %s are already in spec.versions; name only versions the CRD lacks"
                                % ", ".join(present), cluster=cluster, crd=crd.name)
        uncovered = [v for v in in_etcd if v not in explicit]
        if uncovered:
            raise RefusalError("etcd holds objects at %s too, which versions does not name; the repair would "
                               "leave them unreadable" % ", ".join(uncovered), cluster=cluster, crd=crd.name)
        return [v for v in explicit if v not in spec], evidence, True
    missing = list(dict.fromkeys(in_etcd + evidence["list_error"]))
    if not missing and not probe.readable:
        missing = evidence["previous_manifest"]
    if not missing and not evidence["interrupted_repair"]:
        raise RefusalError(
            "the resource is unreadable (%s) but the missing version cannot be determined: the error names no "
            "version of %s, no etcd_url was given (or etcd shows none), and no previous_manifests entry has a "
            "version the CRD lacks; give previous_manifests, etcd_url or versions"
            % (probe.reason or probe.status, crd.group), cluster=cluster, crd=crd.name,
            status=probe.status, api_message=probe.message)
    return missing, evidence, True


def plan_steps(crd: Crd, missing: List[str], resumed: List[str], sources: Dict[str, str],
               count: Optional[int], etcd: bool) -> List[str]:
    storage = crd.storage_version
    objects = "%d objects" % count if count is not None else "every object (count unknown: the LIST fails)"
    steps = ["add %s back to spec.versions (served: true, storage: false; %s)"
             % (v, sources.get(v, "")) for v in missing]
    steps += ["%s is still in spec.versions from an interrupted repair: continue with it" % v for v in resumed]
    steps += ["re-store %s at %s (empty merge patch each); a complete pass writes the migration record"
              % (objects, storage),
              "verify: every key in etcd at %s/%s" % (crd.group, storage) if etcd else
              "verify: the pass is complete with zero failures (no etcd_url: no byte-level check)",
              "trim status.storedVersions to [%s]" % storage,
              "remove %s from spec.versions again" % ", ".join(missing + resumed),
              "LIST every object at %s" % storage]
    return steps


def diagnose(transport: Transport, crd: Crd, options: RepairOptions, etcd_scan: Optional[EtcdScanFn],
             result: RepairResult) -> List[str]:
    """Fill ``result`` with what is wrong and the plan; returns the versions to add back."""
    cluster = transport.cluster_label
    probe = probe_list(_quick(transport), crd, options.restore.page_size)
    if not probe.readable and not probe.storage_read_error:
        # throttling or a passing outage: ask again with the full retry deadline before calling it anything
        probe = probe_list(transport, crd, options.restore.page_size)
    result.list_before = probe.to_dict()
    counts = None
    if etcd_scan is not None:
        result.etcd_before = etcd_scan(crd)
        counts = result.etcd_before.get("counts") or {}
        result.object_count = int(result.etcd_before.get("keys") or 0)
    elif probe.readable:
        result.object_count = probe.listed
    doc, source = previous_crd(options.previous_manifests, crd.name)
    previous = previous_versions(doc)
    missing, result.evidence, result.broken = decide_missing(crd, probe, counts, previous, options.versions,
                                                             cluster)
    for v in missing:
        result.schema_sources[v] = version_entry(v, previous, source)[1]
    result.missing_versions = missing + result.evidence["interrupted_repair"]
    if result.broken:
        result.steps = plan_steps(crd, missing, result.evidence["interrupted_repair"], result.schema_sources,
                                  result.object_count, etcd_scan is not None)
        if crd.conversion_strategy == "Webhook":
            added = ", ".join(result.missing_versions)
            result.warnings.append(
                "CRD %s uses Webhook conversion: its webhook must convert %s to and from %s, or the re-store "
                "stops at the first conversion failure" % (crd.name, added, crd.storage_version))
    return missing


def _patch_crd(transport: Transport, crd: Crd, body: Dict[str, Any], what: str) -> Crd:
    """Merge-patch the CRD, locked to the resourceVersion read: fails (409) if anyone changed it since."""
    body.setdefault("metadata", {})["resourceVersion"] = crd.resource_version
    resp = transport.request("PATCH", crd_path(crd.name), body=dumps(body), content_type=MERGE_PATCH)
    if not resp.ok:
        raise error_from_response(resp, what, cluster=transport.cluster_label, crd=crd.name)
    return Crd.from_api(resp.json())


def add_versions(transport: Transport, raw: Dict[str, Any], entries: List[Dict[str, Any]], now: str) -> Crd:
    """Append ``entries`` to spec.versions and record them (annotation) in the same locked write."""
    crd = Crd.from_api(raw)
    added = repair_in_progress(crd) + [e["name"] for e in entries]
    owners = recorded_owners(crd)
    if owners is None:  # first edit: who owns spec.versions now is who gets it back at the end
        owners = owner_entries((raw.get("metadata") or {}).get("managedFields") or [])
    note = json.dumps({"addedVersions": added, "startedAt": now, "storageVersion": crd.storage_version,
                       "versionsOwners": owners, "crdUid": crd.uid}, separators=(",", ":"), sort_keys=True)
    versions = list((raw.get("spec") or {}).get("versions") or []) + entries
    return _patch_crd(transport, crd, {"metadata": {"annotations": {REPAIR_ANNOTATION: note}},
                                       "spec": {"versions": versions}},
                      "PATCH CRD spec.versions (add %s back)" % ", ".join(e["name"] for e in entries))


def recorded_owners(crd: Crd) -> Optional[List[Dict[str, Any]]]:
    """The owners of spec.versions recorded by an earlier (interrupted) repair, or None."""
    note = repair_note(crd)
    owners = note.get("versionsOwners") if note is not None else None
    return owners if isinstance(owners, list) else None


def remove_versions(transport: Transport, name: str, versions: List[str]) -> Crd:
    """Drop the versions the repair added (never the storage version) and its annotation, locked."""
    raw = get_crd_raw(transport, name)
    crd = Crd.from_api(raw)
    if crd.storage_version in versions:
        raise RefusalError("refusing to remove the storage version %s" % crd.storage_version,
                           cluster=transport.cluster_label, crd=name)
    still = [v for v in versions if v in crd.stored_versions]
    if still:
        raise RepairError("%s still in status.storedVersions; not removing it" % ", ".join(still),
                          cluster=transport.cluster_label, crd=name)
    keep = [v for v in (raw.get("spec") or {}).get("versions") or [] if v.get("name") not in versions]
    return _patch_crd(transport, crd, {"metadata": {"annotations": {REPAIR_ANNOTATION: None}},
                                       "spec": {"versions": keep}},
                      "PATCH CRD spec.versions (remove %s again)" % ", ".join(versions))


def wait_readable(transport: Transport, crd: Crd, timeout: float, page_size: int,
                  sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> ListProbe:
    """LIST until it succeeds: after a CRD edit the apiserver rebuilds the resource's storage (429, 500)."""
    quick = _quick(transport)
    deadline = clock() + timeout
    while True:
        probe = probe_list(quick, crd, page_size)
        unknown = [v for v in probe.named_versions if v not in _names(crd)]
        if probe.readable or unknown or clock() >= deadline:
            return probe
        sleep(0.5)


def _check_storage_diff(transport: Transport, crd: Crd, options: RepairOptions, storage_diff: Optional[DiffFn],
                        result: RepairResult) -> None:
    """Before the re-store writes: what it would delete for good (or could not compare) stops the repair."""
    if storage_diff is None:
        result.storage_diff = {"checked": False, "reason": "no etcd_url: the stored values were not compared"}
        result.warnings.append("CRD %s: the re-store may delete stored fields the storage version's schema lacks; "
                               "without etcd_url that was not checked" % crd.name)
        return
    diff = storage_diff(crd)
    result.storage_diff = diff
    lost = sorted((diff.get("removed") or {}).items())
    unverified = diff.get("unverified")
    if not (lost or unverified):
        result.done.append("storage diff: %s of %s stored objects compared, nothing the re-store deletes"
                           % (diff.get("compared"), diff.get("key_count")))
        return
    what = "; ".join(["deletes %s (%d of %d compared)" % (p, n, diff.get("compared") or 0) for p, n in lost]
                     + (["could not compare some objects: %s" % unverified] if unverified else []))
    if options.accept_pruning:
        result.warnings.append("CRD %s: accept_pruning is true; the re-store %s" % (crd.name, what))
        return
    raise RefusalError("the re-store would lose stored data: %s. Nothing re-stored; %s stay in spec.versions so "
                       "the objects stay readable. Set accept_pruning (role: crd_upgrade_accept_pruning) to "
                       "accept the loss, then run again" % (what, ", ".join(result.missing_versions)),
                       cluster=transport.cluster_label, crd=crd.name)


def _restore_and_verify(transport: Transport, crd: Crd, options: RepairOptions,
                        etcd_scan: Optional[EtcdScanFn], result: RepairResult,
                        lease: Optional[PassLease] = None) -> None:
    cluster = transport.cluster_label
    restore = migrate_crd(transport, crd, options.restore, stop_check=lease.lost_reason if lease else None)
    result.restore = restore.to_dict()
    if not restore.ok:
        why = restore.aborted_reason or restore.record_error or "%d objects failed" % restore.failed
        first = (restore.first_failures or [{}])[0]
        raise RepairError("re-store at %s incomplete (%s; first failure: %s); %s stay in spec.versions so a rerun "
                          "continues" % (crd.storage_version, why, first.get("message") or "none",
                                         ", ".join(result.missing_versions)), cluster=cluster, crd=crd.name)
    result.done.append("re-stored %d objects at %s (rewritten %d, unchanged %d, gone %d)"
                       % (restore.listed, crd.storage_version, restore.rewritten, restore.unchanged, restore.gone))
    if etcd_scan is None:
        return
    scan = etcd_scan(crd)
    result.etcd_after = scan
    if not scan.get("verified"):
        raise RepairError("etcd: %s of %s keys not at %s after the re-store (for example %s); not trimming"
                          % (scan.get("mismatched"), scan.get("keys"), scan.get("expected_api_version"),
                             ", ".join((scan.get("mismatched_keys") or [])[:3])), cluster=cluster, crd=crd.name)
    result.done.append("verified in etcd: %s keys at %s" % (scan.get("keys"), scan.get("expected_api_version")))


def _add_back(transport: Transport, crd: Crd, missing: List[str], options: RepairOptions,
              result: RepairResult, now: str) -> Crd:
    """Add ``missing`` back, then LIST until readable; a LIST that names yet another version adds it too."""
    doc, source = previous_crd(options.previous_manifests, crd.name)
    previous = previous_versions(doc)
    for _round in range(MAX_ADD_ROUNDS):
        if missing:
            entries = [version_entry(v, previous, source)[0] for v in missing]
            crd = add_versions(transport, get_crd_raw(transport, crd.name), entries, now)
            result.added_versions.extend(missing)
            result.changed = True
            result.done.append("added %s back (served, not storage)" % ", ".join(missing))
        probe = wait_readable(transport, crd, options.wait_timeout, options.restore.page_size)
        if probe.readable:
            return crd
        missing = [v for v in probe.named_versions if v not in _names(crd)]
        for v in missing:
            result.schema_sources[v] = version_entry(v, previous, source)[1]
            result.missing_versions.append(v)
        if not missing:
            break
    raise RepairError("the resource is still unreadable with %s back in spec.versions; they stay there so a rerun "
                      "continues" % ", ".join(result.missing_versions), cluster=transport.cluster_label,
                      crd=crd.name, status=probe.status, reason=probe.reason, api_message=probe.message)


@dataclass
class RepairTools:
    """What the repair reads etcd with (both optional: without etcd_url neither runs) and its pass Lease."""

    etcd_scan: Optional[EtcdScanFn] = None
    storage_diff: Optional[DiffFn] = None
    lease: Optional[PassLease] = None


def _run_steps(transport: Transport, crd: Crd, missing: List[str], options: RepairOptions,
               tools: RepairTools, result: RepairResult, now: str) -> None:
    crd = _add_back(transport, crd, missing, options, result, now)
    owners = recorded_owners(crd) or []
    _check_storage_diff(transport, crd, options, tools.storage_diff, result)
    _restore_and_verify(transport, crd, options, tools.etcd_scan, result, tools.lease)
    # the repair's own checks stand behind its record (the etcd scan when given, the readable LIST after), not a
    # confirming pass: its trim takes the record as the repair always did
    trim = trim_stored_versions(transport, crd.name, accept_unproven=True)
    result.changed = result.changed or trim.changed
    result.done.append("status.storedVersions %s -> %s" % (trim.before, trim.after))
    to_remove = list(dict.fromkeys(result.missing_versions))
    crd = remove_versions(transport, crd.name, to_remove)
    result.removed_versions = to_remove
    result.changed = True
    result.done.append("removed %s from spec.versions again" % ", ".join(to_remove))
    result.versions_owners = give_back(transport, crd.name, owners)
    if result.versions_owners["changed"]:
        result.done.append("spec.versions owned by %s again" % (", ".join(result.versions_owners["owners_now"])
                                                                or "no manager, as before"))
    probe = wait_readable(transport, crd, options.wait_timeout, options.restore.page_size)
    if not probe.readable:
        raise RepairError("the resource is unreadable after %s was removed again" % ", ".join(to_remove),
                          cluster=transport.cluster_label, crd=crd.name, status=probe.status,
                          reason=probe.reason, api_message=probe.message)
    result.readable_after = probe.listed
    result.versions_after = _names(crd)
    result.stored_versions_after = list(crd.stored_versions)
    result.done.append("every object readable: %d listed at %s" % (probe.listed, crd.storage_version))


def _diagnosed(transport: Transport, name: str, options: RepairOptions,
               etcd_scan: Optional[EtcdScanFn]) -> Tuple[Crd, RepairResult, List[str]]:
    crd = get_crd(transport, name)
    result = RepairResult(name=crd.name, storage_version=crd.storage_version,
                          conversion_strategy=crd.conversion_strategy, check_mode=options.check_mode,
                          versions_before=_names(crd), versions_after=_names(crd),
                          stored_versions_before=list(crd.stored_versions),
                          stored_versions_after=list(crd.stored_versions))
    return crd, result, diagnose(transport, crd, options, etcd_scan, result)


def repair_crd(transport: Transport, name: str, options: RepairOptions, *,
               etcd_scan: Optional[EtcdScanFn] = None, storage_diff: Optional[DiffFn] = None,
               now: Callable[[], str] = utc_now) -> RepairResult:
    """Diagnose ``name`` and, unless in check mode, repair it. Raises (after a Warning Event) when a
    step fails; a healthy CRD is reported as such, unchanged."""
    crd, result, missing = _diagnosed(transport, name, options, etcd_scan)
    if result.broken and options.check_mode:
        result.changed = True
        result.message = "would repair: " + "; ".join(result.steps)
        return result
    if not result.broken:
        result.message = "nothing to repair: every object is readable at %s" % crd.storage_version
        return result
    lease = PassLease(transport, crd.name, options.lease_namespace).acquire(options.lease_wait)
    try:
        # another run may have repaired it (or gone further) while this one waited for the Lease
        crd, result, missing = _diagnosed(transport, name, options, etcd_scan)
        if result.broken:
            _repair_under_lease(transport, crd, missing, options, RepairTools(etcd_scan, storage_diff, lease),
                                result, now())
        else:
            result.message = "nothing to repair: every object is readable at %s" % crd.storage_version
    finally:
        released = lease.release()
        result.lease = dict(lease.to_dict(), release_error=released)
    return result


def _repair_under_lease(transport: Transport, crd: Crd, missing: List[str], options: RepairOptions,
                        tools: RepairTools, result: RepairResult, now: str) -> None:
    emit_crd_event(transport, crd, REPAIR_STARTED, "Repair started: objects stored at removed version(s) %s are "
                   "unreadable; plan: %s" % (", ".join(result.missing_versions), "; ".join(result.steps)))
    try:
        _run_steps(transport, crd, missing, options, tools, result, now)
    except CrdOpsError as exc:
        exc.with_context(cluster=transport.cluster_label, crd=crd.name)
        exc.partial_result = result.to_dict()
        emit_crd_event(transport, crd, REPAIR_FAILED, "Repair failed after: %s. Error: %s"
                       % ("; ".join(result.done) or "nothing done", exc), warning=True)
        raise
    result.message = "repaired: " + "; ".join(result.done)
    emit_crd_event(transport, crd, REPAIR_SUCCEEDED, "Repair succeeded: " + "; ".join(result.done))


def storage_differ(transport: Transport, sampler: Any, etcd_prefix: str, sample: int) -> DiffFn:
    """The storage diff (storage_diff.storage_diff_of) of a CRD as it is when called, with ``sampler``."""

    def diff(crd: Crd) -> Dict[str, Any]:
        return storage_diff_of(transport, sampler, crd, etcd_prefix, sample)

    return diff


def etcd_scanner(reader: Any) -> EtcdScanFn:
    """Adapt an ``etcd_scan.EtcdReader`` to the scan function the repair takes."""

    def scan(crd: Crd) -> Dict[str, Any]:
        found: Dict[str, Any] = reader.scan(crd.name, crd.group, crd.plural,
                                            "%s/%s" % (crd.group, crd.storage_version)).as_dict()
        return found

    return scan

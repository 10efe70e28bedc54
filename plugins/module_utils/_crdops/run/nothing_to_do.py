# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Has the role nothing to do on this cluster? Read-only, decided from the live CRDs, their objects' metadata and
the releases, so a rerun on a cluster that is done costs one task instead of every phase.

Nothing to do means every phase of the role would change nothing, for each selected CRD:

* ``status.storedVersions`` is ``[<storage version>]`` and this CRD's migration record at that storage version and
  generation, with a proof (etcd scan or confirming pass) and no failure, says how it got there. storedVersions
  alone proves nothing (any writer of the status may set it), and neither does a record of another generation: the
  role stamps its record with the generation its own apply of release N+1 (and the removal of what that release no
  longer declares) makes (``record.carry_record``), so another generation is a spec change nobody proved harmless,
  a flip to another storage version and back included.
  A record that names no CRD uid is missing, as it is for the trim: nothing ties it to this CRD;
* no resume checkpoint (an unfinished pass) and no unfinished repair (a version it added back);
* no other run holds the CRD's pass Lease (``pass_lease.py``; held means renewed within its duration, by the
  apiserver's clock): that run is writing now, so what the CRD says may change under the verdict. A Lease that
  cannot be read is a doubt too;
* when the caller names the apiservers (``Peers.apiservers``, the role's ``crd_upgrade_apiserver_endpoints``),
  each one serves the CRD and stores at its storage version (its discovery's ``storageVersionHash``): one whose
  view lags would write another version, one that cannot be asked may. Without them this is not checked: one URL
  may be a load balancer that answers for any member;
* every object lists at the storage version (a LIST fails on an object stored at a version the CRD lost), and no
  ``managedFields`` entry names a version the CRD does not serve (server-side apply fails on it,
  kubernetes#111937): the managedFields pass would write nothing;

and for the releases:

* every CRD of release N is in release N+1 (a CRD at release N+1 is never re-applied at N);
* applying release N+1 is a no-op: the apiserver's own answer to the apply sent with ``dryRun=All`` (the same
  field manager, forced) equals the live CRD, so neither spec, metadata nor ownership would change;
* nothing the previous release declared is left for the release-follow step to remove.

Anything else, an error included, is a reason to take the normal path: the verdict lists every reason found
(``blockers``), and ``nothing_to_do`` is true only with none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ..ha.server_clock import server_now
from ..ha.barrier import storage_version_hash
from ..release.crd_changes import apply_changes
from ..kube.crd import Crd, stale_managed_fields_of
from ..kube.errors import CrdOpsError
from ..restore.listing import list_pages
from ..ha.pass_lease import DEFAULT_NAMESPACE, Holder, lease_name
from ..record.record import CHECKPOINT_ANNOTATION, PROOF_NONE, foreign_reason, validate_record
from ..release.follow import follow_release, pair_manifests
from ..repair.diagnosis import repair_in_progress
from ..kube.transport import JSON, Transport

MAX_EXAMPLES = 3
RELEASE_WHY = "release N+1 applied with no change"


@dataclass
class Verdict:
    nothing_to_do: bool = False
    blockers: List[str] = field(default_factory=list)
    why: List[str] = field(default_factory=list)
    objects_listed: int = 0
    objects: Dict[str, int] = field(default_factory=dict)  # per CRD, when its objects were listed

    @property
    def summary(self) -> str:
        """One line for the report: why there is nothing to do, or the first reasons there is something."""
        if self.nothing_to_do:
            crds = len(self.why) - self.release_lines
            return ("%d CRD(s) at their storage version alone with a proven record, release N+1 in effect, %d objects "
                    "read: no managedFields entry at a version gone" % (crds, self.objects_listed))
        more = len(self.blockers) - MAX_EXAMPLES
        return "; ".join(self.blockers[:MAX_EXAMPLES]) + (" (and %d more)" % more if more > 0 else "")

    @property
    def release_lines(self) -> int:
        return sum(1 for w in self.why if w.startswith(RELEASE_WHY))

    def to_dict(self) -> Dict[str, Any]:
        return {"nothing_to_do": self.nothing_to_do, "blockers": list(self.blockers), "why": list(self.why),
                "objects_listed": self.objects_listed, "summary": self.summary}


def crd_blockers(crd: Crd) -> List[str]:
    """What the live CRD itself says is left: storedVersions, the record and its proof, a checkpoint."""
    out = []
    if crd.needs_migration:
        stored = list(crd.stored_versions)
        out.append("%s: status.storedVersions is %s, not [%s]" % (crd.name, stored, crd.storage_version))
    check = validate_record(crd)
    record = check.record
    # another CRD's record (copied with the CRD's annotations) is never this CRD's proof, and neither is one that
    # names no CRD (written by hand, or before records were bound): either way nothing ties it to this CRD, so it
    # counts as missing, whatever its generation, as it does for the trim (record.validate_record). A record of
    # this CRD must be of the CRD's generation: the role re-stamps it after its own apply of release N+1
    # (record.carry_record), so a generation it did not stamp is a spec change nobody proved harmless (a flip to
    # another storage version and back, with storedVersions then set by any status writer)
    foreign = foreign_reason("migration record", record.crd_uid, crd) if record is not None else None
    if record is None:
        out.append("%s: no migration record (%s)" % (crd.name, check.reason))
    elif foreign:
        out.append("%s: %s" % (crd.name, foreign))
    elif record.storage_version != crd.storage_version:
        out.append("%s: the migration record is for storage version %s, the CRD's is %s"
                   % (crd.name, record.storage_version, crd.storage_version))
    elif record.failed or record.accounted != record.listed:
        out.append("%s: the migration record is not of a complete pass with zero failures (listed %d, accounted "
                   "for %d, failed %d)" % (crd.name, record.listed, record.accounted, record.failed))
    elif not check.ok:
        out.append("%s: migration record not valid (%s)" % (crd.name, check.reason))
    elif record.proof == PROOF_NONE:
        out.append("%s: the migration record has no proof (no etcd scan, no confirming pass)" % crd.name)
    if CHECKPOINT_ANNOTATION in crd.annotations:
        out.append("%s: a resume checkpoint is left (an unfinished pass)" % crd.name)
    added_back = repair_in_progress(crd)
    if added_back:
        out.append("%s: a repair added %s back and has not removed it again (an unfinished repair)"
                   % (crd.name, ", ".join(added_back)))
    return out


def lease_blocker(transport: Transport, crd: Crd, namespace: str) -> Optional[str]:
    """The CRD's pass Lease (pass_lease.py) held by a holder that still renews it: another run is writing now (a
    re-store, a managedFields pass, a repair), so what the CRD says may change under this verdict. Judged by the
    apiserver's clock, like the runs that wait for it; a Lease left by a killed run counts once it expired."""
    path = "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s" % (namespace, lease_name(crd.name))
    resp = transport.request("GET", path, accept=JSON)
    if resp.status == 404:
        return None
    if not resp.ok:
        hint = " (grant get on leases.coordination.k8s.io in namespace %s)" % namespace if resp.status == 403 else ""
        return "%s: could not check the pass Lease %s/%s: HTTP %d %s%s" % (
            crd.name, namespace, lease_name(crd.name), resp.status, resp.api_message(), hint)
    holder = Holder(resp.json() or {}, server_now(resp.header("Date")))
    if holder.expired:
        return None
    return "%s: pass Lease held by %s (another run is writing)" % (crd.name, holder.describe())


def serving_blocker(transport: Transport, url: str, crd: Crd) -> Optional[str]:
    """Why the apiserver at ``url`` may not serve ``crd`` at its storage version and store there, or None.

    Asked of its own discovery, as the HA barrier asks: an apiserver whose informer still has an older CRD encodes
    writes at another version (kubernetes#130235), and one that does not serve the storage version fails the LIST
    the role's phases would run there. A storage version the CRD itself does not serve is looked up under the
    versions it does serve (the storageVersionHash is the same for every version of a resource)."""
    want = storage_version_hash(crd.group, crd.storage_version or "", crd.kind)
    versions = [crd.storage_version] if crd.storage_version in crd.served_versions else list(crd.served_versions)
    try:
        for version in versions:
            resp = transport.request("GET", "/apis/%s/%s" % (crd.group, version), accept=JSON)
            if resp.status == 404:
                continue
            if not resp.ok:
                return "%s: apiserver %s could not be asked what it serves: HTTP %d %s" % (
                    crd.name, url, resp.status, resp.api_message())
            found = [r for r in (resp.json() or {}).get("resources") or [] if r.get("name") == crd.plural]
            if not found:
                continue
            seen = found[0].get("storageVersionHash")
            if seen == want:
                return None
            return "%s: apiserver %s does not store at %s yet (storageVersionHash %s, not %s): its view of the CRD " \
                   "lags" % (crd.name, url, crd.storage_version, seen or "absent", want)
    except CrdOpsError as exc:
        why = exc.api_message or exc.message
        return "%s: apiserver %s could not be asked what it serves (%s)" % (crd.name, url, why)
    served = ", ".join(versions) or "any version"
    return "%s: apiserver %s does not serve %s at %s" % (crd.name, url, crd.plural, served)


@dataclass(frozen=True)
class Peers:
    """Who else may act on the selected CRDs: the namespace of the pass Leases (another run writing now) and the
    apiservers to ask one by one (URL -> transport; none given: not checked, one URL may be a load balancer)."""
    lease_namespace: str = DEFAULT_NAMESPACE
    apiservers: Mapping[str, Transport] = field(default_factory=dict)


def peer_checks(transport: Transport, crds: Sequence[Crd], peers: Peers, verdict: Verdict) -> None:
    for crd in crds:
        def step(crd: Crd = crd) -> None:
            found = [lease_blocker(transport, crd, peers.lease_namespace)]
            found += [serving_blocker(t, url, crd) for url, t in peers.apiservers.items()]
            verdict.blockers.extend(b for b in found if b)
        _guarded(verdict, "who else acts on %s" % crd.name, step)


def release_blockers(live_names: Sequence[str], release_names: Sequence[str],
                     target_names: Sequence[str]) -> List[str]:
    """Release N CRDs the storage flip would apply (not in release N+1), release N+1 CRDs it would create."""
    out = ["%s: in release N but not in release N+1, so the storage flip would apply it" % n
           for n in release_names if n not in target_names]
    out += ["%s: release N+1 would create it" % n for n in target_names if n not in live_names]
    return out


def unserved_entries(transport: Transport, crd: Crd, page_size: int) -> Tuple[int, List[Dict[str, Any]]]:
    """(objects listed, managedFields entries at versions the CRD does not serve), every object's metadata read
    at the storage version, page by page (nothing kept but the entries found)."""
    found: List[Dict[str, Any]] = []
    served = crd.served_versions

    def note(managed_fields: Any, _annotations: Any = None) -> None:
        found.extend(stale_managed_fields_of(managed_fields, crd.group, served))

    listed = sum(len(page) for page in list_pages(transport, crd, page_size, version=crd.storage_version,
                                                  classify=note))
    return listed, found


@dataclass(frozen=True)
class Releases:
    release: Sequence[Mapping[str, Any]] = ()     # release N (the storage flip)
    target: Sequence[Mapping[str, Any]] = ()      # release N+1
    installed: Sequence[Mapping[str, Any]] = ()   # the release installed before, when no release N is given
    field_manager: str = "crdops-migration"

    def names(self, docs: Sequence[Mapping[str, Any]]) -> List[str]:
        return [str((d.get("metadata") or {}).get("name") or "") for d in docs]


def _guarded(verdict: Verdict, what: str, step: Callable[[], None]) -> None:
    """Run one step of the check; an error is a reason to take the normal path (which reports it properly)."""
    try:
        step()
    except (CrdOpsError, ValueError, KeyError, TypeError) as exc:  # TypeError, KeyError: a malformed manifest
        verdict.blockers.append("could not check %s: %s" % (what, exc))


def release_checks(transport: Transport, live: Sequence[Crd], releases: Releases, verdict: Verdict) -> None:
    live_names = [c.name for c in live]
    verdict.blockers += release_blockers(live_names, releases.names(releases.release), releases.names(releases.target))
    for doc in releases.target:
        name = releases.names([doc])[0]

        def apply_step(doc: Mapping[str, Any] = doc, name: str = name) -> None:
            changes = apply_changes(transport, doc, releases.field_manager)
            if changes:
                verdict.blockers.append("%s: applying release N+1 would change %s" % (name, ", ".join(changes)))
        if name in live_names:
            _guarded(verdict, "release N+1 against %s" % name, apply_step)
    previous = releases.release or releases.installed
    for before, applied in pair_manifests(previous, releases.target):
        def follow_step(before: Mapping[str, Any] = before, applied: Mapping[str, Any] = applied) -> None:
            left = follow_release(transport, before, applied, field_manager=releases.field_manager, check_mode=True)
            if left.removed:
                verdict.blockers.append(left.summary())
        _guarded(verdict, "what the previous release left on %s" % releases.names([applied])[0], follow_step)


def object_checks(transport: Transport, crd: Crd, page_size: int, verdict: Verdict) -> None:
    def step() -> None:
        listed, entries = unserved_entries(transport, crd, page_size)
        verdict.objects_listed += listed
        verdict.objects[crd.name] = listed
        if entries:
            versions = sorted(set(str(e["apiVersion"]) for e in entries))
            verdict.blockers.append("%s: %d managedFields entries at versions it does not serve (%s)"
                                    % (crd.name, len(entries), ", ".join(versions)))
        else:
            verdict.why.append("%s: storedVersions [%s], record with proof, %d objects read at %s, no managedFields "
                               "entry at a version it does not serve" % (crd.name, crd.storage_version, listed,
                                                                         crd.storage_version))
    _guarded(verdict, "the objects of %s" % crd.name, step)


def decide(transport: Transport, crds: Sequence[Crd], releases: Releases, page_size: int = 500,
           selected: Optional[Sequence[str]] = None, peers: Optional[Peers] = None) -> Verdict:
    """The verdict for ``crds`` (the selected CRDs that exist). ``selected``: every name the run selected; one
    that does not exist is a reason to take the normal path. ``peers``: where the pass Leases are and which
    apiservers to ask (default: Leases in ``default``, no apiserver asked). Cheap checks first: the objects are
    listed only when nothing else is left."""
    verdict = Verdict()
    live_names = [c.name for c in crds]
    verdict.blockers += ["%s: selected but not found" % n for n in selected or () if n not in live_names]
    for crd in crds:
        verdict.blockers += crd_blockers(crd)
    if not crds:
        verdict.blockers.append("no selected CRD exists")
    if not verdict.blockers:
        peer_checks(transport, crds, peers or Peers(), verdict)
    if not verdict.blockers:
        release_checks(transport, crds, releases, verdict)
    if not verdict.blockers:
        for crd in crds:
            object_checks(transport, crd, page_size, verdict)
    if not verdict.blockers and releases.target:
        verdict.why.append(RELEASE_WHY + " (dry-run), nothing left of the release before")
    verdict.nothing_to_do = not verdict.blockers
    if verdict.blockers:
        verdict.why = []
    return verdict

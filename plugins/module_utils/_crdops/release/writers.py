# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Who still uses a version that the next release removes: those clients break when it goes.

Two witnesses, both read-only:

- **managedFields.** Every write records its manager, operation and the version it was sent at, with a
  ``time`` the apiserver sets from its own clock. An entry at a removed version whose time is at or after
  ``since`` (a time read from the apiserver's ``Date`` header, never the controller's clock, which may be
  skewed) was written by a client that still writes at that version. Older entries are leftovers that the
  managedFields passes rewrite; they are counted, not named as writers.
- **Request counters.** Readers never show in managedFields. ``apiserver_request_total`` on ``/metrics`` has a
  ``version`` label; its growth over a window in which this run sends nothing at that version counts the
  requests of other clients. It is read from every apiserver the HA barrier knows (``apiservers.py``), since
  each counts only what it served. The ``apiserver_requested_deprecated_apis`` gauge is not used: it is a 0/1
  flag that this run's own reads would set. Watches are counted only when they end, so the open ones are
  read from ``apiserver_longrunning_requests``. ``/metrics`` needs ``get`` on the non-resource URL
  ``/metrics``; without it the result says "not measured" for that apiserver.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from ..ha.apiservers import discover_topology
from ..ha.server_clock import parse_time, server_now
from .client_check import metadata_pages
from .client_evidence import (
    DECLARES, DECLARES_CLIENT_SIDE, DECLARES_HELM, FLUX_KUSTOMIZATION, HELM_RELEASE, NOT_CHECKED_HELM, WRITES,
    Evidence, Source, leftovers, object_evidence, sources_of)
from .flux_inventory import FLUX_MANAGER, FluxInventories, Kustomization
from ..kube.crd import Crd
from ..kube.errors import BadInputError, CrdOpsError, at_least
from .helm_releases import HelmRelease, HelmScan, look_up_releases, scan_helm_releases
from ..kube.transport import JSON, Transport

METRICS_PATH = "/metrics"
METRICS_ACCEPT = "text/plain;version=0.0.4"
REQUESTS_METRIC = "apiserver_request_total"
WATCHES_METRIC = "apiserver_longrunning_requests"
MAX_EXAMPLES = 5
REQUESTS = "requests"
# where each kind of client evidence was read (client_evidence.KINDS); the rest come from managedFields
SEEN_IN = {DECLARES_CLIENT_SIDE: "last-applied annotation", DECLARES_HELM: "Helm release storage",
           NOT_CHECKED_HELM: "Helm release storage"}  # the name in accept_clients that accepts the requests counted at a removed version
# accept_clients: True accepts every client; a list accepts those it names (a manager, a source's reference, or
# "requests" for the counted requests, whose clients have no name); False accepts none
Accept = Union[bool, Sequence[str]]


def accepts(accept: Accept, names: Sequence[str]) -> bool:
    if isinstance(accept, bool):
        return accept
    return any(n in accept for n in names if n)


_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def server_clock(transport: Transport) -> float:
    """The apiserver's time now (its ``Date`` header); the controller's clock only when it sends none."""
    resp = transport.request("GET", "/version", accept=JSON)
    return server_now(resp.header("Date"))


# -- request counters ---------------------------------------------------------------------------------------
Series = Dict[Tuple[str, str, str, str], float]  # (group, version, resource, verb) -> value


def parse_metrics(text: str, metric: str, groups: Iterable[str]) -> Series:
    """Sum the samples of ``metric`` per (group, version, resource, verb), for the given API groups only."""
    wanted = set(groups)
    out: Series = {}
    prefix = metric + "{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        labels_text, _sep, rest = line[len(prefix):].rpartition("}")
        labels = dict(_LABEL.findall(labels_text))
        if labels.get("group") not in wanted:
            continue
        try:
            value = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
        key = (labels["group"], labels.get("version", ""), labels.get("resource", ""), labels.get("verb", ""))
        out[key] = out.get(key, 0.0) + value
    return out


@dataclass
class MetricsRead:
    requests: Series
    watches: Series


def read_metrics(transport: Transport, groups: Iterable[str]) -> Tuple[Optional[MetricsRead], Optional[str]]:
    """(counters, None), or (None, why they could not be read)."""
    try:
        resp = transport.request("GET", METRICS_PATH, accept=METRICS_ACCEPT)
    except CrdOpsError as exc:
        return None, "not measured: /metrics not reachable: %s" % (exc.api_message or exc.message)
    if resp.status in (401, 403):
        return None, ("not measured: /metrics forbidden (HTTP %d); grant get on nonResourceURLs [\"/metrics\"] "
                      "(docs/rbac.md)" % resp.status)
    if not resp.ok:
        return None, "not measured: /metrics answered HTTP %d %s" % (resp.status, resp.api_message())
    text = resp.data.decode("utf-8", "replace")
    group_list = list(groups)
    return MetricsRead(parse_metrics(text, REQUESTS_METRIC, group_list),
                       parse_metrics(text, WATCHES_METRIC, group_list)), None


@dataclass
class Traffic:
    """Requests one apiserver served at the removed versions of one CRD during the window."""

    apiserver: str
    measured: bool
    note: Optional[str] = None
    requests: Dict[str, int] = field(default_factory=dict)  # version -> requests in the window
    by_verb: Dict[str, Dict[str, int]] = field(default_factory=dict)  # version -> verb -> requests
    watches: Dict[str, int] = field(default_factory=dict)  # version -> watches open at the end

    def to_dict(self) -> Dict[str, Any]:
        return {"apiserver": self.apiserver, "measured": self.measured, "note": self.note,
                "requests": dict(self.requests), "by_verb": dict(self.by_verb), "watches": dict(self.watches)}


def traffic_of(url: str, before: MetricsRead, after: MetricsRead, crd: Crd, versions: List[str]) -> Traffic:
    """The growth of the request counters of ``crd`` at ``versions``, and the watches open at the end."""
    out = Traffic(url, measured=True)
    for (group, version, resource, verb), value in after.requests.items():
        if group != crd.group or resource != crd.plural or version not in versions:
            continue
        grown = value - before.requests.get((group, version, resource, verb), 0.0)
        if grown < 0:  # the apiserver restarted during the window: its counters began again
            return Traffic(url, measured=False, note="not measured: the counters went back (apiserver restarted)")
        if grown > 0:
            out.requests[version] = out.requests.get(version, 0) + int(grown)
            out.by_verb.setdefault(version, {})[verb] = int(grown)
    for (group, version, resource, _verb), value in after.watches.items():
        if group == crd.group and resource == crd.plural and version in versions and value > 0:
            out.watches[version] = out.watches.get(version, 0) + int(value)
    return out


# -- managedFields and last-applied --------------------------------------------------------------------------
@dataclass
class Writer:
    """One client of a removed version, per source: an applier whose source declares it (at any age), or a
    manager that wrote at it since ``since``. Objects naming other sources make other writers, so that accepting
    a source accepts exactly the objects that name it."""

    manager: str
    operation: str
    version: str
    subresource: str
    kind: str = WRITES  # client_evidence.KINDS
    objects: int = 0
    last_write: float = 0.0
    examples: List[str] = field(default_factory=list)
    sources: List[Source] = field(default_factory=list)  # what its objects name, each with what its controller says

    @property
    def refs(self) -> List[str]:
        """The sources' references ("flux-system/apps"): what ``accept_clients`` names."""
        return [s.ref for s in self.sources]

    @property
    def names(self) -> List[str]:
        """What ``accept_clients`` names to accept this client: one of the sources its objects name, or, when they
        name none, its manager. A manager's name never covers objects that name a source."""
        return list(self.refs) if self.refs else [self.manager]

    def to_dict(self) -> Dict[str, Any]:
        return {"manager": self.manager, "operation": self.operation, "version": self.version,
                "subresource": self.subresource, "kind": self.kind, "objects": self.objects,
                "last_write": iso(self.last_write) if self.last_write else None, "examples": list(self.examples),
                "sources": [str(s) for s in self.sources],
                "source": self.sources[0].to_dict() if self.sources else None}

    def record(self, key: str, written: float) -> None:
        self.objects += 1
        self.last_write = max(self.last_write, written)
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(key)

    def sentence(self) -> str:
        head = "%s %s (%s at %s%s)" % ("applier" if self.kind != WRITES else "manager", self.manager,
                                       self.kind if self.kind != WRITES else self.operation, self.version,
                                       "/" + self.subresource if self.subresource else "")
        when = "last write %s" % iso(self.last_write) if self.last_write else "last write unknown"
        where = "; source: %s" % ", ".join(str(s) for s in self.sources) if self.sources else ""
        return "%s on %d objects, %s (e.g. %s)%s" % (head, self.objects, when, ", ".join(self.examples[:3]), where)


class _FluxPending(NamedTuple):
    """An object whose Flux Apply entry waits for its Kustomization's inventory to say whether its source moved."""

    key: str
    namespace: str
    name: str
    found: List[Evidence]
    sources: List[Source]


@dataclass
class CrdWriters:
    name: str
    group: str
    removed_versions: List[str]
    listed: int = 0
    writers: List[Writer] = field(default_factory=list)
    older_entries: int = 0  # Update entries at removed versions written before ``since``: the managedFields passes fix them
    traffic: List[Traffic] = field(default_factory=list)
    storage_version: str = ""
    kind: str = ""
    # Flux Apply entries at a removed version on objects whose Kustomization's inventory says a version that stays:
    # the source moved, so they hold nothing back; the managedFields pass before release N+1 translates them
    moved_entries: int = 0
    helm_named: Dict[str, List[str]] = field(default_factory=dict)  # Helm release ns/name -> objects naming it
    _flux_pending: List[_FluxPending] = field(default_factory=list, repr=False)

    def add(self, meta: Mapping[str, Any], since: float) -> None:
        """Count one listed object's signs of clients at the removed versions (client_evidence.py)."""
        self.listed += 1
        key = "%s/%s" % (meta["namespace"], meta.get("name")) if meta.get("namespace") else str(meta.get("name"))
        found = list(object_evidence(meta, self.group, self.removed_versions, since))
        sources = sources_of(meta) if found else []
        # every object, evidence or not: a release written by Helm's client-side apply leaves no evidence once the
        # re-store relabelled its Update entries, and only its storage says what it declares
        for source in sources or sources_of(meta):
            if source.what == HELM_RELEASE:
                self.helm_named.setdefault(source.ref, []).append(key)
        if any(s.what == FLUX_KUSTOMIZATION for s in sources) and any(_is_flux_apply(e) for e in found):
            self._flux_pending.append(_FluxPending(key, str(meta.get("namespace") or ""), str(meta.get("name")),
                                                   found, sources))
        else:
            self._record(key, found, sources)
        self.older_entries += leftovers(meta, self.group, self.removed_versions, since)

    def _record(self, key: str, found: List[Evidence], sources: List[Source]) -> None:
        for evidence in found:
            self._writer(evidence, sources).record(key, evidence.written)

    def resolve_flux(self, inventories: FluxInventories) -> None:
        """Ask each Kustomization the waiting objects name what its source declares them at now: an object it
        declares at a version that stays has moved, so its Flux Apply entry is no client; otherwise the entry
        stands, and its source says what the controller said (or why it was not asked)."""
        for pending in self._flux_pending:
            ref = next(s.ref for s in pending.sources if s.what == FLUX_KUSTOMIZATION)
            kustomization = inventories.get(ref)
            declared = kustomization.declared_version(pending.namespace, pending.name, self.group, self.kind)
            found = pending.found
            if declared is not None and declared not in self.removed_versions:
                self.moved_entries += sum(1 for e in found if _is_flux_apply(e))
                found = [e for e in found if not _is_flux_apply(e)]
            sources = [s._replace(says=kustomization.words()) if s.what == FLUX_KUSTOMIZATION else s
                       for s in pending.sources]
            self._record(pending.key, found, sources)
        self._flux_pending = []

    def add_helm(self, release: HelmRelease) -> None:
        """A Helm release whose stored manifest declares objects of this CRD at a removed version."""
        for version in sorted(set(o.version for o in release.objects)):
            objects = [o for o in release.objects if o.version == version]
            says = "revision %d%s" % (release.revision, "; " + release.blocked if release.blocked else "")
            writer = Writer(release.label, "release manifest", version, "", DECLARES_HELM, objects=len(objects),
                            examples=["%s/%s" % (o.namespace or release.namespace, o.name) for o in objects][:MAX_EXAMPLES],
                            sources=[Source(HELM_RELEASE, release.label, says)])
            self.writers.append(writer)

    def add_unchecked_helm(self, label: str, why: str) -> None:
        """A Helm release the objects of this CRD name whose storage could not be read (``why``, with the
        permission that would let it be): it may still declare a removed version, so it holds release N+1 back
        until it can be read or is accepted by its name."""
        examples = list(self.helm_named.get(label) or [])
        source = Source(HELM_RELEASE, label, "not checked: %s" % why)
        self.writers.append(Writer(label, "release storage", ",".join(self.removed_versions), "", NOT_CHECKED_HELM,
                                   objects=len(examples), examples=examples[:MAX_EXAMPLES], sources=[source]))

    def _writer(self, evidence: Evidence, sources: List[Source]) -> Writer:
        refs = [s.ref for s in sources]
        ident = (evidence.manager, evidence.operation, evidence.version, evidence.subresource, evidence.kind, refs)
        for writer in self.writers:
            if (writer.manager, writer.operation, writer.version, writer.subresource, writer.kind, writer.refs) == ident:
                return writer
        writer = Writer(evidence.manager, evidence.operation, evidence.version, evidence.subresource, evidence.kind,
                        sources=list(sources))
        self.writers.append(writer)
        return writer

    def traffic_sentences(self) -> List[str]:
        out = []
        for t in self.traffic:
            for version, count in sorted(t.requests.items()):
                verbs = ", ".join("%s %d" % item for item in sorted(t.by_verb.get(version, {}).items()))
                out.append("%d requests at %s served by %s in the window (%s; readers included, which "
                           "managedFields never names)" % (count, version, t.apiserver, verbs))
            for version, count in sorted(t.watches.items()):
                out.append("%d watches open at %s on %s" % (count, version, t.apiserver))
        return out

    def clients(self, accept: Accept = False) -> List[str]:
        """One sentence per client that breaks when the versions go and is not accepted."""
        out = [w.sentence() for w in self.writers if not accepts(accept, w.names)]
        if not accepts(accept, [REQUESTS]):
            out += self.traffic_sentences()
        return out

    @property
    def stays(self) -> str:
        """The version the clients move to: the storage version, unless it is the one going (before release N,
        whose storage version the live CRD may not even define yet)."""
        return self.storage_version if self.storage_version not in self.removed_versions else ""

    def fix(self) -> str:
        """What to do: move each named source to the version that stays, then run again."""
        return fix_words(self.stays or "the version that stays", any(w.sources for w in self.writers))

    def broken_clients(self, accept: Accept = False) -> List[Dict[str, Any]]:
        """The same clients as records (for the role's result and the fleet report); ``held``: not accepted."""
        out: List[Dict[str, Any]] = [
            dict(w.to_dict(), crd=self.name, held=not accepts(accept, w.names), stays=self.stays,
                 seen_in=SEEN_IN.get(w.kind, "managedFields"))
            for w in self.writers]
        readers_held = not accepts(accept, [REQUESTS])
        for t in self.traffic:
            for version in sorted(set(t.requests) | set(t.watches)):
                out.append({"crd": self.name, "seen_in": "metrics", "apiserver": t.apiserver, "version": version,
                            "requests": t.requests.get(version, 0), "by_verb": dict(t.by_verb.get(version, {})),
                            "watches": t.watches.get(version, 0), "held": readers_held, "stays": self.stays})
        return out

    def measured(self) -> bool:
        return any(t.measured for t in self.traffic)

    def to_dict(self, accept: Accept = False) -> Dict[str, Any]:
        held = self.clients(accept)
        return {"name": self.name, "removed_versions": list(self.removed_versions), "listed": self.listed,
                "writers": [w.to_dict() for w in self.writers], "older_entries": self.older_entries,
                "moved_entries": self.moved_entries,
                "traffic": [t.to_dict() for t in self.traffic], "clients": self.clients(),
                "readers_checked": self.measured(), "ok": not self.clients(), "held_back": bool(held),
                "held_back_by": held, "fix": self.fix() if held else None}


def _is_flux_apply(evidence: Evidence) -> bool:
    return evidence.kind == DECLARES and evidence.manager == FLUX_MANAGER


def fix_words(stays: str, named_sources: bool) -> str:
    """What to do about the clients that hold release N+1 back, per kind of source."""
    return ("move %s to %s (its manifests' apiVersion), let it apply, then run again: the next run applies release "
            "N+1. A Flux Kustomization counts as moved once its inventory (status.inventory, written on every "
            "reconcile) says %s: nothing to accept (kustomize-controller's MigrateAPIVersion feature gate, off by "
            "default, also moves its managedFields entries). Argo CD records the live object's version, not Git's, "
            "and writes on drift only: sync with Replace=true, or a forced sync, so that its entry moves. A client "
            "you accept to break: crd_upgrade_accept_broken_clients with its source (namespace/name) or, for objects "
            "that name no source, its manager"
            % ("these sources" if named_sources else "these clients", stays, stays))


# -- the whole check ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WritersOptions:
    removed_versions: Mapping[str, List[str]]  # CRD name -> versions the next release removes
    since: Optional[str] = None  # apiserver time (RFC 3339); None: ``lookback`` seconds before the apiserver's now
    lookback: float = 3600.0
    metrics_window: float = 30.0  # seconds between the two reads of /metrics; 0: not measured
    page_size: int = 500
    apiserver_endpoints: Tuple[str, ...] = ()
    accept: Accept = False  # clients accepted to break (accepts()): they no longer hold release N+1 back
    helm_releases: bool = False  # read Helm releases' stored manifests (helm_releases.py)
    # conversion None: the Helm releases found will have their stored manifests rewritten before release N+1, so
    # they (and the appliers whose objects name them) do not hold it back
    helm_rewrite: bool = False

    def validate(self) -> None:
        if not isinstance(self.accept, bool) and not (isinstance(self.accept, (list, tuple))
                                                      and all(isinstance(a, str) and a for a in self.accept)):
            raise BadInputError("accept_clients must be true, false or a list of names (field managers, Helm releases "
                                "as namespace/name, Flux Kustomizations as namespace/name, Argo CD Applications, or "
                                "%r for counted requests), got %r" % (REQUESTS, self.accept))
        if not isinstance(self.removed_versions, Mapping):
            raise BadInputError("removed_versions must map CRD names to lists of versions")
        for name, versions in self.removed_versions.items():
            if not isinstance(versions, list) or not all(isinstance(v, str) and v for v in versions):
                raise BadInputError("removed_versions[%s] must be a list of version names, got %r" % (name, versions))
        if self.since is not None and parse_time(self.since) is None:
            raise BadInputError("since must be an RFC 3339 time such as 2026-12-01T15:04:05Z, got %r" % self.since)
        at_least("lookback", self.lookback, 0)
        at_least("metrics_window", self.metrics_window, 0)
        at_least("page_size", self.page_size, 0, strict=True)


@dataclass
class WritersResult:
    crds: List[CrdWriters]
    since: float
    server_time: float
    window_s: float
    metrics: str  # one sentence: where the counters were measured, or why not
    accept: Accept = False
    helm: Optional[HelmScan] = None  # None: Helm releases not looked at
    kustomizations: List[Kustomization] = field(default_factory=list)  # those asked for their inventory

    def flux_sentence(self) -> str:
        """Which Kustomizations were asked what their sources declare, and which could not be."""
        if not self.kustomizations:
            return "no Flux Kustomization named by the objects"
        unasked = ["%s (%s)" % (k.ref, k.not_asked) for k in self.kustomizations if k.not_asked is not None]
        return "Flux Kustomizations asked: %d%s" % (
            len(self.kustomizations) - len(unasked), "; not asked: " + "; ".join(unasked) if unasked else "")

    def unmatched_accepts(self) -> List[str]:
        """Names in ``accept`` that accept no client here: probably a typo (or a source of another cluster)."""
        if isinstance(self.accept, bool):
            return []
        known = set([REQUESTS] + [n for c in self.crds for w in c.writers for n in w.names])
        return [name for name in self.accept if name not in known]

    def helm_sentence(self) -> str:
        """Which Helm releases were read, which not (and why), and which the run rewrites: console and report."""
        helm = self.helm
        if helm is None:
            return "Helm releases not checked (helm_releases off)"
        words = ["Helm releases: %d read" % helm.scanned]
        if not helm.checked:
            words.append(helm.note or "Secrets of all namespaces not listed")
        elif helm.note:
            words.append(helm.note)
        if helm.looked_up:
            words.append("%d named by the objects looked up in their namespace" % len(helm.looked_up))
        if helm.not_checked:
            words.append("not checked, so release N+1 is held back for their CRDs until they can be read or are "
                         "accepted by name: %s" % "; ".join("Helm release %s not checked: %s" % item
                                                            for item in sorted(helm.not_checked.items())))
        if helm.rewrite:
            words.append("to rewrite as a new revision before release N+1 (crd_upgrade_helm_rewrite; for charts "
                         "already moved to the version that stays: a chart that still says the removed version fails "
                         "its next upgrade anyway, and a rollback to a revision before the rewrite fails as after "
                         "helm-mapkubeapis): %s" % ", ".join(helm.rewrite))
        return "; ".join(words)

    @property
    def ok(self) -> bool:
        """No client of a removed version at all (accepted ones included)."""
        return not any(c.clients() for c in self.crds)

    @property
    def held_back(self) -> List[str]:
        """CRDs whose release N+1 must not be applied: a client not accepted still uses a version it removes."""
        return [c.name for c in self.crds if c.clients(self.accept)]

    def refusal(self, cluster: str) -> str:
        bad = ["CRD %s: %s; fix: %s" % (c.name, "; ".join(c.clients(self.accept)), c.fix())
               for c in self.crds if c.clients(self.accept)]
        return ("cluster %s: release N+1 held back for %d CRDs, whose clients still use versions it removes and would "
                "break when they go: %s. Or accept that they break (role variable crd_upgrade_accept_broken_clients: "
                "true, or a list of the names above)" % (cluster, len(bad), "; ".join(bad)))

    def broken_clients(self, cluster: str) -> List[Dict[str, Any]]:
        return [dict(client, cluster=cluster) for c in self.crds for client in c.broken_clients(self.accept)]

    def readers_checked(self) -> bool:
        """Whether every checked CRD's request counters were read (else readers were not looked for at all)."""
        return bool(self.crds) and all(c.measured() for c in self.crds)

    def to_dict(self, cluster: str) -> Dict[str, Any]:
        return {"crds": [c.to_dict(self.accept) for c in self.crds], "since": iso(self.since),
                "server_time": iso(self.server_time), "metrics_window_s": self.window_s, "metrics": self.metrics,
                "readers_checked": self.readers_checked(), "ok": self.ok, "held_back": self.held_back,
                "helm": self.helm.to_dict() if self.helm is not None else None, "helm_words": self.helm_sentence(),
                "kustomizations": [{"ref": k.ref, "says": k.says or None, "not_asked": k.not_asked}
                                   for k in self.kustomizations],
                "flux_words": self.flux_sentence(), "unmatched_accepts": self.unmatched_accepts(),
                "refusal": self.refusal(cluster) if self.held_back else None}


def metrics_targets(transport: Transport, endpoints: List[str],
                    connect: Callable[[str], Transport]) -> Tuple[Dict[str, Transport], Optional[str]]:
    """The apiservers whose counters can be read one by one, and what is not covered (or None)."""
    topo, reachable = discover_topology(transport, endpoints, connect)
    alive = topo.leases.alive
    direct = dict((url, t) for url, t in reachable.items() if url in topo.reached)
    if alive is not None and topo.known >= alive and direct:
        return direct, None
    kube_url = topo.kubeconfig_url
    if alive == 1 and not direct:
        return {kube_url: transport}, None
    if direct:
        return direct, ("%s apiservers alive, %d measured directly" % ("an unknown number of" if alive is None
                                                                       else alive, len(direct)))
    # a load balancer may answer each read from another member, so two reads are not one counter's growth
    return {}, ("not measured: the apiservers cannot be reached one by one (%s); set apiserver_endpoints"
                % (topo.leases.problem or "%s alive" % alive))


def measure_window(targets: Mapping[str, Transport], crds: List[Crd], removed: Mapping[str, List[str]],
                   window: float, during: Callable[[], None], clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> Dict[str, List[Traffic]]:
    """Read every target's counters, run ``during`` (which sends nothing at a removed version), wait out the
    window, read again. CRD name -> one Traffic per apiserver."""
    groups = sorted(set(c.group for c in crds))
    first = dict((url, read_metrics(t, groups)) for url, t in targets.items())
    start = clock()
    during()
    left = window - (clock() - start)
    if left > 0:
        sleep(left)
    out: Dict[str, List[Traffic]] = dict((c.name, []) for c in crds)
    for url, t in targets.items():
        before, why = first[url]
        after, why_after = read_metrics(t, groups) if before is not None else (None, why)
        for crd in crds:
            if before is None or after is None:
                out[crd.name].append(Traffic(url, measured=False, note=why or why_after))
            else:
                out[crd.name].append(traffic_of(url, before, after, crd, list(removed.get(crd.name) or [])))
    return out


def listing_version(crd: Crd, removed: List[str]) -> Optional[str]:
    """The version to list at: one that stays, so that this run's own LIST is never counted as a client of a removed
    version. Before release N the storage version may be the very one it stops serving; then another served
    version, or, when every served one goes, the storage version all the same (then listed outside the window)."""
    if crd.storage_version not in removed:
        return crd.storage_version
    return next((v for v in crd.served_versions if v not in removed), crd.storage_version)


def removed_of(crd: Crd, removed_versions: Mapping[str, List[str]]) -> List[str]:
    """The versions of ``crd`` the next release removes, among those it still defines."""
    defined = [v.name for v in crd.versions]
    return [v for v in removed_versions.get(crd.name) or [] if v in defined]


def find_writers(transport: Transport, crds: List[Crd], options: WritersOptions,
                 connect: Optional[Callable[[str], Transport]] = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> WritersResult:
    """Name every client still using a version ``options.removed_versions`` says the next release removes.
    ``connect(url)``: a transport to one apiserver with the same credentials (for its /metrics)."""
    options.validate()
    now = server_clock(transport)
    since = (parse_time(options.since) if options.since else None) or now - options.lookback  # since: validated
    checked = [c for c in crds if removed_of(c, options.removed_versions)]
    results = dict((c.name, CrdWriters(c.name, c.group, removed_of(c, options.removed_versions),
                                       storage_version=c.storage_version or "", kind=c.kind)) for c in checked)

    def scan() -> None:  # LISTs at a version that stays: nothing at a removed version
        for crd in checked:
            version = listing_version(crd, results[crd.name].removed_versions)
            for page in metadata_pages(transport, crd, options.page_size, version):
                for meta in page:
                    results[crd.name].add(meta, since)

    window, words = count_while_listing(transport, checked, results, options, connect, scan, clock, sleep)
    inventories = FluxInventories(transport)
    for crd in checked:
        results[crd.name].resolve_flux(inventories)
    helm = helm_evidence(transport, checked, results, options) if options.helm_releases and checked else None
    return WritersResult([results[c.name] for c in checked], since, now, window, words,
                         rewritten_helm_accepted(options, checked, helm), helm, inventories.asked())


def count_while_listing(transport: Transport, checked: List[Crd], results: Mapping[str, CrdWriters],
                        options: WritersOptions, connect: Optional[Callable[[str], Transport]],
                        scan: Callable[[], None], clock: Callable[[], float],
                        sleep: Callable[[float], None]) -> Tuple[float, str]:
    """List the objects (``scan``) and, where counters can be read, count the requests at the removed versions
    around it; (the window in seconds, one sentence on where they were counted or why not)."""
    if not checked or options.metrics_window <= 0 or connect is None:
        scan()
        return 0.0, "not measured: metrics_window is 0" if options.metrics_window <= 0 else "not measured"
    targets, gap = metrics_targets(transport, list(options.apiserver_endpoints), connect)
    if not targets:  # no counter anyone reads: no window to wait out
        scan()
        return 0.0, gap or "not measured"
    # the run must send nothing at a removed version inside the window: where the objects can only be listed at one
    # (before release N, a CRD may serve nothing else yet), they are listed after it
    inside = all(listing_version(c, results[c.name].removed_versions) not in results[c.name].removed_versions
                 for c in checked)
    traffic = measure_window(targets, checked, dict((c.name, results[c.name].removed_versions) for c in checked),
                             options.metrics_window, scan if inside else (lambda: None), clock, sleep)
    if not inside:
        scan()
    for crd in checked:
        results[crd.name].traffic = traffic[crd.name]
    return options.metrics_window, metrics_sentence(traffic, options.metrics_window, gap)


def helm_evidence(transport: Transport, checked: List[Crd], results: Mapping[str, CrdWriters],
                  options: WritersOptions) -> HelmScan:
    """Helm releases whose stored manifest declares a checked CRD's kind at a removed version, added per CRD.

    Called after the objects' metadata were listed: every release they name (``helm_named``) that the lists of
    all namespaces did not show is read in its own namespace, and one that cannot be read holds release N+1
    back for the CRDs whose objects name it, as "not checked"."""
    targets = dict((c.name, (c.group, c.kind, removed_of(c, options.removed_versions))) for c in checked)
    scan = scan_helm_releases(transport, targets, page_size=min(options.page_size, 100))
    named = sorted(set(label for c in checked for label in results[c.name].helm_named))
    look_up_releases(transport, scan, named, targets)
    for crd in checked:
        for release in scan.for_crd(crd.name):
            results[crd.name].add_helm(release)
        for label in sorted(results[crd.name].helm_named):
            if label in scan.not_checked:
                results[crd.name].add_unchecked_helm(label, scan.not_checked[label])
    scan.rewrite = rewritable_releases(options, checked, scan)
    return scan


def rewritable_releases(options: WritersOptions, checked: List[Crd], helm: HelmScan) -> List[str]:
    """The releases the run rewrites as a new revision before release N+1 (helm_rewrite): every CRD they declare
    at a removed version has conversion None, and no Helm operation is pending on them."""
    if not options.helm_rewrite:
        return []
    plain = set(c.name for c in checked if c.conversion_strategy == "None")
    # a release that also declares a webhook-converted CRD is not rewritten whole
    return sorted(set(r.label for r in helm.releases if all(o.crd in plain for o in r.objects) and not r.blocked))


def rewritten_helm_accepted(options: WritersOptions, checked: List[Crd], helm: Optional[HelmScan]) -> Accept:
    """``options.accept``, plus the Helm releases the run will rewrite (conversion None only, helm_rewrite): their
    stored manifest moves to the storage version before release N+1, and the managedFields pass before it moves
    the entries of their objects, so neither they nor the appliers whose objects name them are left behind. A
    rewrite that fails holds release N+1 back for its CRDs then (crd_release_apply)."""
    if not options.helm_rewrite or helm is None or isinstance(options.accept, bool) and options.accept:
        return options.accept
    refs = helm.rewrite
    if not refs:
        return options.accept
    return list(options.accept or []) + refs if not isinstance(options.accept, bool) else list(refs)


def metrics_sentence(traffic: Mapping[str, List[Traffic]], window: float, gap: Optional[str]) -> str:
    measured = sorted(set(t.apiserver for ts in traffic.values() for t in ts if t.measured))
    if measured:
        words = "measured on %s over %.0f s" % (", ".join(measured), window)
    elif gap:
        return gap
    else:
        words = "; ".join(sorted(set(t.note or "" for ts in traffic.values() for t in ts))) or "not measured"
    return words + (" (%s)" % gap if gap else "")

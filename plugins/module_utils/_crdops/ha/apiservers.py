# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Find every apiserver of a cluster, so that the HA barrier never trusts one URL to speak for all.

How many: each kube-apiserver holds an identity Lease in ``kube-system`` (label
``apiserver.kubernetes.io/identity=kube-apiserver``, KEP-1965, beta and on by default since 1.26). It
renews it every ~10 s but the lease duration is about an hour, so a dead apiserver's Lease lingers: only
Leases renewed within the last minute count as alive. Where: the ``default/kubernetes`` EndpointSlice
lists each apiserver's advertise address (``lease`` endpoint reconciler). The kubeconfig URL may be a load
balancer that answers for an unknown member, so it counts as an apiserver only when exactly one is alive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple
from urllib.parse import urlsplit

from .barrier import BarrierPlan
from .server_clock import parse_time, server_now
from ..kube.errors import BadInputError, CrdOpsError, RefusalError
from ..kube.transport import JSON, Transport

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
IDENTITY_SELECTOR = "apiserver.kubernetes.io/identity=kube-apiserver"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
SLICE_SELECTOR = "kubernetes.io/service-name=kubernetes"
FRESH_WITHIN_S = 60.0  # renewals come every ~10 s; a minute tolerates a slow or briefly blocked apiserver
LEASE_APPEAR_S = 15.0  # a control plane seconds old may not have written its first identity Lease yet


@dataclass
class LeaseCount:
    alive: Optional[int]  # None: unknown (unreadable, or no identity Lease at all)
    readable: bool = True
    fresh: List[str] = field(default_factory=list)
    stale: List[str] = field(default_factory=list)
    problem: Optional[str] = None


def read_identity_leases(transport: Transport, wall: Callable[[], float] = time.time) -> LeaseCount:
    """Count the identity Leases renewed within :data:`FRESH_WITHIN_S` of the answering apiserver's clock."""
    try:
        resp = transport.request("GET", LEASES, query=[("labelSelector", IDENTITY_SELECTOR)], accept=JSON)
    except CrdOpsError as exc:
        return LeaseCount(alive=None, readable=False,
                          problem="identity Leases not readable: %s" % (exc.api_message or exc.message))
    if not resp.ok:
        why = "permission denied (grant get/list on leases.coordination.k8s.io in kube-system)" \
            if resp.status == 403 else resp.api_message()
        return LeaseCount(alive=None, readable=False,
                          problem="identity Leases not readable: HTTP %d %s" % (resp.status, why))
    now = server_now(resp.header("Date"), wall)
    count = LeaseCount(alive=0)
    for item in (resp.json() or {}).get("items") or []:
        spec = item.get("spec") or {}
        renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
        name = (item.get("metadata") or {}).get("name") or "?"
        if renewed is not None and now - renewed <= FRESH_WITHIN_S:
            count.fresh.append(name)
        else:
            count.stale.append(name)
    count.alive = len(count.fresh)
    if not count.fresh:
        count.alive = None
        count.problem = ("no identity Lease renewed within %ds in kube-system (%d stale); the APIServerIdentity "
                         "feature may be off or hidden on this cluster" % (FRESH_WITHIN_S, len(count.stale)))
    return count


def count_alive_apiservers(transport: Transport, wall: Callable[[], float] = time.time,
                           clock: Callable[[], float] = time.monotonic,
                           sleep: Callable[[float], None] = time.sleep) -> LeaseCount:
    """:func:`read_identity_leases`, waiting up to :data:`LEASE_APPEAR_S` for a first Lease to appear."""
    start = clock()
    while True:
        count = read_identity_leases(transport, wall)
        # only "readable, but no Lease at all yet" is worth waiting for
        if count.alive is not None or not count.readable or count.stale or clock() - start >= LEASE_APPEAR_S:
            return count
        sleep(1.0)


def url_key(url: str) -> str:
    """One spelling per URL: lower-case scheme and host, explicit port, no trailing slash."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = "[%s]" % host
    port = parts.port or (443 if parts.scheme in ("https", "") else 80)
    return "%s://%s:%d%s" % ((parts.scheme or "https").lower(), host, port, parts.path.rstrip("/"))


def slice_urls(slices: List[Dict[str, Any]]) -> List[str]:
    """``https://address:port`` of every ready endpoint of the ``kubernetes`` EndpointSlices."""
    urls: List[str] = []
    for item in slices:
        ports = [p.get("port") for p in item.get("ports") or [] if p.get("name") in ("https", None, "")]
        port = next((p for p in ports if p), None)
        if port is None:
            continue
        for endpoint in item.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            for address in endpoint.get("addresses") or []:
                host = "[%s]" % address if ":" in address else address
                url = "https://%s:%d" % (host, port)
                if url not in urls:
                    urls.append(url)
    return urls


def read_endpoint_slices(transport: Transport) -> Tuple[List[str], Optional[str]]:
    """The apiserver URLs ``default/kubernetes`` publishes, and why none could be read (or None)."""
    try:
        resp = transport.request("GET", SLICES, query=[("labelSelector", SLICE_SELECTOR)], accept=JSON)
    except CrdOpsError as exc:
        return [], "EndpointSlices not readable: %s" % (exc.api_message or exc.message)
    if not resp.ok:
        return [], "EndpointSlices of default/kubernetes not readable: HTTP %d %s" % (resp.status, resp.api_message())
    urls = slice_urls((resp.json() or {}).get("items") or [])
    return urls, None if urls else "the default/kubernetes EndpointSlice lists no apiserver address"


def probe(transport: Transport) -> Optional[str]:
    """None when the apiserver at ``transport`` answers with our credentials, else why not."""
    try:
        resp = transport.request("GET", "/version", accept=JSON)
    except CrdOpsError as exc:
        return exc.api_message or exc.message
    return None if resp.ok else "HTTP %d %s" % (resp.status, resp.api_message())


FALLBACK_FAIL = "fail"
FALLBACK_SETTLE = "settle"
FALLBACK_MIN_POLLS = 10
FALLBACK_POLLS_PER_APISERVER = 5  # fresh connections per apiserver: 3 members, 15 polls miss one with p < 0.3%


@dataclass
class Topology:
    """What the cluster says about its apiservers, and which of them answered us directly."""

    kubeconfig_url: str
    leases: LeaseCount
    slice_urls: List[str] = field(default_factory=list)
    slice_problem: Optional[str] = None
    explicit: List[str] = field(default_factory=list)
    reached: List[str] = field(default_factory=list)
    not_reached: Dict[str, str] = field(default_factory=dict)

    @property
    def known(self) -> int:
        """Distinct apiservers we can name. Each source alone lists distinct apiservers; the two together
        may name one twice (a host name and its address), so they are never added up."""
        reached = set(url_key(u) for u in self.reached)
        reached_slices = [u for u in self.slice_urls if url_key(u) in reached]
        return max(len(self.explicit), len(reached_slices))

    def to_dict(self) -> Dict[str, Any]:
        return {"apiservers_alive": self.leases.alive, "identity_leases": list(self.leases.fresh),
                "stale_identity_leases": len(self.leases.stale), "identity_leases_problem": self.leases.problem,
                "kubeconfig_url": self.kubeconfig_url, "apiserver_endpoints": list(self.explicit),
                "endpoint_slice": list(self.slice_urls), "endpoint_slice_problem": self.slice_problem,
                "reached": list(self.reached), "not_reached": dict(self.not_reached)}


def unique_urls(urls: List[str]) -> List[str]:
    seen: Set[str] = set()
    out: List[str] = []
    for url in urls:
        key = url_key(url)
        if key not in seen:
            seen.add(key)
            out.append(url.rstrip("/"))
    return out


def discover_topology(transport: Transport, explicit: List[str], connect: Callable[[str], Transport],
                      wall: Callable[[], float] = time.time, clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> Tuple[Topology, Dict[str, Transport]]:
    """Count the alive apiservers, read where they are, and probe each candidate URL once."""
    kubeconfig_url = getattr(transport, "base_url", "") or "<kubeconfig URL>"
    topo = Topology(kubeconfig_url=kubeconfig_url, leases=count_alive_apiservers(transport, wall, clock, sleep),
                    explicit=unique_urls(list(explicit)))
    topo.slice_urls, topo.slice_problem = read_endpoint_slices(transport)
    transports: Dict[str, Transport] = {}
    for url in unique_urls(topo.explicit + topo.slice_urls):
        candidate = connect(url)
        why = probe(candidate)
        if why is None:
            topo.reached.append(url)
        else:
            topo.not_reached[url] = why
        # a given endpoint stays a barrier target even when it does not answer now: the barrier then waits
        # for it (and fails closed at its timeout); an EndpointSlice address we cannot reach is only reported
        if why is None or url in topo.explicit:
            transports[url] = candidate
    return topo, transports


def shortfall(topo: Topology) -> str:
    """Why the known URLs do not cover every apiserver, and what was reached, in one sentence each."""
    leases = topo.leases
    if leases.alive is None:
        head = "the number of apiservers is unknown: %s" % leases.problem
    else:
        head = "%d apiservers are alive (identity Leases in kube-system renewed within the last %ds: %s)" % (
            leases.alive, FRESH_WITHIN_S, ", ".join(leases.fresh))
    reached = ", ".join(topo.reached) or "none"
    not_reached = "; ".join("%s (%s)" % item for item in topo.not_reached.items()) or "none"
    slices = ", ".join(topo.slice_urls) if topo.slice_urls else (topo.slice_problem or "none")
    return ("%s, but only %d can be named and reached directly. Reached: %s. Not reached: %s. "
            "default/kubernetes EndpointSlice: %s. apiserver_endpoints: %s. The kubeconfig URL %s may be a load "
            "balancer and counts as an apiserver only when exactly one is alive"
            % (head, topo.known, reached, not_reached, slices, ", ".join(topo.explicit) or "none given",
               topo.kubeconfig_url))


class BarrierRefusedError(RefusalError):
    """The barrier cannot reach every apiserver; ``facts`` says what it found (for the module result)."""

    def __init__(self, message: str, facts: Dict[str, Any]) -> None:
        super().__init__(message)
        self.facts = facts


def refusal(topo: Topology) -> BarrierRefusedError:
    return BarrierRefusedError(
        "HA barrier refused before the first write (nothing written): %s. Set apiserver_endpoints (role variable "
        "crd_upgrade_apiserver_endpoints) to the https URL of every apiserver, or where no apiserver can be "
        "reached directly opt into barrier_fallback=settle (role variable crd_upgrade_barrier_fallback: settle) "
        "and accept its risk (docs/ha.md)" % shortfall(topo), dict(topo.to_dict(), mode="refused"))


def settle_warning(topo: Topology, polls: int, settle: float) -> str:
    alive = "an unknown number of" if topo.leases.alive is None else "%d" % topo.leases.alive
    return ("barrier.mode settle-fallback: %s apiservers, %d of them named and reached directly; the barrier "
            "polls %s %d times on new connections, then waits %.0fs. A load balancer may send every poll to the "
            "same apiserver, and one that lags longer than that can still store objects at the old storage "
            "version (kubernetes#130235). Prefer apiserver_endpoints; verify from etcd where you can "
            "(crd_storage_verify)" % (alive, topo.known, topo.kubeconfig_url, polls, settle))


def decide_mode(topo: Topology, fallback: str) -> str:
    """The decision rule of the barrier (DESIGN invariant 9); raises when it must fail closed."""
    alive = topo.leases.alive
    if alive is None:
        if topo.explicit:
            return "endpoints"  # the operator vouches for the list; the count could not check it
    elif topo.known >= alive:
        return "endpoints"
    elif alive == 1 and topo.known == 0:
        return "single"  # one apiserver alive: whatever the kubeconfig URL reaches is that one
    if fallback == FALLBACK_SETTLE:
        return "settle-fallback"
    raise refusal(topo)


def check_endpoint_urls(urls: List[str]) -> None:
    """Raises BadInputError naming every URL of ``apiserver_endpoints`` that is not ``http(s)://host[:port]``."""
    malformed = [url for url in urls if not urlsplit(url.strip()).scheme.startswith("http")
                 or not urlsplit(url.strip()).hostname]
    if malformed:
        raise BadInputError("apiserver_endpoints must be https://host:port URLs, got %s" % ", ".join(malformed))


def plan_barrier(transport: Transport, explicit: List[str], connect: Callable[[str], Transport], *,
                 connect_fresh: Optional[Callable[[str], Transport]] = None, fallback: str = FALLBACK_FAIL,
                 fallback_settle: float = 30.0, wall: Callable[[], float] = time.time,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> BarrierPlan:
    """Which apiservers the barrier must poll, and how; raises (nothing written yet) when they are not known.

    ``connect(url)`` gives a transport to one apiserver with the same credentials; ``connect_fresh(url)`` one
    that opens a new connection per request, so that a load balancer may route each poll elsewhere.
    """
    if fallback not in (FALLBACK_FAIL, FALLBACK_SETTLE):
        raise BadInputError("barrier_fallback must be %r or %r, got %r" % (FALLBACK_FAIL, FALLBACK_SETTLE, fallback))
    if fallback_settle < 0:
        raise BadInputError("barrier_fallback_settle must be >= 0, got %s" % fallback_settle)
    check_endpoint_urls(explicit)
    topo, reachable = discover_topology(transport, explicit, connect, wall, clock, sleep)
    mode = decide_mode(topo, fallback)
    kube_url = topo.kubeconfig_url
    targets: Dict[str, Transport] = {kube_url: transport}
    for url, candidate in reachable.items():
        if url_key(url) != url_key(kube_url):
            targets[url] = candidate
    facts = topo.to_dict()
    if mode == "settle-fallback":
        polls = max(FALLBACK_MIN_POLLS, FALLBACK_POLLS_PER_APISERVER * (topo.leases.alive or 3))
        targets[kube_url] = (connect_fresh or connect)(kube_url)
        return BarrierPlan(targets, mode=mode, polls=polls, settle_floor=fallback_settle,
                           warning=settle_warning(topo, polls, fallback_settle), facts=facts)
    warning = None
    if topo.leases.alive is None:
        warning = ("HA barrier: %s; trusting apiserver_endpoints (%d URL(s)) to name every apiserver"
                   % (topo.leases.problem, len(topo.explicit)))
    return BarrierPlan(targets, mode=mode, warning=warning, facts=facts)

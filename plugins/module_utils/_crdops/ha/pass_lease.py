# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""One pass per CRD at a time: a ``coordination.k8s.io/v1`` Lease per cluster and CRD (DESIGN invariant 11).

A pass holds the Lease ``crdops-pass-<crd>`` while it writes; a background thread renews it every
:data:`RENEW_EVERY_S` seconds, and it is deleted when the pass ends (also when it fails). A second run
(a rerun, a second AWX job, another controller) waits up to ``lease_wait`` seconds and then fails naming the
holder. A Lease whose holder stopped renewing (``renewTime + leaseDurationSeconds`` in the past) is taken over.

- Time: every judgement uses the apiserver's clock, read from the HTTP ``Date`` header of its answers; the
  ``renewTime`` we write is the local clock corrected by the offset seen in the last answer. A skewed
  controller clock therefore neither ages nor rejuvenates another run's Lease.
- Two contenders: takeover and renewal are ``PUT`` with ``metadata.resourceVersion``; creation is a ``POST``
  that fails with 409 AlreadyExists when someone else created it first. Exactly one of them wins.
- Lost lease: when renewal is refused (another holder) or has not succeeded for
  ``leaseDurationSeconds - LOST_MARGIN_S``, :meth:`PassLease.lost_reason` turns non-None and the pass stops
  submitting writes before another run may take the Lease over.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Optional

from .server_clock import parse_time, server_now
from ..kube.errors import CrdOpsError, OutcomeError
from ..kube.stop import StopSignal
from ..kube.transport import JSON, ApiResponse, Transport, dumps, error_from_response

DEFAULT_NAMESPACE = "default"
LEASE_DURATION_S = 30
RENEW_EVERY_S = 10.0
RETRY_EVERY_S = 2.0  # after a failed renewal, and while waiting for another holder
LOST_MARGIN_S = 5.0  # stop writing this long before another run may judge our Lease expired
NAME_PREFIX = "crdops-pass-"
MAX_NAME = 63
LABELS = {"app.kubernetes.io/managed-by": "crdops.migration", "migration.crdops.io/lease": "pass"}
CRD_ANNOTATION = "migration.crdops.io/crd"
# while the holder waits out the drain window (drain.py): until when, by the apiserver's clock. A second run's
# lease_wait starts counting only after it, so that the drain never turns into the second run's failure.
DRAIN_ANNOTATION = "migration.crdops.io/draining-until"


class LeaseHeldError(CrdOpsError):
    """Another run holds the pass Lease of this CRD (and kept renewing it for ``lease_wait`` seconds)."""

    kind = "lease_held"


class LeaseError(CrdOpsError):
    """The pass Lease could not be read or written (RBAC, API error)."""

    kind = "lease"


def lease_name(crd_name: str) -> str:
    """``crdops-pass-<crd>``; a CRD name too long for 63 characters is cut and gets a hash of the full name,
    so the name is stable across runs and controllers and two long names do not collide."""
    name = NAME_PREFIX + crd_name
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(crd_name.encode("utf-8")).hexdigest()[:10]
    head = name[:MAX_NAME - len(digest) - 1].rstrip("-.")
    return "%s-%s" % (head, digest)


def run_identity() -> str:
    """Who holds the Lease: host, pid and a random run id (two runs on one host differ)."""
    return "crdops@%s/pid-%d/%s" % (socket.gethostname()[:100], os.getpid(), uuid.uuid4().hex[:8])


def micro_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Holder:
    """What a Lease says about its holder, judged at the apiserver's time ``now``."""

    def __init__(self, body: Dict[str, Any], now: float) -> None:
        spec = body.get("spec") or {}
        self.identity = str(spec.get("holderIdentity") or "")
        self.duration = int(spec.get("leaseDurationSeconds") or LEASE_DURATION_S)
        self.renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
        self.transitions = int(spec.get("leaseTransitions") or 0)
        self.resource_version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        self.now = now
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        draining_until = parse_time(annotations.get(DRAIN_ANNOTATION))
        # seconds of the holder's drain still to come (0 when it is not draining)
        self.drain_left = max(0.0, draining_until - now) if draining_until is not None and not self.expired else 0.0

    @property
    def expired(self) -> bool:
        return not self.identity or self.renewed is None or self.renewed + self.duration < self.now

    def describe(self) -> str:
        if self.renewed is None:
            return "holder %s, never renewed" % (self.identity or "none")
        return "holder %s, last renewed %s (%.0f s ago by the apiserver's clock; lease duration %d s)" % (
            self.identity or "none", micro_time(self.renewed), self.now - self.renewed, self.duration)


class PassLease:
    """The Lease of one CRD's pass: :meth:`acquire`, renewed in the background, :meth:`release`."""

    def __init__(self, transport: Transport, crd_name: str, namespace: str = DEFAULT_NAMESPACE, *,
                 identity: Optional[str] = None, duration: int = LEASE_DURATION_S,
                 renew_every: float = RENEW_EVERY_S, retry_every: float = RETRY_EVERY_S,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.transport = _lease_transport(transport)
        self.cluster = transport.cluster_label
        self.crd_name = crd_name
        self.namespace = namespace
        self.name = lease_name(crd_name)
        self.identity = identity or run_identity()
        self.duration = duration
        self.renew_every = renew_every
        self.retry_every = retry_every
        self.clock, self.wall, self.sleep = clock, wall, sleep
        self.offset = 0.0  # apiserver clock - local clock, from the last Date header
        self.resource_version = ""
        self.last_renewed = 0.0  # local monotonic time of the last successful write
        self.transitions = 0
        self.acquire_time: Optional[str] = None
        self.waited_s = 0.0
        self.took_over_from: Optional[str] = None
        self.renewals = 0
        self._lost: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write of the Lease at a time (renewals, the drain announcement)
        self.draining_until: Optional[str] = None

    # -- paths, clocks, errors ------------------------------------------------------------------------------------
    @property
    def collection(self) -> str:
        return "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % self.namespace

    @property
    def path(self) -> str:
        return "%s/%s" % (self.collection, self.name)

    @property
    def where(self) -> str:
        return "%s/%s" % (self.namespace, self.name)

    def _seen(self, resp: ApiResponse) -> float:
        """The apiserver's time of ``resp``; remembers the offset for the renewTime we write."""
        now = server_now(resp.header("Date"), self.wall)
        if resp.header("Date"):
            self.offset = now - self.wall()
        return now

    def _error(self, resp: ApiResponse, what: str) -> CrdOpsError:
        err = error_from_response(resp, "%s pass lease %s" % (what, self.where), cluster=self.cluster,
                                  crd=self.crd_name)
        hint = ""
        if resp.status == 403:
            hint = " (grant get, create, update and delete on leases.coordination.k8s.io in namespace %s, " \
                   "see docs/rbac.md)" % self.namespace
        return LeaseError(err.message + hint, cluster=self.cluster, crd=self.crd_name, status=err.status,
                          api_message=err.api_message, reason=err.reason)

    def _body(self, holder: Optional[Holder]) -> Dict[str, Any]:
        now = micro_time(self.wall() + self.offset)
        annotations = {CRD_ANNOTATION: self.crd_name}
        if self.draining_until:
            annotations[DRAIN_ANNOTATION] = self.draining_until
        meta: Dict[str, Any] = {"name": self.name, "namespace": self.namespace, "labels": dict(LABELS),
                                "annotations": annotations}
        spec: Dict[str, Any] = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                                "acquireTime": self.acquire_time or now, "renewTime": now,
                                "leaseTransitions": 0}
        if holder is not None:
            meta["resourceVersion"] = holder.resource_version
            spec["leaseTransitions"] = holder.transitions + (0 if holder.identity == self.identity else 1)
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _took(self, resp: ApiResponse) -> None:
        body = resp.json() or {}
        self._seen(resp)
        self.resource_version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        self.transitions = int((body.get("spec") or {}).get("leaseTransitions") or 0)
        self.acquire_time = str((body.get("spec") or {}).get("acquireTime") or "") or None
        self.last_renewed = self.clock()

    # -- acquire ----------------------------------------------------------------------------------------------
    def try_acquire(self) -> Optional[Holder]:
        """One attempt: None when we hold the Lease now, else the live holder that keeps us out."""
        resp = self.transport.request("GET", self.path, accept=JSON)
        now = self._seen(resp)  # before the first write: the renewTime we write is in the apiserver's time
        if resp.status == 404:
            created = self.transport.request("POST", self.collection, body=dumps(self._body(None)),
                                             content_type=JSON, accept=JSON)
            if created.ok:
                self._took(created)
                return None
            if created.status == 409:  # another contender created it first: look again
                return self.try_acquire_after_race()
            raise self._error(created, "create")
        if not resp.ok:
            raise self._error(resp, "read")
        holder = Holder(resp.json() or {}, now)
        if not (holder.expired or holder.identity == self.identity):
            return holder
        taken = self.transport.request("PUT", self.path, body=dumps(self._body(holder)), content_type=JSON,
                                       accept=JSON)
        if taken.ok:
            if holder.identity and holder.identity != self.identity:
                self.took_over_from = holder.describe()
            self._took(taken)
            return None
        if taken.status == 409:  # another contender took it over first (resourceVersion changed)
            return self.try_acquire_after_race()
        raise self._error(taken, "take over")

    def try_acquire_after_race(self) -> Optional[Holder]:
        resp = self.transport.request("GET", self.path, accept=JSON)
        if not resp.ok:
            raise self._error(resp, "read")
        holder = Holder(resp.json() or {}, self._seen(resp))
        # the winner just wrote it: it is live unless it is us (never: our write was refused)
        return holder if holder.identity != self.identity else None

    def acquire(self, wait_s: float = 0.0, stop: Optional[StopSignal] = None) -> PassLease:
        """Hold the Lease (waiting up to ``wait_s`` for a live holder to release it) and start renewing it.

        While the holder waits out its drain window, ``wait_s`` counts from the drain's end: the drain is part of
        the holder's pass, not a reason for this run to fail. A stop request ends the wait at once."""
        wait_s = max(wait_s, 0.0)  # a negative wait is no wait, like 0: fail at once
        start = self.clock()
        give_up = start + wait_s
        while True:
            holder = self.try_acquire()
            if holder is None:
                break
            now = self.clock()
            if holder.drain_left > 0:
                give_up = max(give_up, now + holder.drain_left + wait_s)
            if now >= give_up:
                raise LeaseHeldError(
                    "another run is migrating this CRD: pass lease %s is held by %s; waited %.0f s (lease_wait %.0f); "
                    "wait for that run to finish, or stop it (its lease expires %d s after its last renewal)"
                    % (self.where, holder.describe(), now - start, wait_s, holder.duration),
                    cluster=self.cluster, crd=self.crd_name)
            pause = min(self.retry_every, max(give_up - now, 0.05))
            if stop is None:
                self.sleep(pause)
            elif stop.wait(pause) or stop.is_set():
                raise OutcomeError("stopped", "%s: stopped while waiting for pass lease %s (held by %s); nothing "
                                   "written" % (stop.reason, self.where, holder.describe()),
                                   cluster=self.cluster, crd=self.crd_name)
        self.waited_s = self.clock() - start
        self._thread = threading.Thread(target=self._renew_loop, name="crdops-lease-%s" % self.crd_name[:40])
        self._thread.daemon = True  # never keeps a dying process alive; the Lease then simply expires
        self._thread.start()
        return self

    # -- renew ------------------------------------------------------------------------------------------------
    def lost_reason(self) -> Optional[str]:
        """Why the pass must stop writing (the Lease is no longer ours for sure), or None."""
        if self._lost is None and self.last_renewed and \
                self.clock() - self.last_renewed > self.duration - LOST_MARGIN_S:
            self._mark_lost("not renewed for %.0f s (renewal failing)" % (self.clock() - self.last_renewed))
        return self._lost

    def _mark_lost(self, why: str) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = "pass lease %s lost: %s; stopped writing so that two passes never interleave" % (
                    self.where, why)

    def announce_drain(self, seconds: float) -> None:
        """Say in the Lease until when this pass drains (a second run waits that long before its lease_wait)."""
        self.draining_until = micro_time(self.wall() + self.offset + seconds)
        self.renew_once()

    def end_drain(self) -> None:
        if self.draining_until is not None:
            self.draining_until = None
            self.renew_once()

    def renew_once(self) -> bool:
        """One renewal; False when it failed (the caller retries sooner). Marks the Lease lost when taken."""
        with self._write_lock:
            return self._renew_locked()

    def _renew_locked(self) -> bool:
        holder_view = Holder({"metadata": {"resourceVersion": self.resource_version},
                              "spec": {"holderIdentity": self.identity, "leaseTransitions": self.transitions}},
                             0.0)
        try:
            resp = self.transport.request("PUT", self.path, body=dumps(self._body(holder_view)), content_type=JSON,
                                          accept=JSON)
        except Exception:  # connection failure (or a credential plugin): retried until the lost deadline
            return False
        if resp.ok:
            self._took(resp)
            self.renewals += 1
            return True
        if resp.status in (404, 409):  # deleted or written by someone else: it is not ours any more
            self._mark_lost("renewal answered HTTP %d (%s); another run may have taken it over"
                            % (resp.status, resp.api_message()))
        return False

    def _renew_loop(self) -> None:
        wait = self.renew_every
        while not self._stop.wait(wait):
            if self._lost is not None:
                return
            wait = self.renew_every if self.renew_once() else self.retry_every
            if self.lost_reason() is not None:
                return

    # -- release ----------------------------------------------------------------------------------------------
    def release(self) -> Optional[str]:
        """Stop renewing and delete the Lease if it is still ours (resourceVersion precondition).
        Returns a problem (never raises): an undeleted Lease only makes the next run wait for its expiry."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.renew_every + 5)
        if self._lost is not None or not self.resource_version:
            return None
        body = dumps({"kind": "DeleteOptions", "apiVersion": "v1",
                      "preconditions": {"resourceVersion": self.resource_version}})
        try:
            resp = self.transport.request("DELETE", self.path, body=body, content_type=JSON, accept=JSON)
        except Exception as exc:  # the Lease expires on its own
            return "pass lease %s not released (%s); it expires %d s after its last renewal" % (
                self.where, type(exc).__name__, self.duration)
        if resp.ok or resp.status in (404, 409):
            return None
        return "pass lease %s not released (HTTP %d: %s); it expires %d s after its last renewal" % (
            self.where, resp.status, resp.api_message(), self.duration)

    def to_dict(self) -> Dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "holder": self.identity,
                "waited_s": round(self.waited_s, 1), "took_over_from": self.took_over_from,
                "renewals": self.renewals, "lost": self._lost}


def _lease_transport(transport: Transport) -> Transport:
    """Lease requests go to the same apiserver with a short retry deadline and outside the ``max_qps`` bucket:
    a renewal stuck behind 120 s of retries or a slow token bucket would let the Lease expire mid-pass."""
    for_endpoint = getattr(transport, "for_endpoint", None)
    base_url = getattr(transport, "base_url", None)
    if for_endpoint is None or not base_url:
        return transport
    lease_transport: Transport = for_endpoint(base_url)
    return lease_transport

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""HA barrier: do not re-store until every apiserver writes the new storage version.

Each apiserver learns a CRD's storage version from its own informer, so right after a flip some of
them may still encode writes at the old version (kubernetes#130235). Each apiserver publishes its view
in discovery: ``storageVersionHash`` of a resource is the first 8 bytes of sha256("group/version/kind"),
base64-encoded, for the version it stores at. Polling every apiserver's discovery until all report the
hash of the current storage version is a barrier that needs no etcd access.

Which apiservers to poll is decided before the first write (``apiservers.plan_barrier``) and handed in as a
:class:`BarrierPlan`: every apiserver by its own URL, the single one, or the opt-in settle fallback that polls
one URL many times on new connections and then waits.
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ..kube.crd import Crd
from ..kube.errors import CrdOpsError, OutcomeError, RefusalError
from ..kube.stop import StopSignal
from ..kube.transport import JSON, Transport
from .server_clock import server_now

POLL_EVERY_S = 0.5


def storage_version_hash(group: str, version: str, kind: str) -> str:
    digest = hashlib.sha256(("%s/%s/%s" % (group, version, kind)).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


class BarrierPlan(Dict[str, Transport]):
    """URL -> transport of the apiservers to poll, plus how to poll them.

    A dict, so that code written for the plain endpoint map (``run_migration``) takes a plan unchanged.
    """

    def __init__(self, targets: Mapping[str, Transport], *, mode: str = "endpoints", polls: int = 1,
                 settle_floor: float = 0.0, warning: Optional[str] = None,
                 facts: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(targets)
        self.mode = mode  # "endpoints" | "single" | "settle-fallback"
        self.polls = max(1, polls)  # consecutive rounds in which every target must report the storage version
        self.settle_floor = settle_floor  # the settle wait is at least this long
        self.warning = warning
        self.facts = dict(facts or {})

    def to_dict(self) -> Dict[str, Any]:
        out = dict(self.facts)
        out.update(mode=self.mode, targets=list(self), polls=self.polls, settle_s=self.settle_floor,
                   warning=self.warning)
        return out


@dataclass
class BarrierResult:
    crd: str
    storage_version: str
    endpoints: Dict[str, str] = field(default_factory=dict)  # endpoint -> version it reports
    waited_s: float = 0.0
    passed: bool = False
    mode: str = "endpoints"
    polls: int = 1
    warning: Optional[str] = None
    # endpoints that reported another version in some round (lagging behind the flip)
    lagged: List[str] = field(default_factory=list)
    # clock time of the round in which the last lagging endpoint first reported the storage version (the first
    # round of the final all-current streak); None when no endpoint lagged. The drain counts from it (drain.py).
    caught_up_at: Optional[float] = None
    caught_up_after_s: Optional[float] = None  # the same, in seconds after the barrier started
    # members an earlier run saw lag and whose drain it did not finish (lag_note.py): treated as having lagged here
    lagged_before: List[str] = field(default_factory=list)
    generation: int = 0  # the CRD generation the barrier ran for: its spec had committed before ``started_at``
    started_at: Optional[float] = None  # clock time of the first round
    # endpoint -> its ``Date`` minus our wall clock, lowest seen (drain.py converts the apiservers' times with it)
    clock_offsets: Dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.crd, "storage_version": self.storage_version, "endpoints": dict(self.endpoints),
                "waited_s": round(self.waited_s, 3), "passed": self.passed, "mode": self.mode,
                "polls": self.polls, "warning": self.warning, "lagged": list(self.lagged),
                "lagged_before": list(self.lagged_before),
                "caught_up_after_s": None if self.caught_up_after_s is None else round(self.caught_up_after_s, 3)}

    @property
    def lag_seen(self) -> List[str]:
        """Every member known to have lagged behind this flip: in this run or, by its note, in an earlier one."""
        return self.lagged + [m for m in self.lagged_before if m not in self.lagged]


def reported_storage_version(transport: Transport, crd: Crd,
                             on_date: Optional[Callable[[Optional[str]], None]] = None) -> Optional[str]:
    """The version this apiserver says it stores ``crd`` at, from its discovery document (``on_date`` is given
    each answer's ``Date`` header)."""
    known = dict((storage_version_hash(crd.group, v.name, crd.kind), v.name) for v in crd.versions)
    for version in crd.served_versions:
        resp = transport.request("GET", "/apis/%s/%s" % (crd.group, version), accept=JSON)
        if on_date is not None:
            on_date(resp.header("Date"))
        if not resp.ok:
            continue
        for resource in (resp.json() or {}).get("resources") or []:
            if resource.get("name") == crd.plural and resource.get("storageVersionHash"):
                return known.get(resource["storageVersionHash"], "<unknown>")
    return None


def poll_once(transports: Mapping[str, Transport], crd: Crd, result: BarrierResult,
              wall: Callable[[], float] = time.time) -> List[str]:
    """One round over every target; returns the ones that do not (yet) report the storage version."""

    lagging: List[str] = []
    for endpoint, transport in transports.items():
        def offset(date: Optional[str], endpoint: str = endpoint) -> None:
            # read after the answer arrived and the Date is whole seconds: the offset found is never above the
            # true one, so a time converted with the lowest offset is never earlier than it was
            if date:
                found = server_now(date, wall) - wall()
                result.clock_offsets[endpoint] = min(found, result.clock_offsets.get(endpoint, found))
        try:
            seen = reported_storage_version(transport, crd, offset)
        except CrdOpsError as exc:
            seen = "<unreachable: %s>" % (exc.api_message or exc.message)
        result.endpoints[endpoint] = seen or "<not served>"
        if seen != result.storage_version:
            lagging.append(endpoint)
    return lagging


def stopped_waiting(stop: Optional[StopSignal], what: str, crd: Crd) -> OutcomeError:
    return OutcomeError("stopped", "%s: %s; nothing written" % (stop.reason if stop else "stopped", what),
                        crd=crd.name)


def pause(seconds: float, stop: Optional[StopSignal], sleep: Callable[[float], None]) -> bool:
    """Wait ``seconds``; True when a stop request came meanwhile (the wait then ends at once)."""
    if stop is None:
        sleep(seconds)
        return False
    return stop.wait(seconds) or stop.is_set()


def new_result(transports: Mapping[str, Transport], crd: Crd, lagged_before: Sequence[str] = ()) -> BarrierResult:
    """The barrier's result before its first round: the caller keeps it, so that a barrier that times out or is
    stopped still tells what it saw (lag_note.py keeps that for the next run)."""
    return BarrierResult(crd=crd.name, storage_version=crd.storage_version or "",
                         mode=getattr(transports, "mode", "endpoints"), polls=getattr(transports, "polls", 1),
                         warning=getattr(transports, "warning", None), lagged_before=list(lagged_before),
                         generation=crd.generation)


def wait_for_storage_version(transports: Mapping[str, Transport], crd: Crd, timeout: float, settle: float = 0.0,
                             clock: Callable[[], float] = time.monotonic,
                             sleep: Callable[[float], None] = time.sleep,
                             stop: Optional[StopSignal] = None, result: Optional[BarrierResult] = None,
                             wall: Callable[[], float] = time.time,
                             on_lag: Optional[Callable[[List[str]], None]] = None) -> BarrierResult:
    """Block until every endpoint reports ``crd``'s storage version, then wait ``settle`` seconds.

    With a :class:`BarrierPlan`, every target must report it in ``plan.polls`` consecutive rounds and the
    settle wait is at least ``plan.settle_floor``. No target at all is a refusal: a barrier that polls nobody
    proves nothing. A stop request ends the wait at once. ``result`` (from :func:`new_result`) is filled in place.
    ``on_lag(members)`` is called in the round that first sees ``members`` lag, before the next round: the caller
    keeps the lag on the CRD at once (lag_note.py), since a run killed later leaves nothing else behind.
    """
    if not transports:
        raise RefusalError("HA barrier has no apiserver to poll for storage version %s; refusing the pass "
                           "(nothing written)" % (crd.storage_version or "<none>"), crd=crd.name)
    polls = getattr(transports, "polls", 1)
    settle = max(settle, getattr(transports, "settle_floor", 0.0))
    result = result if result is not None else new_result(transports, crd)
    start = result.started_at = clock()
    streak = 0
    streak_started = start
    while True:
        round_at = clock()
        lagging = poll_once(transports, crd, result, wall)
        new = [endpoint for endpoint in lagging if endpoint not in result.lagged]
        result.lagged.extend(new)
        if new and on_lag is not None:
            on_lag(new)
        if lagging:
            streak = 0
        else:
            streak_started = round_at if streak == 0 else streak_started
            streak += 1
        if streak >= polls:
            break
        if clock() - start >= timeout:
            result.waited_s = clock() - start
            raise barrier_timeout_error(result, crd, lagging, streak, timeout)
        if pause(POLL_EVERY_S, stop, sleep):
            raise stopped_waiting(stop, "the HA barrier was waiting for storage version %s" % result.storage_version,
                                  crd)
    if result.lag_seen:  # a member lagged (here or before): its swap is no older than this streak's first round
        result.caught_up_at = streak_started
        result.caught_up_after_s = streak_started - start
    if settle > 0 and pause(settle, stop, sleep):
        raise stopped_waiting(stop, "stopped during the barrier's settle wait", crd)
    result.waited_s = clock() - start
    result.passed = True
    return result


def barrier_timeout_error(result: BarrierResult, crd: Crd, lagging: List[str], streak: int,
                          timeout: float) -> CrdOpsError:
    if not lagging:
        return CrdOpsError("HA barrier (%s): only %d of %d consecutive rounds reported storage version %s "
                           "within %.0fs" % (result.mode, streak, result.polls, result.storage_version, timeout),
                           crd=crd.name)
    return CrdOpsError(
        "HA barrier: after %.0fs these apiservers still do not report storage version %s: %s; "
        "migrating now could store objects at the old version (kubernetes#130235)"
        % (timeout, result.storage_version,
           ", ".join("%s (reports %s)" % (e, result.endpoints[e]) for e in lagging)),
        crd=crd.name)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The proof behind a migration record: more than "every write returned" (DESIGN invariants 1 and 12).

- **etcd scan** (an etcd URL is given): every key of the CRD read from one etcd snapshot, each at the storage
  version.
- **confirming pass** (no etcd, every managed cluster): after the pass, one more pass of no-op writes, each a JSON
  patch that only tests the listed resourceVersion. The apiserver writes only when the object's bytes in etcd
  differ from its encoding at the storage version, and the test pins the object, so a resourceVersion that
  changes was changed by our write: that object was not at the storage version (or an admission changed it). A
  pass in which no write of ours changed an object shows that every object it wrote was at the storage version.
  Objects whose managedFields the pass fixes are excluded (that write changes them on purpose). When some did
  change, the pass repeats (they are re-stored now), up to ``passes`` times; then no record. Its requests go over
  a new connection each, so that the apiservers behind a load balancer are likely all asked (best effort: no
  answer names its apiserver). Each confirming pass is paced as the pass before it ended (``pace``): from its
  learned limit, held by the same latency probe. docs/safety.md says what this proves and what not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional

from ..kube.crd import Crd
from ..kube.errors import CrdOpsError
from .etcd_scan import EtcdReader
from ..record.record import PROOF_CONFIRMING_PASS, PROOF_ETCD, Proof
from ..ownership.managed_fields import ManagedFieldsPolicy
from ..restore.pace import PaceGate
from ..restore.restore import CrdResult, ProgressFn, RestoreOptions, RestorePass, StopCheck
from ..kube.stop import StopSignal
from ..kube.transport import JSON, Transport

DEFAULT_CONFIRM_PASSES = 3
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
POLICIES = "/apis/admissionregistration.k8s.io/%s/mutatingadmissionpolicies"


def etcd_proof(reader: EtcdReader, crd: Crd) -> Proof:
    """Every key of ``crd`` in etcd at the storage version (one snapshot)."""
    scan = reader.scan(crd.name, crd.group, crd.plural, "%s/%s" % (crd.group, crd.storage_version))
    found = scan.as_dict()
    details = {"etcd": {k: found[k] for k in ("revision", "key_count", "counts", "mismatched", "prefix")}}
    if scan.verified:
        return Proof(PROOF_ETCD, True, details=details)
    why = scan.problem or "%d of %d keys in etcd are not stored at %s (for example %s)" % (
        found["mismatched"], scan.total, scan.expected_api_version, ", ".join(scan.mismatched_keys[:3]))
    return Proof(PROOF_ETCD, False, "[CRD %s] etcd scan after the pass: %s; no migration record written, run the "
                 "migration again" % (crd.name, why), details)


def _matches(rule: Dict[str, Any], crd: Crd) -> bool:
    groups, ops, resources = (rule.get(k) or [] for k in ("apiGroups", "operations", "resources"))
    return (("*" in groups or crd.group in groups) and ("*" in ops or "UPDATE" in ops)
            and any(r in ("*", "*/*", crd.plural) for r in resources))


def mutating_admissions(transport: Transport, crd: Crd) -> List[str]:
    """Best effort: the mutating webhooks and MutatingAdmissionPolicies that see UPDATEs of ``crd``'s objects."""
    found: List[str] = []
    try:
        resp = transport.request("GET", WEBHOOKS, accept=JSON)
        for item in ((resp.json() or {}).get("items") or []) if resp.ok else []:
            for hook in item.get("webhooks") or []:
                if any(_matches(rule, crd) for rule in hook.get("rules") or []):
                    found.append("MutatingWebhookConfiguration %s (webhook %s)" % (
                        (item.get("metadata") or {}).get("name"), hook.get("name")))
        for version in ("v1", "v1beta1"):
            resp = transport.request("GET", POLICIES % version, accept=JSON)
            if resp.ok:
                for item in (resp.json() or {}).get("items") or []:
                    rules = ((item.get("spec") or {}).get("matchConstraints") or {}).get("resourceRules") or []
                    if any(_matches(rule, crd) for rule in rules):
                        found.append("MutatingAdmissionPolicy %s" % (item.get("metadata") or {}).get("name"))
                break
    except CrdOpsError:
        pass
    return found


class ConfirmingPasses:
    """``prove`` for RestorePass: up to ``passes`` confirming passes; the first that changes nothing proves it."""

    def __init__(self, transport: Transport, crd: Crd, options: RestoreOptions, passes: int = DEFAULT_CONFIRM_PASSES,
                 *, fresh_connections: bool = True, stop: Optional[StopSignal] = None,
                 stop_check: Optional[StopCheck] = None, progress: Optional[ProgressFn] = None,
                 mf_policy: Optional[ManagedFieldsPolicy] = None,
                 pace: Optional[Callable[[], PaceGate]] = None) -> None:
        self.transport = transport
        # each confirming pass's gate (PaceGate.following of the pass before): without it, a fresh gate at the
        # options' pace and no latency probe
        self.pace = pace
        # the main pass's policy: a confirming pass classifies managedFields by the same rules (removed versions,
        # the field mapping of a webhook, entries kept as appliers' declarations)
        self.mf_policy = mf_policy
        self.crd = crd
        self.options = replace(options, use_checkpoint=False, write_record=False)
        self.passes = passes
        fresh: Optional[Callable[[], Transport]] = getattr(transport, "fresh_connections", None)
        self.fresh = fresh_connections and fresh is not None
        self.conn = fresh() if self.fresh and fresh is not None else transport
        self.stop, self.stop_check, self.progress = stop, stop_check, progress

    def __call__(self, first: CrdResult) -> Proof:
        rounds: List[Dict[str, Any]] = []
        details: Dict[str, Any] = {"passes": rounds, "fresh_connections": self.fresh}
        spent = 0.0
        for number in range(1, self.passes + 1):
            res = RestorePass(self.conn, self.crd, self.options, confirming=True, stop=self.stop,
                              stop_check=self.stop_check, progress=self.progress, mf_policy=self.mf_policy,
                              pace=self.pace() if self.pace is not None else None).run()
            spent += res.duration_s
            rounds.append({"listed": res.listed, "confirmed": res.unchanged, "changed": res.rewritten,
                           "excluded": res.excluded, "gone": res.gone, "failed": res.failed,
                           "changed_objects": list(res.changed_objects), "duration_s": round(res.duration_s, 3),
                           "pace": round_pace(res.pace)})
            details.update(duration_s=round(spent, 3), first_pass_s=round(first.duration_s, 3),
                           cost_ratio=round(spent / first.duration_s, 3) if first.duration_s > 0 else None)
            if not res.complete or res.failed:
                why = res.aborted_reason or "%d objects failed, first: %s" % (
                    res.failed, (res.first_failures or [{}])[0].get("error"))
                return Proof(PROOF_CONFIRMING_PASS, False, "[CRD %s] confirming pass %d did not finish: %s; no "
                             "migration record written" % (self.crd.name, number, why), details)
            if res.rewritten == 0:
                return Proof(PROOF_CONFIRMING_PASS, True, details=details)
        return Proof(PROOF_CONFIRMING_PASS, False, self.failure(rounds), details)

    def failure(self, rounds: List[Dict[str, Any]]) -> str:
        last = rounds[-1]
        head = "[CRD %s] no migration record written: in each of %d confirming passes our no-op writes changed " \
               "objects (last pass: %d of %d, for example %s)" % (
                   self.crd.name, len(rounds), last["changed"], last["changed"] + last["confirmed"],
                   ", ".join(last["changed_objects"][:3]))
        if all(r["confirmed"] == 0 for r in rounds):
            admissions = mutating_admissions(self.transport, self.crd)
            return "%s. Every write changed its object: an admission that mutates every UPDATE (%s) makes a no-op " \
                   "write a real one, so no pass can show the objects are at the storage version; exempt this " \
                   "resource from it, or prove from etcd (etcd_url)" % (
                       head, ", ".join(admissions) or "a mutating webhook or MutatingAdmissionPolicy")
        return "%s. Something still stores objects at another version (an apiserver behind the load balancer that " \
               "the barrier did not reach? writes begun before the flip that outlive the drain window?); run again " \
               "or prove from etcd (etcd_url)" % head


def round_pace(snapshot: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A confirming pass's pace in its round: the limits it wrote at and the cuts its latency probe asked for."""
    if not snapshot:
        return None
    return {key: snapshot.get(key) for key in ("mode", "min_limit", "max_limit_reached", "probe_cuts")}

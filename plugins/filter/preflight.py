# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Data shaping for the preflight phase of the crd_upgrade role (documented in the sidecar .yml files)."""

from __future__ import annotations

CRDS = {"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions"}
LEASE_VERBS = ("get", "create", "update", "delete")
CANARY_VERBS = ("create", "update", "delete")


def truncate(text, length, end="...", leeway=5):
    """Jinja's ``truncate(length)``: cut at a word boundary, unless the text is at most ``leeway`` longer."""
    text = str(text)
    if len(text) <= length + leeway:
        return text
    return text[:length - len(end)].rsplit(" ", 1)[0] + end


def _resource(crd):
    return {"group": crd.get("group"), "resource": str(crd.get("name")).split(".", maxsplit=1)[0]}


def _crd_verbs(existing, names, migrate, apply):
    verbs = ["get", "list"] + (["patch"] if migrate or apply else [])
    # server-side apply of a CRD that does not exist yet is a create
    return verbs + (["create"] if apply and len(names or []) > len(existing or []) else [])


def _canary_checks(existing, canary):
    out = []
    for doc in canary or []:
        group = str(doc.get("apiVersion", "")).split("/", maxsplit=1)[0]
        crd = next((c for c in existing if c.get("group") == group and c.get("kind") == doc.get("kind")), None)
        if crd is None:
            continue
        metadata = doc.get("metadata") or {}
        for verb in CANARY_VERBS:
            check = dict(_resource(crd), verb=verb)
            if "namespace" in metadata:
                check["namespace"] = metadata["namespace"]
            out.append(check)
    return out


def _unique(checks):
    out = []
    for check in checks:
        if check not in out:
            out.append(check)
    return out


def crd_upgrade_access_checks(existing, names=(), release=(), migrate=False, trim=False, apply=False, canary=(),
                              lease_namespace="default"):
    """The SelfSubjectAccessReview ``resourceAttributes`` for exactly the verbs this run will use.

    ``existing`` are the live CRDs (crd_storage_info), ``names`` every CRD selected, ``release`` the release N
    manifests; ``apply`` is true when a release is applied, ``canary`` the canary manifests the run creates.
    """
    existing = list(existing or [])
    checks = [dict(CRDS, verb=v) for v in _crd_verbs(existing, names, migrate, apply)]
    if migrate and trim:
        checks.append(dict(CRDS, subresource="status", verb="patch"))
    webhook_release = [(d.get("metadata") or {}).get("name") for d in release or []
                       if ((d.get("spec") or {}).get("conversion") or {}).get("strategy") == "Webhook"]
    for crd in existing:
        webhook = (crd.get("conversion") or {}).get("strategy", "None") == "Webhook" or crd.get("name") in webhook_release
        verbs = ["list"] + (["patch"] if migrate else []) + (["get"] if migrate and webhook else [])
        checks.extend(dict(_resource(crd), verb=v) for v in verbs)
    # the pass Lease (one pass per CRD at a time): the re-store gets, creates, renews (update) and deletes it
    checks.extend({"group": "coordination.k8s.io", "resource": "leases", "verb": v, "namespace": lease_namespace}
                  for v in (LEASE_VERBS if migrate else ()))
    return _unique(checks + _canary_checks(existing, canary))


def crd_upgrade_rejections(crds):
    """``<CRD> [<ns>/]<name>: HTTP <status> <kind>: <message>`` per rejection predicted by crd_storage_migrate's
    check-mode run (``crds[].predicted_rejections``); messages cut to about 400 characters."""
    out = []
    for crd in crds or []:
        for r in crd.get("predicted_rejections") or []:
            out.append("%s %s%s: HTTP %s %s: %s" % (
                crd.get("name"), "%s/" % r["namespace"] if r.get("namespace") else "", r.get("name"), r.get("status"),
                r.get("kind", ""), truncate(r.get("message"), 400)))
    return out


class FilterModule:
    """Registers nothing: these are steps of the crd_upgrade role, reached through its one filter
    crdops.migration.crd_upgrade_step (role_step.py), so that they are not an API of their own."""

    def filters(self):
        return {}

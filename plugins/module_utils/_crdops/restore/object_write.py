# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The one write of one object in the re-store pass, and what its answer means.

- No stale managedFields entries: an empty JSON merge patch at the storage version (object content is never
  sent). The apiserver writes only when the stored bytes differ, so an unchanged resourceVersion means the
  object was already at the storage version.
- Stale entries: one JSON patch that fixes them (see managed_fields.py), guarded by a ``test`` of the listed
  resourceVersion. When the object changed since the list, the metadata is read again and the patch retried.
  The same patch rewrites kubectl's last-applied annotation when it names a version being removed
  (last_applied.py); that write is sent under the annotation owner's field manager, which keeps it.
- 404 counts as "gone" only when the Status names this object and a GET at a version every apiserver serves
  also answers NotFound naming it (DESIGN invariant 8). A lagging apiserver behind a load balancer answers a
  write to a version it has not loaded yet with a plain-text ``404 page not found``; counting that as deleted
  once let a trim through with objects never re-stored.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from ..kube.crd import Crd
from ..kube.errors import ApiError, CrdOpsError, NotFoundError
from .listing import ObjectRef
from ..ownership.last_applied import LastAppliedFix
from ..ownership.managed_fields import EntryFix, ManagedFieldsPolicy, StaleFields, plan_patch, stale_entries
from ..kube.transport import (
    ACCEPT_PARTIAL, JSON, JSON_PATCH, MERGE_PATCH, ApiResponse, Transport, dumps, error_from_response)

# outcome kinds of one object
REWRITTEN, UNCHANGED, GONE, FAILED, NOT_ATTEMPTED = "rewritten", "unchanged", "gone", "failed", "not_attempted"
TEST_RETRIES = 3  # fresh reads after a failed resourceVersion test before the object counts as failed


class Outcome(NamedTuple):
    kind: str
    error: Optional[CrdOpsError] = None
    mf_rewritten: int = 0  # managedFields entries set to the storage version by this write
    mf_dropped: int = 0  # managedFields entries removed by this write
    stale_object: bool = False  # the object was listed with stale managedFields entries
    mf_translated: int = 0  # managedFields entries whose field paths this write translated (webhook conversion)
    mf_fixes: Tuple[EntryFix, ...] = ()  # the entries this write changed, with what was done to each
    last_applied: Optional[LastAppliedFix] = None  # kubectl's annotation, rewritten by this write or left


def confirm_version(crd: Crd) -> str:
    """A version every apiserver serves during the re-store window: a served, stored version other than the
    storage version (the old storage version); the storage version only when there is none."""
    served = set(crd.served_versions)
    for version in crd.stored_versions:
        if version != crd.storage_version and version in served:
            return version
    return crd.storage_version or ""


def names_object(resp: ApiResponse, crd: Crd, name: str) -> bool:
    """Is this a NotFound Status about this very object (details.name, details.kind, details.group)?"""
    if resp.status != 404:
        return False
    body = resp.status_body()
    details = body.get("details")
    if not isinstance(details, dict):
        details = {}
    if body.get("kind") != "Status" or body.get("reason") != "NotFound" or details.get("name") != name:
        return False
    if details.get("kind") not in (crd.plural, crd.kind):
        return False
    return details.get("group") in (None, "", crd.group)


def confirm_gone(transport: Transport, crd: Crd, ref: ObjectRef, resp: ApiResponse, what: str,
                 stale: bool = False) -> Outcome:
    """A 404 answer to ``what``: GONE only when it names the object and a read at a safe version agrees."""
    kw: Dict[str, Any] = dict(cluster=transport.cluster_label, crd=crd.name, obj=ref.key)
    if not names_object(resp, crd, ref.name):
        return Outcome(FAILED, NotFoundError(
            "%s answered 404 without naming the object (an apiserver that does not serve %s yet? a lagging HA "
            "member behind a load balancer); not counted as deleted" % (what, crd.storage_version),
            status=404, api_message=resp.api_message(), reason=resp.api_reason(), **kw), stale_object=stale)
    version = confirm_version(crd)
    get = transport.request("GET", crd.resource_path(version, ref.namespace or None, ref.name), accept=ACCEPT_PARTIAL)
    if names_object(get, crd, ref.name):
        return Outcome(GONE, stale_object=stale)
    if get.ok:
        return Outcome(FAILED, NotFoundError(
            "%s answered NotFound, but a GET at %s still finds the object; not counted as deleted" % (what, version),
            status=404, api_message=resp.api_message(), reason=resp.api_reason(), **kw), stale_object=stale)
    err = error_from_response(get, "GET at %s to confirm the object was deleted (%s answered NotFound); not "
                              "counted as deleted" % (version, what), **kw)
    return Outcome(FAILED, err, stale_object=stale)


def _rv_of(resp: ApiResponse) -> str:
    return str(((resp.json() or {}).get("metadata") or {}).get("resourceVersion") or "")


def merge_write(transport: Transport, crd: Crd, ref: ObjectRef, listed_rv: str, stale: bool = False) -> Outcome:
    """Send ``{}`` as a JSON merge patch to the object at the storage version."""
    path = crd.resource_path(namespace=ref.namespace or None, name=ref.name)
    resp = transport.request("PATCH", path, body=b"{}", content_type=MERGE_PATCH, accept=ACCEPT_PARTIAL)
    if resp.ok:
        return Outcome(UNCHANGED if _rv_of(resp) == listed_rv else REWRITTEN, stale_object=stale)
    what = "re-store (empty merge patch)"
    if resp.status == 404:
        return confirm_gone(transport, crd, ref, resp, what, stale)
    return Outcome(FAILED, error_from_response(resp, what, cluster=transport.cluster_label, crd=crd.name,
                                               obj=ref.key), stale_object=stale)


GENERIC_422 = "the server rejected our request due to an error in our request"


def is_test_failure(resp: ApiResponse) -> bool:
    """The resourceVersion ``test`` op failed: the object changed since it was listed. kube-apiserver 1.37.2
    answers 422 ``reason: Invalid`` with the generic message below and empty details (observed; it wraps any
    JSON patch application error that way). Our ops other than the test only touch managedFields entries the
    test pinned, so that answer means "changed meanwhile": re-read and retry. 409 is accepted too. A 422 of
    validation or of a ValidatingAdmissionPolicy carries its own message and is not retried."""
    if resp.status == 409:
        return True
    if resp.status != 422:
        return False
    message = resp.api_message().strip().lower()
    return message == GENERIC_422 or "testing value" in message


def read_metadata(transport: Transport, crd: Crd, ref: ObjectRef, whole_object: bool = False) -> ApiResponse:
    """The object's metadata at the storage version; the whole object when the policy holds translations against it
    (the same one request: the re-read after a failed test must classify as the listing did)."""
    path = crd.resource_path(namespace=ref.namespace or None, name=ref.name)
    return transport.request("GET", path, accept=JSON if whole_object else ACCEPT_PARTIAL)


def _reads_objects(policy: Optional[ManagedFieldsPolicy]) -> bool:
    return policy is not None and policy.reads_objects


def managed_fields_write(transport: Transport, crd: Crd, ref: ObjectRef, stale: StaleFields) -> Outcome:
    """One guarded JSON patch that re-stores the object and fixes its stale managedFields entries."""
    kw: Dict[str, Any] = dict(cluster=transport.cluster_label, crd=crd.name, obj=ref.key)
    path = crd.resource_path(namespace=ref.namespace or None, name=ref.name)
    rv: str = ref.resource_version
    current: Optional[StaleFields] = stale
    newly_kept: Tuple[EntryFix, ...] = ()  # entries the listing meant to change that a fresh read keeps (counted)
    for _attempt in range(TEST_RETRIES + 1):
        if current is None:  # a fresh read shows no stale entry any more: the plain re-store is enough
            return merge_write(transport, crd, ref, rv, stale=True)._replace(mf_fixes=newly_kept)
        plan = plan_patch(rv, current)
        manager = current.field_manager
        resp = transport.request("PATCH", path, body=dumps(plan.ops), content_type=JSON_PATCH, accept=ACCEPT_PARTIAL,
                                 query=[("fieldManager", manager)] if manager else None)
        what = "re-store with managedFields fix (JSON patch)"
        if resp.ok:
            kind = UNCHANGED if _rv_of(resp) == rv else REWRITTEN
            return Outcome(kind, None, plan.rewritten, plan.dropped, True, plan.translated,
                           current.changes + newly_kept, current.last_applied)
        if resp.status == 404:
            return confirm_gone(transport, crd, ref, resp, what, True)
        if not is_test_failure(resp):
            return Outcome(FAILED, error_from_response(resp, what, **kw), stale_object=True)
        # changed since the list: take its current entries (and fields)
        fresh = read_metadata(transport, crd, ref, _reads_objects(stale.policy))
        if fresh.status == 404:
            return confirm_gone(transport, crd, ref, fresh, "GET after a failed resourceVersion test", True)
        if not fresh.ok:
            return Outcome(FAILED, error_from_response(fresh, "GET after a failed resourceVersion test", **kw),
                           stale_object=True)
        obj = fresh.json() or {}
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or "")
        found = reclassify(stale, meta.get("managedFields"), crd, meta.get("annotations"), obj)
        newly_kept = kept_since_listed(stale, found)
        current = found if found is not None and found.writes else None
    return Outcome(FAILED, ApiError("the object changed between every read and write (%d resourceVersion tests "
                                    "failed); managedFields not fixed" % (TEST_RETRIES + 1), **kw), stale_object=True)


def reclassify(listed: StaleFields, managed_fields: Any, crd: Crd, annotations: Any = None,
               obj: Optional[Dict[str, Any]] = None) -> Optional[StaleFields]:
    """A fresh read's entries at other versions, decided by the same policy as the listed ones (``obj``: the fresh
    read, whole when the policy reads objects); None when it has none."""
    if listed.policy is None:
        return stale_entries(managed_fields, crd.group, crd.storage_version)
    return listed.policy.classify(managed_fields, annotations, obj if listed.policy.reads_objects else None)


def kept_since_listed(listed: StaleFields, fresh: Optional[StaleFields]) -> Tuple[EntryFix, ...]:
    """Entries the listing meant to change that the fresh read keeps (its object changed: a translated path is no
    longer there). The listing counted only what it saw kept; the write's outcome counts these."""
    if fresh is None:
        return ()
    planned = set((f.manager, f.operation, f.subresource, f.version) for f in listed.changes)
    return tuple(f for f in fresh.kept if (f.manager, f.operation, f.subresource, f.version) in planned)


def restore_object(transport: Transport, crd: Crd, ref: ObjectRef) -> Outcome:
    """Re-store one object at the storage version with one write (two or more only after a failed test)."""
    if ref.stale is not None:
        return managed_fields_write(transport, crd, ref, ref.stale)
    return merge_write(transport, crd, ref, ref.resource_version)


def confirm_object(transport: Transport, crd: Crd, ref: ObjectRef,
                   policy: Optional[ManagedFieldsPolicy] = None) -> Outcome:
    """The confirming pass's no-op write: a JSON patch that only tests the listed resourceVersion. The test pins the
    object, so a resourceVersion that changes can only be this write's doing: the object was not stored at the
    storage version (or an admission changed it). When another client wrote in between, the test fails and the
    object is read again and tested at its new resourceVersion. An object whose managedFields name another version
    gets the managedFields write instead (``stale_object``: not part of the proof), decided by ``policy``, the run's
    (without one: conversion None's rule, every other version)."""
    if ref.stale is not None:
        return managed_fields_write(transport, crd, ref, ref.stale)
    kw: Dict[str, Any] = dict(cluster=transport.cluster_label, crd=crd.name, obj=ref.key)
    path = crd.resource_path(namespace=ref.namespace or None, name=ref.name)
    rv = ref.resource_version
    what = "confirming no-op write (JSON patch testing the resourceVersion)"
    for _attempt in range(TEST_RETRIES + 1):
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}]
        resp = transport.request("PATCH", path, body=dumps(ops), content_type=JSON_PATCH, accept=ACCEPT_PARTIAL)
        if resp.ok:
            return Outcome(UNCHANGED if _rv_of(resp) == rv else REWRITTEN)
        if resp.status == 404:
            return confirm_gone(transport, crd, ref, resp, what)
        if not is_test_failure(resp):
            return Outcome(FAILED, error_from_response(resp, what, **kw))
        fresh = read_metadata(transport, crd, ref, _reads_objects(policy))
        if fresh.status == 404:
            return confirm_gone(transport, crd, ref, fresh, "GET after a failed resourceVersion test")
        if not fresh.ok:
            return Outcome(FAILED, error_from_response(fresh, "GET after a failed resourceVersion test", **kw))
        obj = fresh.json() or {}
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or "")
        stale = (stale_entries(meta.get("managedFields"), crd.group, crd.storage_version) if policy is None
                 else policy.classify(meta.get("managedFields"), meta.get("annotations"),
                                      obj if policy.reads_objects else None))
        if stale is not None and stale.writes:
            return managed_fields_write(transport, crd, ref._replace(resource_version=rv), stale)
    return Outcome(FAILED, ApiError("the object changed between every read and write (%d resourceVersion tests "
                                    "failed); not confirmed" % (TEST_RETRIES + 1), **kw))

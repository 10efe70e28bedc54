# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Paginated, streamed listing of a CRD's objects: metadata only (PartialObjectMetadataList), or whole objects when
the managedFields policy translates entries through a field mapping (``whole_objects``). A translation is held against
the object's own fields (ownership/target_presence.py); the list already carries them, so that costs no request per
object. The objects are read at the storage version, through the webhook, either way: only the answer is bigger."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Tuple

from ..kube.crd import Crd
from ..kube.errors import ApiError
from ..ownership.last_applied import LastAppliedFix
from ..ownership.managed_fields import EntryFix, ManagedFieldsPolicy, StaleFields
from ..kube.transport import ACCEPT_PARTIAL_LIST, JSON, Transport, error_from_response


class ObjectRef(NamedTuple):
    namespace: str  # "" for cluster-scoped objects
    name: str
    resource_version: str
    # managedFields entries at a version other than the storage version (kubernetes#111937); None for most
    # objects. Only what the patch needs is kept, and pages are dropped once written, so memory stays bounded.
    stale: Optional[StaleFields] = None
    # entries at other versions that the write leaves as they are (untouched, or kept: nothing maps), reported
    kept: Tuple[EntryFix, ...] = ()
    # kubectl's last-applied annotation at a version being removed, which the write leaves as it is (reported)
    last_applied_kept: Optional[LastAppliedFix] = None

    @property
    def key(self) -> str:
        return "%s/%s" % (self.namespace, self.name) if self.namespace else self.name

    def sort_key(self) -> Tuple[str, str]:
        return (self.namespace, self.name)


class ListStats:
    """Counters the listing updates (read by the re-store pass)."""

    def __init__(self) -> None:
        self.pages = 0
        self.listed = 0
        self.relists = 0
        self.resumed_inconsistent = 0


# an object's managedFields and annotations (and, when the list has whole objects, the object) -> the entries (and
# last-applied annotation) to fix (policy)
Classify = Callable[..., Optional[StaleFields]]


def _refs(items: Optional[Iterable[Mapping[str, Any]]], classify: Classify, whole_objects: bool = False
          ) -> List[ObjectRef]:
    out = []
    for item in items or ():
        meta = item.get("metadata") or {}
        found = (classify(meta.get("managedFields"), meta.get("annotations"), item) if whole_objects
                 else classify(meta.get("managedFields"), meta.get("annotations")))
        kept_annotation = found.last_applied if found is not None and not found.translates_annotation else None
        out.append(ObjectRef(str(meta.get("namespace") or ""), str(meta.get("name", "")),
                             str(meta.get("resourceVersion") or ""),
                             found if found is not None and found.writes else None,
                             found.kept if found is not None else (), kept_annotation))
    return out


def default_classify(crd: Crd) -> Classify:
    """Without removed versions: conversion None fixes every other version, a webhook none (reported)."""
    return ManagedFieldsPolicy(crd.group, crd.storage_version, crd.conversion_strategy).classify


def list_pages(
    transport: Transport,
    crd: Crd,
    page_size: int = 500,
    *,
    version: Optional[str] = None,
    stats: Optional[ListStats] = None,
    max_relists: int = 10,
    classify: Optional[Classify] = None,
    whole_objects: bool = False,
) -> Iterator[List[ObjectRef]]:
    """Yield pages of :class:`ObjectRef` across all namespaces; nothing is kept across pages.

    On 410 Gone, continue with the inconsistent continue token from the Status body when the
    server gives one, else relist from scratch (objects created since are already at the new
    storage version; re-patching an object twice is harmless).
    """
    if page_size <= 0:
        raise ValueError("page_size must be > 0")
    stats = stats if stats is not None else ListStats()
    path = crd.resource_path(version)
    token: Optional[str] = None
    while True:
        query = [("limit", str(page_size))]
        if token:
            query.append(("continue", token))
        resp = transport.request("GET", path, query=query, accept=JSON if whole_objects else ACCEPT_PARTIAL_LIST)
        if resp.status == 410:
            body = resp.status_body()
            new_token = (body.get("metadata") or {}).get("continue")
            if new_token:
                stats.resumed_inconsistent += 1
                token = new_token
                continue
            stats.relists += 1
            if stats.relists > max_relists:
                raise ApiError("list expired %d times in a row; giving up" % stats.relists,
                               cluster=transport.cluster_label, crd=crd.name, status=410,
                               api_message=resp.api_message())
            token = None
            continue
        if not resp.ok:
            raise error_from_response(resp, "LIST %s" % path, cluster=transport.cluster_label, crd=crd.name)
        body = resp.json()
        # the list carries managedFields: note stale entries now, while the page is at hand
        refs = _refs(body.get("items"), classify or default_classify(crd), whole_objects)
        stats.pages += 1
        stats.listed += len(refs)
        token = (body.get("metadata") or {}).get("continue") or None
        if refs:
            yield refs
        if not token:
            return


def first_page(transport: Transport, crd: Crd, limit: int, version: Optional[str] = None,
               classify: Optional[Classify] = None, whole_objects: bool = False
               ) -> Tuple[List[ObjectRef], Optional[int]]:
    """The first ``limit`` objects (metadata only, unless ``whole_objects``) and the object count from the same
    answer (``remainingItemCount``); the count is None when the server does not say."""
    path = crd.resource_path(version)
    resp = transport.request("GET", path, query=[("limit", str(max(1, limit)))],
                             accept=JSON if whole_objects else ACCEPT_PARTIAL_LIST)
    if not resp.ok:
        raise error_from_response(resp, "LIST %s (limit %d)" % (path, limit), cluster=transport.cluster_label,
                                  crd=crd.name)
    body = resp.json()
    meta = body.get("metadata") or {}
    refs = _refs(body.get("items"), classify or default_classify(crd), whole_objects)
    if meta.get("remainingItemCount") is not None:
        return refs, len(refs) + int(meta["remainingItemCount"])
    return refs, None if meta.get("continue") else len(refs)


def count_objects(transport: Transport, crd: Crd, version: Optional[str] = None) -> Optional[int]:
    """Object count via ``limit=1`` + ``remainingItemCount``; None when the server does not say."""
    return first_page(transport, crd, 1, version)[1]

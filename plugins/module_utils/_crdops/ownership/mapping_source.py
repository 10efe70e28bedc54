# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The field mapping of one CRD, per old version, learnt the first time an entry at that version needs it.

First the exact way (mapping_learn.py: a ConversionReview of made-up objects to the CRD's webhook); when the
webhook cannot be reached from here (a ``service:`` webhook without ``services/proxy`` permission, no route,
a refusal of the made-up values), the best effort (mapping_sample.py: real objects read at both versions);
when neither works the mapping is ``unavailable``: every entry at that version is kept as it is, and the
result says that removing the version must be refused. Learnt once per CRD and pass, shared by the workers.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Tuple

from ..kube.crd import Crd, crd_path
from ..kube.crd_schema import ANY_NODE, version_schema
from .webhook_review import WebhookCaller, webhook_of
from ..kube.errors import CrdOpsError
from .field_mapping import UNAVAILABLE, FieldMapping
from .managed_fields import ManagedFieldsPolicy, removed_for
from .mapping_check import check_on_objects
from .mapping_learn import learn_exact
from .mapping_sample import learn_from_objects
from ..kube.transport import JSON, Transport, error_from_response

MADE_UP_NAMESPACE = "crdops-made-up"  # only ever inside a ConversionReview; nothing is created


class MappingSource:
    """``mapping(version)``: how fields of ``version`` land in the storage version (cached, thread-safe)."""

    def __init__(self, transport: Transport, crd: Crd, sample_size: int = 50) -> None:
        self.transport = transport
        self.crd = crd
        self.sample_size = sample_size
        self.lock = threading.Lock()
        self.cache: Dict[str, FieldMapping] = {}
        self.raw_crd: Optional[Dict[str, Any]] = None

    def mapping(self, version: str) -> FieldMapping:
        with self.lock:
            if version not in self.cache:
                self.cache[version] = self.learn(version)
            return self.cache[version]

    def summaries(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [self.cache[v].summary() for v in sorted(self.cache)]

    def read_crd(self) -> Dict[str, Any]:
        if self.raw_crd is None:
            resp = self.transport.request("GET", crd_path(self.crd.name), accept=JSON)
            if not resp.ok:
                raise error_from_response(resp, "GET of the CRD (for its schemas and conversion webhook)",
                                          cluster=self.transport.cluster_label, crd=self.crd.name)
            self.raw_crd = resp.json()
        return self.raw_crd

    def learn(self, version: str) -> FieldMapping:
        storage = self.crd.storage_version or ""
        try:
            crd_obj = self.read_crd()
        except CrdOpsError as exc:
            return FieldMapping(version, storage, ANY_NODE, UNAVAILABLE, note=str(exc))
        old, new = version_schema(crd_obj, version), version_schema(crd_obj, storage)
        if old is None or new is None:
            return FieldMapping(version, storage, ANY_NODE, UNAVAILABLE,
                                note="the CRD no longer has version %s: its fields are unknown" % version)
        webhook = webhook_of(crd_obj)
        why = "the CRD has no conversion webhook"
        if webhook is not None:
            caller = WebhookCaller(self.transport, webhook)
            desired = "%s/%s" % (self.crd.group, storage)
            try:
                exact = learn_exact(lambda objs: caller.convert(self.wrap(objs, version), desired), old, new,
                                    version, storage, note="ConversionReview of made-up objects sent to %s (%s)"
                                    % (caller.describe(), caller.route))
            except CrdOpsError as exc:
                why = "exact mapping unavailable: %s" % exc
            except Exception as exc:  # noqa: BLE001 - e.g. an answer of an unexpected shape: the best effort instead
                why = "exact mapping unavailable: %s: %s" % (type(exc).__name__, exc)
            else:  # made-up objects show one branch of a conversion: real ones may contradict it
                return check_on_objects(self.transport, self.crd, version, exact, old, new, self.sample_size)
        return learn_from_objects(self.transport, self.crd, version, old, new, self.sample_size, why)

    def wrap(self, contents: List[Dict[str, Any]], version: str) -> List[Dict[str, Any]]:
        """Made-up contents as objects of ``version`` (never created: they only travel in the review)."""
        out = []
        for j, content in enumerate(contents):
            meta: Dict[str, Any] = {"name": "crdops-made-up-%d" % j, "uid": "00000000-0000-4000-8000-%012d" % j}
            if self.crd.namespaced:
                meta["namespace"] = MADE_UP_NAMESPACE
            out.append(dict(content, apiVersion="%s/%s" % (self.crd.group, version), kind=self.crd.kind,
                            metadata=meta))
        return out


def managed_fields_policy(transport: Transport, crd: Crd, removed_versions: Optional[Tuple[str, ...]],
                          keep_declared: bool = False, keep_written_since: Optional[float] = None
                          ) -> Tuple[ManagedFieldsPolicy, Optional[MappingSource]]:
    """The policy of every pass over ``crd`` in one run (the re-store, its confirming passes, every re-read after a
    failed resourceVersion test); the mapping source (learns on first use) under a webhook conversion."""
    versions = removed_for(crd.name, removed_versions)
    source = MappingSource(transport, crd) if crd.conversion_strategy == "Webhook" and versions is not None else None
    policy = ManagedFieldsPolicy(crd.group, crd.storage_version, crd.conversion_strategy, versions,
                                 source.mapping if source is not None else None, frozenset(crd.served_versions),
                                 keep_declared, keep_written_since)
    return policy, source

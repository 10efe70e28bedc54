# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What the re-store will change in the stored bytes, beyond apiVersion - seen only from etcd.

The apiserver prunes unknown fields and applies the structural defaults of a version already when it
*reads* an object from etcd (k8s.io/apiextensions-apiserver v0.37.2, pkg/apiserver/customresource_handler.go,
crdConversionRESTOptionsGetter.GetRESTOptions: the storage codec decodes through a schemaCoercingDecoder
that prunes with the stored version's schema, a schemaCoercingConverter that prunes again after conversion,
and an unstructuredDefaulter), so a GET and a dry-run of the no-op write both show the object as it will be
written, and neither shows what is lost. The re-store then persists exactly that view: defaults become
stored data, and pruned fields are deleted for good - a rollback to the previous release cannot get them
back. Comparing the raw value in etcd with the API's answer for the same object (the same resourceVersion,
i.e. the same bytes) shows the difference field by field.

The API's answer is the response to the re-store itself sent with ``dryRun=All`` (nothing is persisted):
that is exactly what the write would store. A plain GET is not: reading an object stored at an older
version applies the defaults of the version it is stored at, and the storage version's own defaults are
applied only when the write decodes the patched object (measured on 1.37.2: a default added to the new
storage version's schema shows in the dry-run, not in the GET). Without the ``patch`` permission the
comparison falls back to GET and says so (``view: get``).

Objects stored at another version: with conversion ``None`` only apiVersion differs after conversion,
so they are compared with the API's view at the storage version. With a conversion webhook, renamed
fields would look like removed + added ones, so they are compared with the API's view at the version
they are stored at (what reading alone already drops or adds). When that version is no longer served
(cert-manager v1.6.1 keeps v1alpha2 with ``served: false``), the API cannot show it: the API's view at the
storage version (the dry-run, what the re-store stores) is sent back to the stored version through the CRD's
own webhook in a ``ConversionReview`` (webhook_review.py: nothing is written, and no version is served
for it), and that is compared with the stored value (``compared_by_conversion_review``). Empty maps the
stored value does not have are left out on that path: a webhook built on typed structs adds ``status: {}`` to every
object it converts; so are empty maps in metadata, on both sides (round_trip_pair). Any other empty map the stored
value has stays, so one the webhook drops is judged as a removal.
When the webhook cannot be asked, the objects are counted in ``skipped`` and ``unverified`` says why: the
role's gate stops on them like on pruning (crd_upgrade_accept_pruning), never silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..kube.crd import Crd
from ..kube.errors import CrdOpsError, NotFoundError
from .etcd_scan import EtcdSampler, RawValue, encoding_of, resource_prefix
from ..ownership.field_paths import count_into, diff_values
from ..ownership.normalised import Schema, split_removed, version_openapi
from ..kube.selection import get_crd_raw
from ..kube.transport import MERGE_PATCH, ApiResponse, Transport, error_from_response, is_admission_rejection
from ..ownership.webhook_review import WebhookCaller

DEFAULT_SAMPLE = 20
MAX_EXAMPLES = 3
NO_ETCD_REASON = ("no etcd_url: the values stored in etcd were not read, so the fields the re-store would "
                  "persist (defaults) or delete (pruned by the schema) could not be checked")


Converter = Callable[[Crd, Sequence[Dict[str, Any]], str], List[Dict[str, Any]]]


def webhook_converter(transport: Transport) -> Converter:
    """``convert(crd, objects, "group/version")`` through the CRD's own conversion webhook (webhook_review.py)."""

    def convert(crd: Crd, objects: Sequence[Dict[str, Any]], desired: str) -> List[Dict[str, Any]]:
        webhook = dict(crd.conversion_webhook or {})
        client = dict(webhook.get("clientConfig") or {})
        if crd.conversion_ca_bundle:  # kept out of Crd.conversion_webhook (results); the TLS check needs it
            client["caBundle"] = crd.conversion_ca_bundle
        webhook["clientConfig"] = client
        return WebhookCaller(transport, webhook).convert(list(objects), desired)

    return convert


VIEW_DRY_RUN = "dry-run"  # the no-op write with dryRun=All: what the re-store would store
VIEW_GET = "get"  # fallback without patch permission: misses the storage version's defaults on old objects


@dataclass
class StorageDiff:
    storage_version: str
    view: str = VIEW_DRY_RUN
    revision: int = 0
    keys: int = 0
    sampled: int = 0
    compared: int = 0
    would_change: int = 0
    at_other_version: int = 0
    compared_at_stored_version: int = 0
    compared_by_conversion_review: int = 0
    skipped: Dict[str, int] = field(default_factory=dict)
    unverified: Optional[str] = None  # why objects at a version the API does not serve were not compared
    added: Dict[str, int] = field(default_factory=dict)
    removed: Dict[str, int] = field(default_factory=dict)  # lost: pruned, or a value the conversion drops
    normalised: Dict[str, int] = field(default_factory=dict)  # zero values left out, the same value read back
    changed: Dict[str, int] = field(default_factory=dict)
    examples: Dict[str, List[str]] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"checked": True, "reason": None}
        out.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()})
        out["key_count"] = self.keys  # documented name; "keys" shadows a dict method in Jinja (kept as alias)
        return out


def not_checked(reason: str) -> Dict[str, Any]:
    return {"checked": False, "reason": reason}


def object_ref(crd: Crd, prefix: str, key: str) -> Tuple[Optional[str], str]:
    """(namespace, name) from ``<prefix><ns>/<name>`` or ``<prefix><name>``."""
    rest = key[len(prefix):]
    if crd.namespaced and "/" in rest:
        ns, name = rest.split("/", 1)
        return ns, name
    return None, rest


def _read_version(crd: Crd, stored_version: str) -> Optional[str]:
    """The version to ask the API for (see the module docstring), or None when it cannot be compared."""
    if stored_version == crd.storage_version or crd.conversion_strategy != "Webhook":
        return crd.storage_version
    return stored_version if stored_version in crd.served_versions else None


class _Rejected(Exception):
    """Admission refused the dry-run of this object's write (the preflight reports that with its message)."""


def _dry_run(transport: Transport, crd: Crd, ns: Optional[str], name: str,
             diff: StorageDiff) -> Optional[ApiResponse]:
    resp = transport.request("PATCH", crd.resource_path(crd.storage_version, ns, name), query=[("dryRun", "All")],
                             body=b"{}", content_type=MERGE_PATCH)
    if resp.status == 403 and not is_admission_rejection(resp.api_message()):
        diff.view = VIEW_GET  # no patch permission (read-only audit credentials): fall back, say so
        return None
    if resp.status in (400, 403, 422) and is_admission_rejection(resp.api_message()):
        raise _Rejected()
    return resp


def _api_view(transport: Transport, crd: Crd, version: str, ns: Optional[str], name: str,
              diff: StorageDiff) -> Optional[Dict[str, Any]]:
    resp = None
    if diff.view == VIEW_DRY_RUN and version == crd.storage_version:
        resp = _dry_run(transport, crd, ns, name, diff)
    if resp is None:
        resp = transport.request("GET", crd.resource_path(version, ns, name))
    if resp.status == 404 and (resp.status_body().get("details") or {}).get("name") == name:
        return None  # deleted since etcd was read
    if not resp.ok:
        raise error_from_response(resp, "reading the object at %s (storage diff)" % version,
                                  cluster=transport.cluster_label, crd=crd.name,
                                  obj="%s/%s" % (ns, name) if ns else name)
    view: Dict[str, Any] = resp.json()
    return view


def _same_revision(view: Dict[str, Any], raw: RawValue) -> bool:
    return str((view.get("metadata") or {}).get("resourceVersion")) == str(raw.mod_revision)


def _pair(transport: Transport, sampler: EtcdSampler, crd: Crd, raw: RawValue, ns: Optional[str],
          name: str, diff: StorageDiff,
          converter: Converter) -> Optional[Tuple[Dict[str, Any], Dict[str, Any], str]]:
    """(stored, served, stored version) of one object at one resourceVersion, or None (counted as skipped)."""
    for _attempt in range(2):  # the object may be written between the two reads: read etcd once more
        encoding = encoding_of(raw.value)
        if "/" not in encoding:
            diff.skip("not_json" if encoding != "<encrypted>" else "encrypted")
            return None
        stored_version = encoding.rsplit("/", 1)[1]
        version = _read_version(crd, stored_version)
        if version is None:
            return _pair_by_review(transport, crd, raw, ns, name, diff, stored_version, converter)
        try:
            view = _api_view(transport, crd, version, ns, name, diff)
        except _Rejected:
            diff.skip("dry_run_rejected")
            return None
        if view is None:
            diff.skip("gone")
            return None
        if _same_revision(view, raw):
            return json.loads(raw.value), view, stored_version
        again = sampler.get(raw.key)
        if again is None:
            diff.skip("gone")
            return None
        raw = again
    diff.skip("changed_meanwhile")
    return None


def without_empty_maps(value: Any) -> Any:
    """``value`` without any empty map, at any depth."""
    if isinstance(value, dict):
        kept = {k: without_empty_maps(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v != {}}
    if isinstance(value, list):
        return [without_empty_maps(v) for v in value]
    return value


def without_added_empty_maps(converted: Any, stored: Any) -> Any:
    """``converted`` without the empty maps that ``stored`` has no key for: a webhook built on typed structs adds
    ``status: {}`` to every object it converts. An empty map the stored value has is kept, so one the conversion
    drops is judged like any other removal (normalised.py), not hidden."""
    if isinstance(converted, dict):
        had: Dict[str, Any] = stored if isinstance(stored, dict) else {}
        kept = {k: without_added_empty_maps(v, had.get(k)) for k, v in converted.items()}
        return {k: v for k, v in kept.items() if v != {} or k in had}
    if isinstance(converted, list):
        pairs = stored if isinstance(stored, list) and len(stored) == len(converted) else [None] * len(converted)
        return [without_added_empty_maps(v, old) for v, old in zip(converted, pairs, strict=True)]
    return converted


def round_trip_pair(stored: Dict[str, Any], back: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(stored, back) as compared after a webhook round trip. Empty maps in metadata are left out on both sides:
    the apiserver owns metadata's shape (``annotations: {}`` and none are one ObjectMeta), and its schema declares no
    members to judge them by. Elsewhere only the empty maps the webhook adds are left out of ``back``."""
    stored, back = _metadata_without_empty_maps(stored), _metadata_without_empty_maps(back)
    return stored, without_added_empty_maps(back, stored)


def _metadata_without_empty_maps(obj: Dict[str, Any]) -> Dict[str, Any]:
    meta = obj.get("metadata")
    return dict(obj, metadata=without_empty_maps(meta)) if isinstance(meta, dict) else obj


def _pair_by_review(transport: Transport, crd: Crd, raw: RawValue, ns: Optional[str], name: str,
                    diff: StorageDiff, stored_version: str,
                    converter: Converter) -> Optional[Tuple[Dict[str, Any], Dict[str, Any], str]]:
    """(stored, the API's storage-version view converted back to the stored version, stored version)."""
    if diff.unverified:  # the webhook failed once: do not ask it again for every object
        diff.skip("webhook_version_not_served")
        return None
    try:
        view = _api_view(transport, crd, crd.storage_version or "", ns, name, diff)
        if view is None:
            diff.skip("gone")
            return None
        if not _same_revision(view, raw):
            diff.skip("changed_meanwhile")
            return None
        back = converter(crd, [view], "%s/%s" % (crd.group, stored_version))[0]
    except _Rejected:
        diff.skip("dry_run_rejected")
        return None
    except CrdOpsError as exc:
        diff.skip("webhook_version_not_served")
        diff.unverified = "%s is not served and its objects could not be converted back for the comparison: %s" % (
            stored_version, exc)
        return None
    diff.compared_by_conversion_review += 1
    stored, back = round_trip_pair(json.loads(raw.value), back)
    return stored, back, stored_version


class _Schemas:
    """The CRD's version schemas, read once when the first compared pair needs one."""

    def __init__(self, transport: Transport, crd: Crd) -> None:
        self.transport, self.crd = transport, crd
        self.raw: Optional[Dict[str, Any]] = None

    def of(self, version: str) -> Optional[Schema]:
        if self.raw is None:
            try:
                self.raw = get_crd_raw(self.transport, self.crd.name)
            except NotFoundError:  # deleted meanwhile: no schema, so every removal counts as a loss
                self.raw = {}
        return version_openapi(self.raw, version)


def _compare(diff: StorageDiff, crd: Crd, stored: Dict[str, Any], served: Dict[str, Any], stored_version: str,
             label: str, schemas: _Schemas) -> None:
    """Count one pair; a removal is judged by the stored version's schema: both sides have its names on every
    path compared (module docstring)."""
    added, removed, changed = diff_values(stored, served)
    normalised: Set[str] = set()
    if removed:
        removed, normalised = split_removed(stored, served, schemas.of(stored_version))
        count_into(diff.normalised, normalised)
    diff.compared += 1
    if stored_version != crd.storage_version:
        diff.at_other_version += 1
        if crd.conversion_strategy == "Webhook":
            diff.compared_at_stored_version += 1
    if added or removed or normalised or changed:  # a normalised value changes the bytes all the same
        diff.would_change += 1
    for counts, paths in ((diff.added, added), (diff.removed, removed), (diff.changed, changed)):
        count_into(counts, paths)
    for paths in (added, removed, normalised, changed):
        for p in sorted(paths):
            names = diff.examples.setdefault(p, [])
            if len(names) < MAX_EXAMPLES and label not in names:
                names.append(label)


def diff_crd(transport: Transport, sampler: EtcdSampler, crd: Crd, etcd_prefix: str,
             sample: int = DEFAULT_SAMPLE, converter: Optional[Converter] = None) -> StorageDiff:
    """Compare the first ``sample`` objects (etcd key order) of one CRD with the API's view of them;
    ``converter`` asks the CRD's webhook (default: webhook_converter)."""
    converter = converter or webhook_converter(transport)
    storage = crd.storage_version
    if storage is None:
        raise CrdOpsError("the CRD has no storage version", cluster=transport.cluster_label, crd=crd.name)
    diff = StorageDiff(storage_version=storage)
    schemas = _Schemas(transport, crd)
    prefix = resource_prefix(etcd_prefix, crd.group, crd.plural)
    try:
        diff.keys = sampler.count(prefix)
        diff.revision, values = sampler.sample(prefix, sample)
        for raw in values:
            ns, name = object_ref(crd, prefix, raw.key)
            label = "%s/%s" % (ns, name) if ns else name
            diff.sampled += 1
            pair = _pair(transport, sampler, crd, raw, ns, name, diff, converter)
            if pair is not None:
                _compare(diff, crd, pair[0], pair[1], pair[2], label, schemas)
    except CrdOpsError as exc:
        exc.with_context(cluster=transport.cluster_label, crd=crd.name)
        raise
    return diff


def storage_diff_of(transport: Transport, sampler: Optional[EtcdSampler], crd: Crd, etcd_prefix: str,
                    sample: int) -> Dict[str, Any]:
    """The ``storage_diff`` result of one CRD; says why when it was not checked (never silently absent)."""
    if sampler is None:
        return not_checked(NO_ETCD_REASON)
    if sample <= 0:
        return not_checked("diff_sample is 0: no stored object was compared")
    if crd.storage_version not in crd.served_versions:
        return not_checked("the storage version %s is not served: the API cannot show the objects at it"
                           % crd.storage_version)
    return diff_crd(transport, sampler, crd, etcd_prefix, sample).as_dict()

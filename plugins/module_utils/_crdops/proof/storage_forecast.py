# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What the re-store would lose after release N's storage flip, forecast before release N is applied.

The storage diff (storage_diff.py) compares stored values with the API's view, so it can judge a new storage
version's schema only once the flip is live, and a refusal then comes after a write (the flip). This forecast
comes before it: each sampled stored value is taken where the apiserver would take it after the flip, with release
N's own parts only, and back:

1. converted to release N's storage version: apiVersion alone under conversion ``None``, else through release N's
   conversion webhook in a ``ConversionReview`` (webhook_review.py; nothing is written, the caBundle is the live
   CRD's when the release file carries none, as when an injector writes it);
2. pruned with release N's schema of that version, as the apiserver prunes what it stores (fields the schema does
   not declare, unless ``x-kubernetes-preserve-unknown-fields``; apiVersion, kind and metadata of the object and of
   embedded resources are kept);
3. converted back to the version it is stored at, and compared with the stored value.

What is missing on the way back is lost, unless it is a zero value the conversion only normalises: release N's
schema of the stored version serves the object the same with and without it, its defaults filled in as the
apiserver fills them (normalised.py). An empty map the stored value has is kept in the comparison, so a webhook
that drops ``opts: {}`` is judged like any removal; only empty maps the conversion adds, and those in metadata, are
left out (storage_diff.round_trip_pair).
Defaults are not forecast: the storage diff after the flip reports those, and they never stop the run. When
release N's webhook cannot be asked (a webhook the release itself deploys, not running yet), the forecast says so
and the check after the flip stays the guard.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..kube.crd import Crd
from ..kube.errors import CrdOpsError
from .etcd_scan import EtcdSampler, encoding_of, resource_prefix
from ..ownership.field_paths import count_into
from ..ownership.normalised import Schema, split_removed, version_openapi
from .storage_diff import MAX_EXAMPLES, Converter, object_ref, round_trip_pair, webhook_converter
from ..kube.transport import Transport

OBJECT_ROOT = ("apiVersion", "kind", "metadata")  # never pruned by a schema: the apiserver owns their shape


def prune(value: Any, schema: Optional[Schema], root: bool = False) -> Any:
    """``value`` as the apiserver stores it under ``schema`` (structural pruning only; no defaults)."""
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        declared = schema.get("properties")
        props: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
        extra = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or extra is True
        embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
        out = {}
        for key, member in value.items():
            if embedded and key in OBJECT_ROOT:
                out[key] = member
            elif key in props:
                out[key] = prune(member, props[key])
            elif isinstance(extra, Mapping):
                out[key] = prune(member, extra)
            elif keep_unknown:
                out[key] = member
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [prune(item, schema["items"]) for item in value]
    return value


@dataclass
class Forecast:
    storage_version: str  # release N's
    sampled: int = 0
    compared: int = 0
    removed: Dict[str, int] = field(default_factory=dict)
    normalised: Dict[str, int] = field(default_factory=dict)
    examples: Dict[str, List[str]] = field(default_factory=dict)
    skipped: Dict[str, int] = field(default_factory=dict)
    unverified: Optional[str] = None

    def count(self, label: str, lost: Any, normalised: Any) -> None:
        self.compared += 1
        count_into(self.removed, lost)
        count_into(self.normalised, normalised)
        for p in sorted(lost):
            names = self.examples.setdefault(p, [])
            if len(names) < MAX_EXAMPLES:
                names.append(label)

    def as_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"checked": True, "reason": None}
        out.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()})
        return out


class _Trip:
    """The round trip of one CRD's stored values through release N (module docstring)."""

    def __init__(self, live: Crd, release_doc: Mapping[str, Any], converter: Converter) -> None:
        release = Crd.from_api(dict(release_doc))
        if release.conversion_strategy == "Webhook" and not release.conversion_ca_bundle:
            release = dataclasses.replace(release, conversion_ca_bundle=live.conversion_ca_bundle)
        self.release, self.doc, self.converter = release, release_doc, converter
        self.target = release.storage_version or ""

    def to(self, obj: Dict[str, Any], version: str) -> Dict[str, Any]:
        desired = "%s/%s" % (self.release.group, version)
        if self.release.conversion_strategy != "Webhook":
            return dict(obj, apiVersion=desired)
        return self.converter(self.release, [obj], desired)[0]

    def compare(self, stored: Dict[str, Any], stored_version: str) -> Tuple[Any, Any]:
        """(lost, normalised) paths of one stored value."""
        at_target = prune(self.to(stored, self.target), version_openapi(self.doc, self.target), root=True)
        back = self.to(at_target, stored_version) if stored_version != self.target else at_target
        schema = version_openapi(self.doc, stored_version)  # release N's: it serves the value after the flip
        return split_removed(*round_trip_pair(stored, back), schema)


def forecast_crd(transport: Transport, sampler: EtcdSampler, live: Crd, release_doc: Mapping[str, Any], etcd_prefix: str,
                 sample: int, converter: Optional[Converter] = None) -> Forecast:
    """The forecast for the first ``sample`` stored values (etcd key order) of one CRD."""
    trip = _Trip(live, release_doc, converter or webhook_converter(transport))
    forecast = Forecast(storage_version=trip.target)
    prefix = resource_prefix(etcd_prefix, live.group, live.plural)
    _revision, values = sampler.sample(prefix, sample)
    for raw in values:
        forecast.sampled += 1
        encoding = encoding_of(raw.value)
        if "/" not in encoding:
            forecast.skipped["not_json"] = forecast.skipped.get("not_json", 0) + 1
            continue
        ns, name = object_ref(live, prefix, raw.key)
        try:
            lost, normalised = trip.compare(json.loads(raw.value), encoding.rsplit("/", 1)[1])
        except CrdOpsError as exc:  # release N's webhook not asked: the check after the flip stays the guard
            forecast.unverified = "release N's conversion webhook could not be asked: %s" % exc
            forecast.skipped["webhook"] = len(values) - forecast.compared - sum(forecast.skipped.values())
            break
        forecast.count("%s/%s" % (ns, name) if ns else name, lost, normalised)
    return forecast


def forecast_of(transport: Transport, sampler: Optional[EtcdSampler], live: Crd, release_docs: List[Mapping[str, Any]],
                etcd_prefix: str, sample: int) -> Optional[Dict[str, Any]]:
    """The ``storage_forecast`` result of one CRD: None when release N does not move its storage version."""
    doc = next((d for d in release_docs if (d.get("metadata") or {}).get("name") == live.name), None)
    if doc is None or Crd.from_api(dict(doc)).storage_version in (None, live.storage_version):
        return None
    if sampler is None or sample <= 0:
        return {"checked": False, "reason": "no etcd_url or diff_sample is 0: the stored values were not read"}
    try:
        return forecast_crd(transport, sampler, live, doc, etcd_prefix, sample).as_dict()
    except CrdOpsError as exc:
        exc.with_context(cluster=transport.cluster_label, crd=live.name)
        raise

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Read a CRD's objects straight from etcd and report the apiVersion each key is encoded at.

The apiserver always answers at the version you ask for, so only etcd can prove that objects were
re-encoded. Keys are ``<prefix>/<group>/<plural>/[<namespace>/]<name>``; custom resources are stored
as JSON (CBOR only behind an alpha gate) and ``k8s:enc:`` marks encryption at rest, which we cannot
read. We talk to etcd's grpc-gateway (``/v3/kv/range``, on by default since etcd 3.4) so no etcd
client library is needed.
"""

from __future__ import annotations

import base64
import json
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..kube.errors import CrdOpsError

try:
    import urllib3

    HAS_URLLIB3 = True
    URLLIB3_IMPORT_ERROR: Optional[str] = None
except ImportError:  # pragma: no cover - depends on the environment
    HAS_URLLIB3 = False
    URLLIB3_IMPORT_ERROR = traceback.format_exc()

PAGE_SIZE = 500
MAX_REPORTED_KEYS = 20

ENCRYPTED = "<encrypted>"
PROTOBUF = "<protobuf>"
CBOR = "<cbor>"
UNDECODABLE = "<undecodable>"


@dataclass(frozen=True)
class EtcdOptions:
    url: str
    prefix: str = "/registry"
    ca_cert: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = field(default=None, repr=False)
    timeout: float = 30.0


@dataclass
class EtcdScanResult:
    crd: str
    expected_api_version: str
    revision: int = 0
    total: int = 0
    counts: Dict[str, int] = field(default_factory=dict)
    mismatched_keys: List[str] = field(default_factory=list)
    prefix: str = ""  # the key prefix read: <etcd prefix>/<group>/<plural>/
    api_objects: Optional[int] = None  # objects the API lists, asked only when etcd had no key (None: not asked)
    problem: Optional[str] = None  # why the scan proves nothing (no key while the API lists objects)

    @property
    def verified(self) -> bool:
        # zero keys prove nothing when the API lists objects: a wrong prefix must never pass as "all migrated"
        return self.problem is None and self.total == self.counts.get(self.expected_api_version, 0)

    def as_dict(self) -> Dict[str, Any]:
        # "keys" is the pre-1.1 name of key_count, still returned for playbooks that read it (ansible-core
        # 2.21's validate-modules refuses a documented return key that shadows a dict method).
        return {"name": self.crd, "expected_api_version": self.expected_api_version, "revision": self.revision,
                "key_count": self.total, "keys": self.total, "counts": dict(self.counts), "verified": self.verified,
                "mismatched_keys": list(self.mismatched_keys),
                "mismatched": self.total - self.counts.get(self.expected_api_version, 0),
                "prefix": self.prefix, "api_objects": self.api_objects, "problem": self.problem}


def encoding_of(value: bytes) -> str:
    if value.startswith(b"k8s:enc:"):
        return ENCRYPTED
    if value.startswith(b"k8s\x00"):
        return PROTOBUF
    if value.startswith(b"\xd9\xd9\xf7"):
        return CBOR
    try:
        return str(json.loads(value).get("apiVersion", UNDECODABLE))
    except (ValueError, AttributeError):
        return UNDECODABLE


def range_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with ``prefix`` (etcd's ``range_end`` for a prefix)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


class EtcdReader:
    def __init__(self, options: EtcdOptions) -> None:
        if not HAS_URLLIB3:
            raise CrdOpsError("the urllib3 Python library is required to read etcd (pip install urllib3):\n%s"
                              % URLLIB3_IMPORT_ERROR)
        self.options = options
        tls: Dict[str, Any] = {}
        if options.url.startswith("https://"):
            tls = {"cert_reqs": "CERT_REQUIRED", "ca_certs": options.ca_cert,
                   "cert_file": options.client_cert, "key_file": options.client_key}
        self._pool = urllib3.PoolManager(retries=urllib3.Retry(total=3, backoff_factor=0.2),
                                         timeout=urllib3.Timeout(total=options.timeout), **tls)

    def _range(self, payload: Dict[str, Any]) -> Dict[str, Any]:
        url = self.options.url.rstrip("/") + "/v3/kv/range"
        try:
            resp = self._pool.request("POST", url, body=json.dumps(payload).encode(),
                                      headers={"Content-Type": "application/json"})
        except urllib3.exceptions.HTTPError as exc:
            raise CrdOpsError(f"etcd at {self.options.url} is not reachable: {exc}") from None
        if resp.status != 200:
            raise CrdOpsError(f"etcd at {self.options.url} answered HTTP {resp.status}: "
                              f"{resp.data[:300].decode(errors='replace')}")
        body: Dict[str, Any] = json.loads(resp.data)
        return body

    def scan(self, crd_name: str, group: str, plural: str, expected_api_version: str) -> EtcdScanResult:
        prefix = f"{self.options.prefix.rstrip('/')}/{group}/{plural}/".encode()
        end = range_end(prefix)
        result = EtcdScanResult(crd=crd_name, expected_api_version=expected_api_version, prefix=prefix.decode())
        start = prefix
        while True:
            payload = {"key": _b64(start), "range_end": _b64(end), "limit": PAGE_SIZE}
            if result.revision:
                payload["revision"] = result.revision  # every page from the same snapshot
            try:
                body = self._range(payload)
            except CrdOpsError as exc:
                exc.with_context(crd=crd_name)
                raise
            if not result.revision:
                result.revision = int(body["header"]["revision"])
            kvs = body.get("kvs", [])
            for kv in kvs:
                version = encoding_of(base64.b64decode(kv.get("value", "")))
                result.total += 1
                result.counts[version] = result.counts.get(version, 0) + 1
                if version != expected_api_version and len(result.mismatched_keys) < MAX_REPORTED_KEYS:
                    result.mismatched_keys.append(base64.b64decode(kv["key"]).decode(errors="replace"))
            if not body.get("more") or not kvs:
                return result
            start = base64.b64decode(kvs[-1]["key"]) + b"\x00"

    def close(self) -> None:
        self._pool.clear()

    def count_keys(self, prefix: bytes) -> int:
        body = self._range({"key": _b64(prefix), "range_end": _b64(range_end(prefix)), "count_only": True})
        return int(body.get("count", 0))

    def top_level_prefixes(self, limit: int = 10) -> List[str]:
        """The distinct first path segments of etcd's keys (``/registry``, ``/kubernetes.io`` on OpenShift, ...),
        one keys-only request each: after a segment, the next key is looked up past its whole range."""
        found: List[str] = []
        start = b"/"
        while len(found) < limit:
            body = self._range({"key": _b64(start), "range_end": _b64(b"0"), "limit": 1, "keys_only": True})
            kvs = body.get("kvs") or []
            if not kvs:
                return found
            key = base64.b64decode(kvs[0]["key"])
            segment = b"/" + key[1:].split(b"/", 1)[0]
            found.append(segment.decode(errors="replace"))
            start = range_end(segment + b"/")
        return found

    def explain_no_keys(self, scan: EtcdScanResult, group: str, plural: str, api_objects: Optional[int]) -> None:
        """No key under the prefix while the API lists objects: fail the scan, naming the prefix tried and the
        top-level prefix where this CRD's keys are (the apiserver's ``--etcd-prefix``)."""
        scan.api_objects = api_objects
        listed = "%d" % api_objects if api_objects is not None else "more than one"
        tried = self.options.prefix.rstrip("/") or "/"
        tops = self.top_level_prefixes()
        likely = [top for top in tops if top != tried and self.count_keys(("%s/%s/%s/" % (top, group, plural)).encode())]
        if likely:
            hint = "this CRD's keys are under %s/%s/%s/: set etcd_prefix (crd_upgrade_etcd_prefix) to %s" % (
                likely[0], group, plural, likely[0])
        else:
            hint = "no top-level prefix of this etcd holds them (top-level prefixes: %s); is etcd_url the etcd of " \
                   "this cluster, and etcd_prefix the apiserver's --etcd-prefix?" % (", ".join(tops) or "none")
        scan.problem = ("etcd has no key under %s while the API lists %s objects of the CRD: the etcd prefix %s is "
                        "wrong or etcd is not this cluster's; %s" % (scan.prefix, listed, tried, hint))


# --- raw values (storage_diff.py): what the re-store would overwrite --------------------------------------


@dataclass(frozen=True)
class RawValue:
    """One key as etcd holds it. ``mod_revision`` equals the object's resourceVersion in the API."""
    key: str
    mod_revision: int
    value: bytes = field(repr=False)


def resource_prefix(etcd_prefix: str, group: str, plural: str) -> str:
    # the trailing / keeps a sibling plural sharing the prefix (widgets, widgetsets) out
    return f"{etcd_prefix.rstrip('/')}/{group}/{plural}/"


def _raw_values(body: Dict[str, Any]) -> List[RawValue]:
    return [RawValue(key=base64.b64decode(kv["key"]).decode(errors="replace"),
                     mod_revision=int(kv.get("mod_revision", 0)),
                     value=base64.b64decode(kv.get("value", ""))) for kv in body.get("kvs", [])]


class EtcdSampler(EtcdReader):
    """Reads a few raw values of a resource (the first keys in key order) and single keys again."""

    def count(self, prefix: str) -> int:
        start = prefix.encode()
        body = self._range({"key": _b64(start), "range_end": _b64(range_end(start)), "count_only": True})
        return int(body.get("count", 0))

    def sample(self, prefix: str, limit: int) -> tuple[int, List[RawValue]]:
        """(revision, up to ``limit`` values) from one snapshot."""
        start = prefix.encode()
        body = self._range({"key": _b64(start), "range_end": _b64(range_end(start)), "limit": int(limit)})
        return int(body["header"]["revision"]), _raw_values(body)

    def get(self, key: str) -> Optional[RawValue]:
        values = _raw_values(self._range({"key": _b64(key.encode())}))
        return values[0] if values else None

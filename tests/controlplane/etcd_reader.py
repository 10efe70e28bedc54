"""Read what etcd really holds for a CRD's objects, bypassing the apiserver.

This is the proof tool: "migrated" means every key under /registry/<group>/<plural>/ holds JSON whose
apiVersion is <group>/<storage version>. It speaks etcd's grpc-gateway JSON API (on by default in
3.4+), so it needs no etcd client library.
"""
from __future__ import annotations

import base64
import json
import urllib.request
from collections import Counter
from dataclasses import dataclass, field

PAGE = 500


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key that starts with `prefix` (etcd's range_end convention)."""
    end = bytearray(prefix)
    for i in range(len(end) - 1, -1, -1):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"


def _post(etcd_url: str, path: str, payload: dict) -> dict:
    req = urllib.request.Request(etcd_url.rstrip("/") + path, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def encoding_of(value: bytes) -> str:
    """The apiVersion a stored value is encoded at, or a tag for encodings we do not decode."""
    if value.startswith(b"k8s:enc:"):
        return "<encrypted>"
    if value.startswith(b"k8s\x00"):
        return "<protobuf>"
    if value.startswith(b"\xd9\xd9\xf7"):
        return "<cbor>"
    try:
        return json.loads(value).get("apiVersion", "<no apiVersion>")
    except ValueError:
        return "<undecodable>"


@dataclass
class StorageScan:
    """Every key of one resource in etcd with the apiVersion it is stored at."""
    prefix: str
    revision: int
    keys: dict[str, str] = field(default_factory=dict)

    @property
    def counts(self) -> Counter:
        return Counter(self.keys.values())

    @property
    def total(self) -> int:
        return len(self.keys)

    def keys_not_at(self, api_version: str) -> list[str]:
        return sorted(k for k, v in self.keys.items() if v != api_version)


def resource_prefix(group: str, plural: str, etcd_prefix: str = "/registry") -> bytes:
    """Keys of one resource; the trailing / keeps a sibling plural sharing the prefix out."""
    return f"{etcd_prefix.rstrip('/')}/{group}/{plural}/".encode()


def read_range(etcd_url: str, prefix: bytes) -> tuple[int, list[tuple[bytes, bytes]]]:
    """Every (key, value) under `prefix`, paged, all pages from one snapshot (the first page's revision)."""
    end, start, revision, pairs = _prefix_end(prefix), prefix, 0, []
    while True:
        payload = {"key": _b64(start), "range_end": _b64(end), "limit": PAGE}
        if revision:
            payload["revision"] = revision
        body = _post(etcd_url, "/v3/kv/range", payload)
        revision = revision or int(body["header"]["revision"])
        kvs = body.get("kvs", [])
        pairs.extend((base64.b64decode(kv["key"]), base64.b64decode(kv.get("value", ""))) for kv in kvs)
        if not body.get("more") or not kvs:
            return revision, pairs
        start = base64.b64decode(kvs[-1]["key"]) + b"\x00"


def scan_storage(etcd_url: str, group: str, plural: str, etcd_prefix: str = "/registry") -> StorageScan:
    prefix = resource_prefix(group, plural, etcd_prefix)
    revision, pairs = read_range(etcd_url, prefix)
    scan = StorageScan(prefix=prefix.decode(), revision=revision)
    for key, value in pairs:
        scan.keys[key.decode(errors="replace")] = encoding_of(value)
    return scan


def current_revision(etcd_url: str) -> int:
    """etcd's global revision: unchanged means nothing at all was written (check-mode proof)."""
    body = _post(etcd_url, "/v3/kv/range", {"key": _b64(b"\x00"), "limit": 1, "keys_only": True})
    return int(body["header"]["revision"])


def compact(etcd_url: str, revision: int | None = None) -> int:
    """Compact history up to `revision` (default: now), to make old continue tokens expire (410)."""
    revision = revision or current_revision(etcd_url)
    _post(etcd_url, "/v3/kv/compaction", {"revision": revision, "physical": True})
    return revision


# Written by the control plane itself all the time (apiserver identity leases, events): not by us.
BACKGROUND_PREFIXES = ("/registry/leases/", "/registry/events/", "/registry/masterleases/",
                       "/registry/peerserverleases/")


def keys_written_since(etcd_url: str, revision: int, prefix: str = "/registry/") -> list[str]:
    """Keys created or modified after `revision`, leaving out the control plane's own heartbeats.

    Check mode must write nothing: the global revision alone cannot show it, since every apiserver
    renews its identity lease every few seconds.
    """
    start = prefix.encode()
    body = _post(etcd_url, "/v3/kv/range", {"key": _b64(start), "range_end": _b64(_prefix_end(start)),
                                            "keys_only": True, "min_mod_revision": revision + 1})
    keys = [base64.b64decode(kv["key"]).decode(errors="replace") for kv in body.get("kvs", [])]
    return [k for k in keys if not k.startswith(BACKGROUND_PREFIXES)]


def key_versions(etcd_url: str, group: str, plural: str, etcd_prefix: str = "/registry") -> dict[str, int]:
    """Key -> how many times it was written since it was created (etcd's ``version``: 1 = created, never updated)."""
    prefix = resource_prefix(group, plural, etcd_prefix)
    body = _post(etcd_url, "/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix)),
                                            "keys_only": True})
    return {base64.b64decode(kv["key"]).decode(errors="replace"): int(kv["version"]) for kv in body.get("kvs", [])}

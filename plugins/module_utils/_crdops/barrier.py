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
"""

from __future__ import annotations

import base64
import hashlib
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from .crd import Crd
from .errors import CrdOpsError
from .transport import JSON, Transport


def storage_version_hash(group: str, version: str, kind: str) -> str:
    digest = hashlib.sha256(("%s/%s/%s" % (group, version, kind)).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


@dataclass
class BarrierResult:
    crd: str
    storage_version: str
    endpoints: Dict[str, str] = field(default_factory=dict)  # endpoint -> version it reports
    waited_s: float = 0.0
    passed: bool = False

    def to_dict(self) -> dict:
        return {"name": self.crd, "storage_version": self.storage_version, "endpoints": dict(self.endpoints),
                "waited_s": round(self.waited_s, 3), "passed": self.passed}


def reported_storage_version(transport: Transport, crd: Crd) -> Optional[str]:
    """The version this apiserver says it stores ``crd`` at, from its discovery document."""
    known = dict((storage_version_hash(crd.group, v.name, crd.kind), v.name) for v in crd.versions)
    for version in crd.served_versions:
        resp = transport.request("GET", "/apis/%s/%s" % (crd.group, version), accept=JSON)
        if not resp.ok:
            continue
        for resource in (resp.json() or {}).get("resources") or []:
            if resource.get("name") == crd.plural and resource.get("storageVersionHash"):
                return known.get(resource["storageVersionHash"], "<unknown>")
    return None


def wait_for_storage_version(transports: Dict[str, Transport], crd: Crd, timeout: float, settle: float = 0.0,
                             clock: Callable[[], float] = time.monotonic,
                             sleep: Callable[[float], None] = time.sleep) -> BarrierResult:
    """Block until every endpoint reports ``crd``'s storage version, then wait ``settle`` seconds."""
    storage = crd.storage_version or ""
    result = BarrierResult(crd=crd.name, storage_version=storage)
    start = clock()
    while True:
        lagging = []  # type: List[str]
        for endpoint, transport in transports.items():
            try:
                seen = reported_storage_version(transport, crd)
            except CrdOpsError as exc:
                seen = "<unreachable: %s>" % (exc.api_message or exc.message)
            result.endpoints[endpoint] = seen or "<not served>"
            if seen != storage:
                lagging.append(endpoint)
        if not lagging:
            break
        if clock() - start >= timeout:
            result.waited_s = clock() - start
            raise CrdOpsError(
                "HA barrier: after %.0fs these apiservers still do not report storage version %s: %s; "
                "migrating now could store objects at the old version (kubernetes#130235)"
                % (timeout, storage, ", ".join("%s (reports %s)" % (e, result.endpoints[e]) for e in lagging)),
                crd=crd.name)
        sleep(0.5)
    if settle > 0:
        sleep(settle)
    result.waited_s = clock() - start
    result.passed = True
    return result

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Objects provably written after the HA barrier passed: already stored at the storage version.

Once every apiserver reports the new storage version (barrier.py), every write encodes the object at that
version. The pass reads etcd's revision right then, with a consistent LIST of the CRD's resource with
``limit=1`` (no ``resourceVersion`` parameter: a quorum read, so the list's ``metadata.resourceVersion`` is
at least the etcd revision at the moment the request arrived). An object listed later with a larger
``resourceVersion`` was last written by a commit after that moment, so after the barrier: its bytes are at
the storage version and a no-op write would be elided. The pass counts it ``already_current`` without
writing it, unless its managedFields name another version (kubernetes#111937): those still need the fix.

The API calls resourceVersions opaque. Comparing them is safe here because both numbers come from one
etcd (the same cluster, the same resource) and kube-apiserver's etcd3 storage sets every resourceVersion
to the etcd revision of the object's last write (list: the revision of the read). When either value is
not a decimal integer, nothing is skipped. The etcd scan after the pass stays the proof.
"""

from __future__ import annotations

from typing import Optional

from ..kube.crd import Crd
from .listing import ObjectRef
from ..kube.transport import ACCEPT_PARTIAL_LIST, Transport, error_from_response


def parse_revision(resource_version: object) -> Optional[int]:
    """The resourceVersion as an etcd revision, or None when it is not a plain positive integer."""
    text = str(resource_version or "")
    if not text or len(text) > 20 or text.strip("0123456789"):
        return None
    value = int(text)
    return value if value > 0 else None


def barrier_revision(transport: Transport, crd: Crd) -> Optional[int]:
    """The etcd revision as of now, from a quorum LIST of one object of ``crd`` (metadata only)."""
    path = crd.resource_path()
    resp = transport.request("GET", path, query=[("limit", "1")], accept=ACCEPT_PARTIAL_LIST)
    if not resp.ok:
        raise error_from_response(resp, "LIST %s (barrier revision)" % path, cluster=transport.cluster_label,
                                  crd=crd.name)
    body = resp.json()
    meta = body.get("metadata") if isinstance(body, dict) else None
    return parse_revision((meta or {}).get("resourceVersion"))


def written_after(ref: ObjectRef, revision: Optional[int]) -> bool:
    """True when ``ref`` was last written after ``revision`` and has no managedFields entry at another version."""
    if revision is None or ref.stale is not None:
        return False
    mine = parse_revision(ref.resource_version)
    return mine is not None and mine > revision

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What applying a CRD manifest would change on the live CRD, asked of the apiserver with ``dryRun=All``.

The apiserver's answer is the CRD as it would store it (defaults, conversion settings and ownership included), so
comparing it with the live CRD finds every change without reimplementing server-side apply.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..kube.crd import crd_path
from ..kube.selection import get_crd_raw
from ..kube.transport import APPLY_PATCH, Transport, dumps, error_from_response

# server-set fields that say when, not what: a no-op apply may still answer with a fresh value for these
VOLATILE_METADATA = ("resourceVersion",)
MAX_PATHS = 6


def differences(before: Any, after: Any, path: str = "", limit: int = MAX_PATHS) -> List[str]:
    """Paths (``.spec.versions``) where ``after`` differs from ``before``, at most ``limit``."""
    if isinstance(before, dict) and isinstance(after, dict):
        out: List[str] = []
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                out += differences(before.get(key), after.get(key), "%s.%s" % (path, key), limit - len(out))
            if len(out) >= limit:
                break
        return out[:limit]
    return [path or "."] if before != after and limit > 0 else []


def without_volatile(crd: Mapping[str, Any], ignored: Sequence[str] = VOLATILE_METADATA) -> Dict[str, Any]:
    meta = {k: v for k, v in (crd.get("metadata") or {}).items() if k not in ignored}
    return dict(crd, metadata=meta)


def apply_changes(transport: Transport, doc: Mapping[str, Any], field_manager: str,
                  ignored: Sequence[str] = VOLATILE_METADATA, release: str = "release N+1",
                  live: Optional[Mapping[str, Any]] = None) -> List[str]:
    """What applying ``doc`` would change on the live CRD (the role's forced server-side apply, sent with
    ``dryRun=All``): the paths where the apiserver's answer differs from the CRD as read just before (``live``, else
    a GET), leaving out the metadata fields ``ignored``."""
    name = str((doc.get("metadata") or {}).get("name") or "")
    live = get_crd_raw(transport, name) if live is None else live
    query = [("fieldManager", field_manager), ("force", "true"), ("dryRun", "All")]
    resp = transport.request("PATCH", crd_path(name), query=query, body=dumps(dict(doc)), content_type=APPLY_PATCH)
    if not resp.ok:
        error = error_from_response(resp, "PATCH CRD (apply, dryRun=All)", cluster=transport.cluster_label, crd=name)
        return ["the apply of %s (dry-run) was refused: %s" % (release, error.api_message or error.message)]
    return differences(without_volatile(live, ignored), without_volatile(resp.json(), ignored))

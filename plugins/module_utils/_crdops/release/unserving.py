# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Versions a release stops serving are removals too, for the clients that still use them.

A release may keep a version in ``spec.versions`` with ``served: false`` (cert-manager v1.6 does so for its legacy
versions while objects are still stored at them). To a client that version is gone the moment the release is
applied: a GET, a write or an apply at it answers 404, and a source that declares it fails its next reconcile. So
the clients of such a version are looked for before the release is applied, like those of a version the next
release removes, and while one is left the release is applied with that version still served: serve both, flip,
migrate, then drop (the order of the storage-version migration KEP). Its serving stops in a later step, once the
clients have moved.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Sequence


def _served(versions: Any) -> Dict[str, bool]:
    out: Dict[str, bool] = {}
    for version in versions if isinstance(versions, list) else []:
        if isinstance(version, Mapping) and version.get("name"):
            out[str(version["name"])] = bool(version.get("served"))
    return out


def stops_serving(live_versions: Sequence[Mapping[str, Any]], release_doc: Mapping[str, Any]) -> List[str]:
    """The versions the live CRD serves that ``release_doc`` (a CRD manifest) lists with ``served: false``.

    A version the release does not list at all is a removal of its own: the apiserver refuses it while objects are
    stored at it, and the next release's check (writers.py) is where a removal's clients are named."""
    release = _served((release_doc.get("spec") or {}).get("versions"))
    return [name for name, served in _served(list(live_versions)).items()
            if served and name in release and not release[name]]


def keep_served(release_doc: Mapping[str, Any], versions: Sequence[str]) -> Dict[str, Any]:
    """A copy of ``release_doc`` that still serves ``versions`` (those it lists); every other byte as it was."""
    doc: Dict[str, Any] = copy.deepcopy(dict(release_doc))
    for version in (doc.get("spec") or {}).get("versions") or []:
        if isinstance(version, dict) and version.get("name") in versions:
            version["served"] = True
    return doc

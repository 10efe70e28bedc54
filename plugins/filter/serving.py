# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The crd_upgrade role's steps for versions release N stops serving (storage_flip.yml, unserving.yml)."""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.unserving import (
    keep_served, stops_serving)


def _name(doc):
    return (doc.get("metadata") or {}).get("name")


def crd_upgrade_unserving(release_docs, live_crds):
    """CRD name -> the versions it serves now that release N lists with ``served: false`` (crd_storage_info's
    ``crds`` for the live CRDs)."""
    live = dict((c.get("name"), c.get("versions") or []) for c in live_crds or [])
    out = {}
    for doc in release_docs or []:
        versions = stops_serving(live.get(_name(doc)) or [], doc)
        if versions:
            out[_name(doc)] = versions
    return out


def crd_upgrade_keep_served(release_docs, kept):
    """Release N's documents, each still serving the versions ``kept`` names for its CRD (clients still use them)."""
    kept = kept or {}
    return [keep_served(doc, kept[_name(doc)]) if kept.get(_name(doc)) else doc for doc in release_docs or []]


def crd_upgrade_kept_served(writers_crds):
    """CRD name -> versions kept served, from crd_client_check writers' ``crds`` (those held back)."""
    return dict((c.get("name"), list(c.get("removed_versions") or [])) for c in writers_crds or [] if c.get("held_back"))


class FilterModule:
    """Registers nothing: steps of the crd_upgrade role, reached through crdops.migration.crd_upgrade_step."""

    def filters(self):
        return {}

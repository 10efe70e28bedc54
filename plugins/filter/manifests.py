# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The role's reader of CRD manifests: the modules' own reader (module_utils/_crdops/manifests.py), run on the
controller so that init and the modules of later phases agree on every document (issue 14).

Documented in the sidecar .yml files of the same names.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.manifests import (
    Skipped, read_manifests, skipped_summary)


class AnsibleFilterError(ValueError):
    """A bad value given to a filter (see fleet.py for why not ansible.errors')."""


def crd_upgrade_manifests(paths, base_dir=None, label="manifests"):
    """``{files, crds, skipped}`` from manifest paths and globs; relative ones are resolved against ``base_dir``."""
    if isinstance(paths, str):
        paths = [paths]
    try:
        return read_manifests(list(paths or []), label=label, base_dir=base_dir).as_dict()
    except BadInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def crd_upgrade_skipped(skipped):
    """``N documents skipped (not CRDs): <file> document <i> (<kind>), ...`` from crd_upgrade_manifests' ``skipped``."""
    return skipped_summary([Skipped(source=s["file"], index=s["index"], kind=s["kind"]) for s in skipped or []])


def crd_upgrade_storage_versions(docs):
    """``{CRD name: storage version}`` of CRD manifests (None for a CRD without a storage version)."""
    out = {}
    for doc in docs or []:
        versions = (doc.get("spec") or {}).get("versions") or []
        out[doc["metadata"]["name"]] = next((v.get("name") for v in versions if v.get("storage")), None)
    return out


def crd_upgrade_names(given, docs):
    """The CRDs to work on: ``given`` (a list, or survey text split on commas, spaces and new lines), or when
    it is empty every CRD named in ``docs``, sorted."""
    if isinstance(given, str):
        given = given.replace(",", " ").split()
    if given:
        return list(given)
    return sorted(set(doc["metadata"]["name"] for doc in docs or []))


class FilterModule:
    def filters(self):
        return {
            "crd_upgrade_manifests": crd_upgrade_manifests,
            "crd_upgrade_skipped": crd_upgrade_skipped,
            "crd_upgrade_storage_versions": crd_upgrade_storage_versions,
            "crd_upgrade_names": crd_upgrade_names,
        }

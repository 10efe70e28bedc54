# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""CRD manifests for a playbook: the modules' own reader (module_utils/_crdops/kube/manifests.py), run on the
controller, so that a file loaded here is read the same way by the modules.

Documented in the sidecar .yml files of the same names.
"""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.manifests import read_manifests


class AnsibleFilterError(ValueError):
    """A bad value given to a filter (see fleet.py for why not ansible.errors')."""


def crd_upgrade_manifests(paths, base_dir=None, label="manifests"):
    """``{files, crds, skipped}`` from manifest paths and globs; relative ones are resolved against ``base_dir``,
    unset: the working directory of the run (as the modules do)."""
    if isinstance(paths, str):
        paths = [paths]
    try:
        return read_manifests(list(paths or []), label=label, base_dir=base_dir).as_dict()
    except BadInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule:
    def filters(self):
        return {
            "crd_upgrade_manifests": crd_upgrade_manifests,
        }

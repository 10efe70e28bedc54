# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r'''
options:
  names:
    description:
      - Names of the CRDs to work on (C(<plural>.<group>)).
      - An unknown name is an error that names it and the cluster.
      - Mutually exclusive with O(group), O(label_selector) and O(all).
    type: list
    elements: str
    aliases: [ crd_names ]
  group:
    description:
      - Select every CRD of this API group. May be combined with O(label_selector).
    type: str
  label_selector:
    description:
      - Select CRDs by a label selector (for example V(app.kubernetes.io/part-of=cluster-api)).
        May be combined with O(group).
    type: str
  all:
    description:
      - Select every CRD of the cluster.
    type: bool
    default: false
  allow_empty:
    description:
      - When O(group), O(label_selector) or O(all) select no CRD, succeed with an empty result
        instead of failing.
    type: bool
    default: false
'''

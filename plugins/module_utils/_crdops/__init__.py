# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The engine of crdops.migration: typed, no Ansible import, in folders by concern.

From the bottom up: kube, record, ha, ownership, restore, proof, repair, release, report, run. A folder imports
only the folders below it, and never a name that starts with ``_`` from another folder
(tests/unit/plugins/module_utils/test_crdops_layers.py checks both).
"""

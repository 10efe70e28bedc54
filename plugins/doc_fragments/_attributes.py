# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release

from __future__ import annotations


class ModuleDocFragment:

    # The descriptions, and the support most modules have: full check mode, no diff, idempotent. A module states
    # only what differs, and its details (ansible-doc merges the module's keys over these).
    DOCUMENTATION = r'''
options: {}
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in diff_mode), when in diff mode.
    support: none
  idempotent:
    description:
      - When run twice in a row outside check mode, with the same arguments, the second invocation
        indicates no change.
    support: full
'''

    ACTIONGROUP_CRDOPS = r'''
options: {}
attributes:
  action_group:
    description: Use C(group/crdops.migration.crdops) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - crdops.migration.crdops
'''

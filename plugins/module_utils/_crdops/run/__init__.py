# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""One module's run over a cluster's CRDs: discovering them, the migration run (checks, barrier, passes,
proof, totals), and whether the role has nothing to do at all.
The top floor: imports any folder below it.
"""

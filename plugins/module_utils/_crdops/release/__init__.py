# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Moving to the next release: what it removes, applying it (dry-run first), following it, who still writes
at a removed version (clients, Helm releases) and whether they still apply.
Imports every folder below report.
"""

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Repairing a resource whose objects are stored at a version its CRD no longer has: the diagnosis, the
repair, giving spec.versions back to its owners.
Imports every folder below release.
"""

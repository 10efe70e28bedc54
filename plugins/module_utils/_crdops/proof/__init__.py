# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Proving a re-store and acting on the proof: etcd scans, what the re-store changes in stored bytes, the
confirming pass behind a record, the storedVersions trim.
Imports kube, record, ha, ownership and restore.
"""

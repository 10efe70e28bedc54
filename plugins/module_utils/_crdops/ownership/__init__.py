# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Who owns which field: managedFields and kubectl's last-applied annotation, rewritten into the storage
version's field names with a field mapping learnt from the conversion itself (made-up marker objects, samples).
Imports kube and ha.
"""

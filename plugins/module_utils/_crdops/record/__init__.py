# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What a run leaves on a CRD for the next one: the migration record and resume checkpoint, Kubernetes Events,
a lag an earlier run saw.
Imports only kube.
"""

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Every apiserver of a cluster, and one pass at a time: finding the apiservers, the HA barrier after a storage
flip, the drain before a proof, the pass Lease.
Imports only kube.
"""

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The re-store pass: listing objects, the one no-op write of each, its pace and the latency probe that
holds it, admission preflight, objects already fresh, progress lines.
Imports kube, record, ha and ownership.
"""

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Talking to the apiserver: the HTTP transport and its connection options, errors, access reviews, the typed CRD
and its schema, choosing CRDs, reading release manifests, stop signals.
The bottom floor: imports nothing else of the engine.
"""

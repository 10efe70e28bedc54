# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nox sessions of antsibull-nox, configured in antsibull-nox.toml; run by tests/sanity/typecheck.sh."""

import antsibull_nox

antsibull_nox.load_antsibull_nox_toml()

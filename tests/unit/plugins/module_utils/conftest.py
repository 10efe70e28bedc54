# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures the engine's unit tests share by name (``pytestmark = pytest.mark.usefixtures(...)``)."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import probe_baseline


@pytest.fixture
def lean_client(monkeypatch):
    """The limiter's mechanics are stated in the probe's own multiples (latency over reference); a typical client's
    own time on each answer is tested on its own (test_a_multiple_is_a_typical_clients_...)."""
    monkeypatch.setattr(probe_baseline, "CLIENT_OWN_S", 0.0)

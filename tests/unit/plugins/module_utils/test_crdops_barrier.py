# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.barrier import (
    storage_version_hash, wait_for_storage_version)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import Clock, FakeCluster

NAME = "crontabs.stable.example.com"


def test_hash_matches_the_apiserver_discovery_value():
    # value read from a real kube-apiserver 1.37 discovery document for a.test/v1beta1 Widget
    assert storage_version_hash("a.test", "v1beta1", "Widget") == "GDoSKc9Bv/c="


def test_barrier_passes_when_every_apiserver_reports_the_storage_version():
    a, b = FakeCluster(), FakeCluster()
    for c in (a, b):
        c.add_crd()
    clock = Clock(t=0.0)
    result = wait_for_storage_version({"a": a, "b": b}, get_crd(a, NAME), timeout=10, settle=2,
                                      clock=clock, sleep=clock.sleep)
    assert result.passed and result.endpoints == {"a": "v2", "b": "v2"}
    assert clock.t == 2  # only the settle delay


def test_barrier_waits_for_a_lagging_apiserver_then_fails_naming_it():
    a, lagging = FakeCluster(), FakeCluster()
    for c in (a, lagging):
        c.add_crd()
    lagging.stale_storage_view[NAME] = "v1"
    clock = Clock(t=0.0)
    with pytest.raises(CrdOpsError) as err:
        wait_for_storage_version({"https://a": a, "https://b": lagging}, get_crd(a, NAME), timeout=5,
                                 clock=clock, sleep=clock.sleep)
    assert "https://b (reports v1)" in str(err.value) and "https://a" not in str(err.value).split("reports v1")[1]
    assert clock.t >= 5


def test_barrier_passes_once_the_lagging_apiserver_catches_up():
    a, lagging = FakeCluster(), FakeCluster()
    for c in (a, lagging):
        c.add_crd()
    lagging.stale_storage_view[NAME] = "v1"
    clock = Clock(t=0.0)

    def sleep(seconds):
        clock.sleep(seconds)
        if clock.t >= 3:
            lagging.stale_storage_view.clear()

    result = wait_for_storage_version({"a": a, "b": lagging}, get_crd(a, NAME), timeout=30, clock=clock, sleep=sleep)
    assert result.passed and 3 <= result.waited_s < 30

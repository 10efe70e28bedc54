"""Fixtures that start real control planes (kube-apiserver + etcd built from Go modules).

One cluster is shared by the whole session (start-up costs seconds); every test works on CRDs with a
group of its own so tests do not see each other's objects.
"""
from __future__ import annotations

import itertools
import os
import signal
import uuid
from pathlib import Path

import pytest

from tests.controlplane.binaries import find_binaries
from tests.controlplane.cluster import Cluster, admin_kube, start_cluster, start_fleet, start_ha_pair
from tests.controlplane.existing import existing_cluster_from_env
from tests.controlplane.kube import Kube

_COUNTER = itertools.count()


@pytest.fixture(scope="session")
def binaries():
    if existing_cluster_from_env() is not None:
        pytest.skip("existing-cluster mode (CRDOPS_KUBECONFIG): this test starts its own control plane")
    return find_binaries()


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("controlplane")


@pytest.fixture(scope="session")
def cluster(workdir) -> Cluster:
    existing = existing_cluster_from_env()
    if existing is not None:
        yield existing
        existing.stop()
        return
    c = start_cluster("test-a", workdir / "test-a", find_binaries())
    yield c
    c.stop()


@pytest.fixture(scope="session")
def kube(cluster) -> Kube:
    return cluster.kube() if hasattr(cluster, "kube") else admin_kube(cluster)


@pytest.fixture(scope="session")
def fleet3(binaries, tmp_path_factory):
    """Three clusters (cluster-a, -b, -c) and one kubeconfig with a context each, shared by the fleet tests
    (AWX, README); each test uses a group of its own."""
    fleet = start_fleet(3, tmp_path_factory.mktemp("fleet3"), binaries)
    yield fleet
    fleet.stop()


@pytest.fixture()
def group() -> str:
    """A fresh API group per test: its objects live under their own etcd prefix."""
    return f"t{next(_COUNTER)}{uuid.uuid4().hex[:6]}.crdops.test"


@pytest.fixture(autouse=True)
def no_module_left_running():
    """A test that fails before reading a background module's result must not leave it writing into the
    shared cluster for the tests after it."""
    yield
    from tests.integration.modrun import stop_leftovers
    stopped = stop_leftovers()
    if stopped:
        print(f"stopped module runs this test left running: {stopped}")


def pytest_report_header(config):
    return [f"control plane cache: {os.environ.get('CRDOPS_CACHE', '~/.cache/crdops')}"]


def pytest_sessionstart(session):
    from tests.integration import reliability
    reliability.ROWS_FILE.unlink(missing_ok=True)


def pytest_sessionfinish(session, exitstatus):
    """`make docs-reliability` sets CRDOPS_WRITE_DOCS=1: a green full run regenerates docs/reliability.md."""
    from tests.integration import reliability
    if os.environ.get("CRDOPS_WRITE_DOCS") == "1" and exitstatus == 0 and reliability.ROWS_FILE.exists():
        reliability.render(reliability.ROWS_FILE, Path(__file__).resolve().parents[2] / "docs" / "reliability.md")


@pytest.fixture()
def ha(binaries, tmp_path):
    """Two real apiservers on one etcd (contexts ha-0, ha-1), of this test alone; a member a test stopped with
    SIGSTOP is resumed before the pair stops."""
    pair = start_ha_pair("ha", tmp_path / "ha", binaries)
    yield pair
    for kas in pair.apiservers:  # never leave a stopped process behind
        if kas.process.alive():
            os.kill(kas.process.pid, signal.SIGCONT)
    pair.stop()

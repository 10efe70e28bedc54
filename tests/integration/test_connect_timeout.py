"""An unreachable cluster fails fast, naming it: connect_timeout (default 10 s), not the 120 s retry deadline."""
from __future__ import annotations

import socket
import threading
import time

import pytest
import yaml

from tests.integration import reliability
from tests.integration.modrun import run_module


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def silent_server():
    """Accepts TCP connections and never says a word (a hung apiserver or a load balancer with no backend)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    for conn in held:
        conn.close()
    server.close()


def kubeconfig_for(tmp_path, cluster, port: int) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod-eu-1",
        "clusters": [{"name": "prod-eu-1", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                       "certificate-authority": str(cluster.pki.ca_cert)}}],
        "users": [{"name": "u", "user": {"client-certificate": str(cluster.pki.admin_cert),
                                         "client-key": str(cluster.pki.admin_key)}}],
        "contexts": [{"name": "prod-eu-1", "context": {"cluster": "prod-eu-1", "user": "u"}}]}))
    return str(path)


MODULES = {
    "crd_storage_info": {"names": ["widgets.example.com"]},
    "crd_stored_versions_trim": {"names": ["widgets.example.com"]},
    "crd_storage_verify": {"names": ["widgets.example.com"]},
    "crd_storage_migrate": {"names": ["widgets.example.com"]},
}


@pytest.mark.parametrize("module", sorted(MODULES))
@pytest.mark.parametrize("how", ["closed port", "silent server"])
def test_unreachable_cluster_fails_within_15s_naming_it(cluster, tmp_path, silent_server, module, how):
    port = closed_port() if how == "closed port" else silent_server
    args = dict(MODULES[module], kubeconfig=kubeconfig_for(tmp_path, cluster, port))
    if module == "crd_storage_verify":
        args["etcd_url"] = cluster.etcd_url
    # what this busy machine adds (module start, imports, kubeconfig): the same run with a 1 s connect timeout
    started = time.monotonic()
    assert run_module(module, dict(args, connect_timeout=1), timeout=60)["failed"]
    overhead = time.monotonic() - started - 1
    started = time.monotonic()
    result = run_module(module, args, timeout=60)
    took = time.monotonic() - started
    assert result.get("failed") is True, result
    msg = result["msg"]
    assert "cluster prod-eu-1" in msg and "unreachable" in msg and "connect_timeout 10s" in msg, msg
    assert 9 <= took and took - overhead < 13, f"{module} gave up after {took:.1f}s ({overhead:.1f}s start-up)"
    assert took < 25, f"{module} gave up after {took:.1f}s"
    if module == "crd_storage_migrate":
        reliability.record(f"unreachable cluster ({how}), default connect_timeout",
                           f"failed in {took:.0f}s ({overhead:.0f}s of it module start-up on a loaded test machine) naming the "
                           "cluster (was: 120 s in silence)", 0, 0, None)


def test_connect_timeout_is_configurable_and_env_settable(cluster, tmp_path):
    args = dict(MODULES["crd_storage_info"], kubeconfig=kubeconfig_for(tmp_path, cluster, closed_port()))
    started = time.monotonic()
    result = run_module("crd_storage_info", dict(args, connect_timeout=3))
    assert result["failed"] and "connect_timeout 3s" in result["msg"] and time.monotonic() - started < 6
    started = time.monotonic()
    result = run_module("crd_storage_info", args, env={"CRDOPS_CONNECT_TIMEOUT": "2"})
    assert result["failed"] and "connect_timeout 2s" in result["msg"] and time.monotonic() - started < 5

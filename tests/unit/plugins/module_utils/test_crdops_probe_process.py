# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The latency probe's own process: what it is told (settings from the run's transport, secrets on the pipe only),
what it says back (samples on the run's clock, errors, the FlowSchema), a token refreshed, the fallback to a
thread here when it cannot reach the apiserver the same way or ends mid-run. Against a local HTTP server."""
from __future__ import annotations

import json
import os
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import urllib3
from urllib3._collections import HTTPHeaderDict

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import HttpTransport
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import probe_child
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.latency_probe import (
    WARMUP_REQUESTS, LatencyProbe)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.probe_process import (
    BOOTSTRAP, ProcessSampler, child_settings, child_source)

LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/crdops-pass-x"


class Apiserver(object):
    """A local HTTP server answering GETs of LEASE for the current token; each request's headers are kept."""

    def __init__(self):
        self.token = "s3cret-one"
        self.seen = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (http.server's name)
                server.seen.append((self.path, self.headers.get_all("Impersonate-Group"), dict(self.headers)))
                ok = self.path == LEASE and self.headers.get("Authorization") == "Bearer " + server.token
                body = b'{"kind":"Lease"}' if ok else b'{"kind":"Status","code":401}'
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Kubernetes-PF-FlowSchema-UID", "flow-uid-1")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def transport(self):
        headers = HTTPHeaderDict()
        headers["User-Agent"] = "crdops.migration"
        headers["Impersonate-User"] = "alice"
        headers.add("Impersonate-Group", "team-a")
        headers.add("Impersonate-Group", "team-b")
        return HttpTransport(urllib3.PoolManager(), self.url, cluster_label="test", headers=headers,
                             auth_header=lambda: "Bearer " + self.token)


@pytest.fixture()
def apiserver():
    server = Apiserver()
    yield server
    server.httpd.shutdown()


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def idle_count(probe):
    with probe._cond:
        return len(probe._idle)


def never():
    raise AssertionError("the probe ran in-process")


def test_the_child_gets_as_the_run_does_and_reports_samples_on_the_runs_clock(apiserver):
    before = time.monotonic()
    probe = LatencyProbe(never, 2.0, interval=0.01, sampler=ProcessSampler(apiserver.transport().wire(), LEASE))
    probe.start()
    try:
        assert probe.process == "separate" and probe.sampler.pid != os.getpid()
        with open("/proc/%d/cmdline" % probe.sampler.pid, "rb") as fh:
            argv = fh.read().split(b"\0")[:-1]
        assert argv == [sys.executable.encode(), b"-I", b"-c", BOOTSTRAP.encode()]  # no secret on the command line
        assert wait_for(lambda: idle_count(probe) >= 20)
        probe.measure_idle(lambda: False)
    finally:
        probe.stop()
    after = time.monotonic()
    path, groups, headers = apiserver.seen[-1]
    assert path == LEASE and groups == ["team-a", "team-b"]  # a repeated header stays repeated
    assert headers["Authorization"] == "Bearer s3cret-one" and headers["User-Agent"] == "crdops.migration"
    assert headers["Impersonate-User"] == "alice" and headers["Accept"] == "application/json"
    assert "Accept-Encoding" not in headers and "Connection" not in headers
    # the first answers of the new connection are not samples; every sample started within the test, on its clock
    assert probe.baseline.samples <= len(apiserver.seen) - WARMUP_REQUESTS
    assert all(before <= started <= after for started, _lat in probe._window) and probe._idle
    summary = probe.summary()
    assert summary["process"] == "separate" and summary["pid"] != os.getpid() and summary["errors"] == 0
    assert summary["flow_schema"] == "flow-uid-1" and "s3cret" not in json.dumps(summary)
    assert probe.sampler._proc.poll() is not None and not probe.sampler._reader.is_alive()  # stop() ended it


def test_a_refreshed_token_reaches_the_child_after_a_401(apiserver):
    probe = LatencyProbe(never, 2.0, interval=0.01, sampler=ProcessSampler(apiserver.transport().wire(), LEASE))
    probe.start()
    try:
        assert wait_for(lambda: idle_count(probe) >= 5)
        apiserver.token = "s3cret-two"  # the kubeconfig's refresh hook now gives another token
        assert wait_for(lambda: probe.errors >= 1)
        answered = idle_count(probe)
        assert wait_for(lambda: idle_count(probe) >= answered + 5)
    finally:
        probe.stop()
    assert apiserver.seen[-1][2]["Authorization"] == "Bearer s3cret-two"
    assert probe.errors >= 1  # the 401s until the new value arrived: errors, not latencies


def test_a_child_that_ends_mid_run_leaves_the_probe_in_process_and_says_so(apiserver):
    calls = []
    probe = LatencyProbe(lambda: calls.append(1), 2.0, interval=0.01,
                         sampler=ProcessSampler(apiserver.transport().wire(), LEASE))
    probe.start()
    try:
        pid = probe.sampler.pid
        os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: len(calls) >= 5)
        assert probe.process.startswith("in-process (the probe process ended (exit code -9)")
        assert probe.summary()["pid"] == os.getpid()
    finally:
        probe.stop()


@pytest.mark.parametrize("wire_change, why", [
    ({"proxy": True, "pool": "ProxyManager"}, "a proxy"),
    ({"pool": "SOCKSProxyManager"}, "connection pool SOCKSProxyManager"),
    ({"pool_options": {"ssl_context": object()}}, "connection option ssl_context"),
    ({"pool_options": {"assert_hostname": "other.example"}}, "connection option assert_hostname"),
])
def test_what_the_child_cannot_do_the_same_way_runs_in_process_with_the_reason(apiserver, wire_change, why):
    wire = dict(apiserver.transport().wire(), **wire_change)
    assert child_settings(wire, LEASE, 0.05) == (None, why)
    calls = []
    probe = LatencyProbe(lambda: calls.append(1), 2.0, interval=0.01, sampler=ProcessSampler(wire, LEASE)).start()
    try:
        assert wait_for(lambda: len(calls) >= 3) and probe.process == "in-process (%s)" % why
    finally:
        probe.stop()


def test_no_wire_no_executable_or_no_python_is_in_process_too(apiserver, tmp_path):
    wire = apiserver.transport().wire()
    not_python = tmp_path / "not-python"
    not_python.write_text("#!/bin/sh\nexit 3\n")
    not_python.chmod(0o755)
    for sampler, why in ((ProcessSampler(None, LEASE), "a transport that does not say how it connects"),
                         (ProcessSampler(wire, LEASE, executable=""), "no Python executable to start it with"),
                         (ProcessSampler(wire, LEASE, executable=str(not_python)), "probe process")):
        probe = LatencyProbe(lambda: None, 2.0, interval=0.01, sampler=sampler).start()
        probe.stop()
        # a child that is gone at once: "ended before its first answer", or its pipe broken while we wrote to it
        assert probe.process.startswith("in-process (%s" % why), probe.process


def test_the_childs_tls_settings_are_the_connection_pools():
    """kubernetes' RESTClientObject passes these to urllib3's PoolManager: the child gets the same (the key's path,
    never its content, and only on its standard input)."""
    wire = {"base_url": "https://10.0.0.1:6443/prefix", "headers": [("User-Agent", "crdops.migration"),
                                                                    ("Connection", "close")],
            "pool": "PoolManager", "proxy": False, "connect_timeout": 30.0, "auth_header": None,
            "pool_options": {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": "/ca.crt", "ca_cert_data": None,
                             "cert_file": "/c.crt", "key_file": "/c.key", "server_hostname": "kubernetes",
                             "maxsize": 10, "socket_options": [(1, 9, 1)]}}
    settings, why = child_settings(wire, LEASE, 0.05)
    assert why == "" and settings["url"] == "https://10.0.0.1:6443/prefix" and settings["path"] == LEASE
    assert settings["tls"] == {"verify": True, "check_hostname": True, "ca_file": "/ca.crt", "ca_data": None,
                               "cert_file": "/c.crt", "key_file": "/c.key", "server_hostname": "kubernetes"}
    assert settings["headers"] == [["User-Agent", "crdops.migration"], ["Accept", "application/json"]]
    assert settings["timeout"] == 10.0
    insecure = dict(wire, pool_options={"cert_reqs": "CERT_NONE", "assert_hostname": False})
    assert child_settings(insecure, LEASE, 0.05)[0]["tls"]["verify"] is False
    assert child_settings(dict(wire, pool_options={"assert_hostname": False}), LEASE, 0.05)[0]["tls"][
        "check_hostname"] is False
    ctx = probe_child.tls_context({"verify": False})
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname
    client = probe_child.Client(dict(settings, tls={"verify": False}))
    assert (client.host, client.port, client.path, client.sni) == ("10.0.0.1", 6443, "/prefix" + LEASE, "10.0.0.1")


class BytesLoader(object):
    """ansible-core's collection loader (a module run in ansible-playbook's worker) gives a module's source as bytes."""

    def get_source(self, fullname):
        with open(probe_child.__file__, "rb") as fh:
            return fh.read()


def test_the_child_program_is_its_own_text_and_says_no_secret_when_it_fails():
    source = child_source()
    assert "def main()" in source and "import ansible" not in source and "from ." not in source
    compile(source, "crdops-probe-child", "exec")
    as_bytes = type("Mod", (), {"__loader__": BytesLoader(), "__name__": "x", "__file__": "/nonexistent"})
    assert child_source(as_bytes) == source
    assert probe_child.failure_words(ValueError("Invalid header value b'Bearer s3cret'")) == "ValueError"
    missing = FileNotFoundError(2, "No such file or directory", "/keys/client.key")
    assert probe_child.failure_words(missing) == "FileNotFoundError: No such file or directory (/keys/client.key)"


def test_a_child_that_cannot_start_its_client_reports_one_fatal_line(tmp_path, apiserver):
    wire = dict(apiserver.transport().wire(), base_url="https://127.0.0.1:1",
                pool_options={"cert_reqs": "CERT_REQUIRED", "cert_file": str(tmp_path / "missing.crt")})
    probe = LatencyProbe(lambda: None, 2.0, interval=0.01, sampler=ProcessSampler(wire, LEASE)).start()
    probe.stop()
    assert probe.process.startswith("in-process (probe process: FileNotFoundError: No such file or directory")

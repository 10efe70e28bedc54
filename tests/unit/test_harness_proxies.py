"""The test harness's own fault tools behave as documented (no control plane needed)."""
from __future__ import annotations

import json
import socket
import threading
import time

from tests.controlplane.delay_proxy import DelayProxy
from tests.controlplane.fault_front import FaultFront
from tests.controlplane.haproxy import HAProxy
from tests.controlplane.pki import ensure_pki


def _echo_server() -> socket.socket:
    srv = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _peer = srv.accept()
            except OSError:
                return

            def echo(conn=conn):
                with conn:
                    while data := conn.recv(1024):
                        conn.sendall(data)
            threading.Thread(target=echo, daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_delay_proxy_passes_through_then_delays_in_order_then_passes_through_again():
    srv = _echo_server()
    proxy = DelayProxy("127.0.0.1", srv.getsockname()[1]).start()
    try:
        conn = socket.create_connection((proxy.host, proxy.port))
        start = time.monotonic()
        conn.sendall(b"a")
        assert conn.recv(10) == b"a" and time.monotonic() - start < 0.5
        proxy.lag(0.6)
        start = time.monotonic()
        conn.sendall(b"b")
        assert conn.recv(10) == b"b" and 0.55 <= time.monotonic() - start < 2
        proxy.lag(0)
        conn.sendall(b"c")
        assert conn.recv(10) == b"c"
        conn.close()
    finally:
        proxy.stop()
        srv.close()


def test_fault_front_answers_only_chosen_restore_patches(tmp_path):
    pki = ensure_pki(tmp_path / "pki")
    forms = {}
    for form in ("plain", "status_other", "status_self"):
        front = FaultFront("https://127.0.0.1:1", pki, "g.test", "v2", "gadgets", lambda n: n.endswith("3"), form)
        try:
            assert front.fault_for("PATCH", "/apis/g.test/v2/gadgets/obj-000002") is None
            assert front.fault_for("PATCH", "/apis/g.test/v1/gadgets/obj-000003") is None  # other version
            assert front.fault_for("GET", "/apis/g.test/v2/gadgets/obj-000003") is None    # a read
            assert front.fault_for("PATCH", "/apis/g.test/v2/gadgets/obj-000003?dryRun=All") is None
            forms[form] = front.fault_for("PATCH", "/apis/g.test/v2/namespaces/ns/gadgets/obj-000003")
            assert front.faulted == {"obj-000003"}
        finally:
            front.stop()
    assert forms["plain"] == (404, "text/plain; charset=utf-8", b"404 page not found\n")
    other, this = json.loads(forms["status_other"][2]), json.loads(forms["status_self"][2])
    assert other["reason"] == this["reason"] == "NotFound"
    assert other["details"]["name"] == "obj-000003-other" and this["details"]["name"] == "obj-000003"


def test_haproxy_config_is_tcp_round_robin_over_every_backend(tmp_path):
    lb = HAProxy(tmp_path, [("127.0.0.1", 6443), ("127.0.0.2", 6444)])
    lb.port = 7000
    cfg = lb.config()
    assert "mode tcp" in cfg and "balance roundrobin" in cfg and "bind 127.0.0.1:7000" in cfg
    assert "server kas0 127.0.0.1:6443" in cfg and "server kas1 127.0.0.2:6444" in cfg
    assert "check" not in cfg  # no health checks: a lagging member still gets its share

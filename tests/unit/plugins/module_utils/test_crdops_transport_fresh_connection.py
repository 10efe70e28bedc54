# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The settle fallback's polls each open a new TCP connection, so a load balancer may route them elsewhere."""
from __future__ import annotations

import http.server
import threading

import urllib3

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import HttpTransport


class CountingHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the client asks to close
    connections = []

    def setup(self):
        CountingHandler.connections.append(self.client_address)
        super().setup()

    def do_GET(self):
        body = b'{"major": "1"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_new_connection_per_request_opens_one_tcp_connection_per_poll():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d" % server.server_address[1]
        kept = HttpTransport(urllib3.PoolManager(maxsize=2), url, cluster_label="t")
        for _attempt in range(5):
            assert kept.request("GET", "/version").ok
        assert len(CountingHandler.connections) == 1  # the pool keeps one connection alive
        CountingHandler.connections.clear()
        fresh = HttpTransport(urllib3.PoolManager(maxsize=2), url, cluster_label="t").for_endpoint(
            url, new_connection_per_request=True)
        for _attempt in range(5):
            assert fresh.request("GET", "/version").ok
        assert len(CountingHandler.connections) == 5
    finally:
        server.shutdown()
        server.server_close()

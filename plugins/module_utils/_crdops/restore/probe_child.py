# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The latency probe's own process: this file's text is the whole program (probe_process.py starts it).

It runs in a fresh interpreter that cannot import the collection (a module runs from AnsiballZ's zip), so it uses
the standard library alone and imports nothing of the engine. It GETs one path every ``interval`` seconds on one
kept-alive connection, timestamps each request itself (time.monotonic: the run's clock on Linux, and
probe_process.py measures any offset) and reports over stdout, one JSON object a line:

    {"hello": pid, "t": now}            once, when it is ready
    {"s": started, "l": seconds}        an answered GET (not the first ``warmup`` of a new connection)
    {"e": "HTTP 403"}                   a failed GET; ``"auth": true`` with a 401: send a fresh Authorization
    {"flow": uid}                       once: the API Priority and Fairness FlowSchema the apiserver classified it in
    {"fatal": "..."}                    it cannot go on (then it exits)

Its standard input brings one JSON line of settings (the Authorization value among them: never on the command
line), then ``{"auth": value}`` lines when the run's token changes; end of input (the run stopped it, or ended)
stops it. Nothing it prints carries a header value.
"""

from __future__ import annotations

import http.client
import json
import os
import ssl
import sys
import threading
import time
from typing import IO, Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

FLOW_HEADER = "X-Kubernetes-PF-FlowSchema-UID"


class Reporter:
    """One JSON object per line on stdout, whole lines only."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.lock = threading.Lock()

    def send(self, **fields: Any) -> None:
        with self.lock:
            self.out.write(json.dumps(fields, separators=(",", ":")) + "\n")
            self.out.flush()


def tls_context(tls: Dict[str, Any]) -> ssl.SSLContext:
    """The connection pool's TLS options, as urllib3 applies them: verification, CA, client certificate."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if tls.get("verify", True):
        ctx.check_hostname = bool(tls.get("check_hostname", True))
        if tls.get("ca_file") or tls.get("ca_data"):
            ctx.load_verify_locations(cafile=tls.get("ca_file"), cadata=tls.get("ca_data"))
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.get("cert_file"):
        ctx.load_cert_chain(tls["cert_file"], tls.get("key_file"))
    return ctx


class TlsConnection(http.client.HTTPSConnection):
    """HTTPS whose certificate is checked against ``sni`` (the kubeconfig's tls-server-name) when one is given."""

    def __init__(self, host: str, port: int, timeout: float, context: ssl.SSLContext, sni: str) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.tls, self.sni = context, sni

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP, with TCP_NODELAY
        self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.sni)


class Client:
    """One kept-alive connection to the apiserver; a new one after a failure."""

    def __init__(self, config: Dict[str, Any]) -> None:
        url = urlsplit(config["url"])
        self.https = url.scheme == "https"
        self.host, self.port = url.hostname or "", url.port or (443 if self.https else 80)
        self.path = url.path.rstrip("/") + config["path"]
        self.timeout = float(config.get("timeout") or 10.0)
        tls = config.get("tls") or {}
        self.context = tls_context(tls) if self.https else None
        self.sni = tls.get("server_hostname") or self.host
        self.warmup = int(config.get("warmup") or 0)
        self.warm_left = 0
        self.conn: Optional[http.client.HTTPConnection] = None

    def get(self, headers: List[Tuple[str, str]]) -> Tuple[int, Optional[str]]:
        """(status, FlowSchema UID) of one GET, its body read so that the connection stays usable."""
        if self.conn is None:
            self.conn = self._connect()
            self.warm_left = self.warmup
        self.conn.putrequest("GET", self.path, skip_accept_encoding=True)
        for name, value in headers:
            self.conn.putheader(name, value)
        self.conn.endheaders()
        resp = self.conn.getresponse()
        resp.read()
        if resp.will_close:
            self.close()
        return resp.status, resp.getheader(FLOW_HEADER)

    def _connect(self) -> http.client.HTTPConnection:
        if self.context is not None:
            return TlsConnection(self.host, self.port, self.timeout, self.context, self.sni)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class ChildProbe:
    """The loop: a GET every ``interval`` seconds until the run closes our standard input."""

    def __init__(self, config: Dict[str, Any], out: Reporter) -> None:
        self.client = Client(config)
        self.headers = [(str(k), str(v)) for k, v in config.get("headers") or []]
        self.auth: Optional[str] = config.get("auth")
        self.interval = float(config.get("interval") or 0.05)
        self.out = out
        self.stop = threading.Event()
        self.flow_sent = False

    def listen(self, commands: IO[str]) -> None:
        """Fresh Authorization values from the run; the end of input stops the probe."""
        for line in commands:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and "auth" in msg:
                self.auth = msg["auth"]
        self.stop.set()

    def loop(self) -> None:
        next_at = time.monotonic()
        while not self.stop.is_set():
            self.sample_once()
            next_at += self.interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - self.interval)  # after a slow answer: no burst to catch up

    def sample_once(self) -> None:
        headers = self.headers + ([("Authorization", self.auth)] if self.auth else [])
        started = time.monotonic()
        try:
            status, flow = self.client.get(headers)
        except (OSError, http.client.HTTPException) as exc:  # ssl.SSLError and timeouts are OSErrors
            self.client.close()
            self.out.send(e=type(exc).__name__)
            return
        latency = time.monotonic() - started
        if not 200 <= status < 300:
            self.out.send(e="HTTP %d" % status, auth=status == 401)
            return
        if flow and not self.flow_sent:
            self.flow_sent = True
            self.out.send(flow=flow)
        if self.client.warm_left > 0:  # the new connection's TLS handshake and first token review: not counted
            self.client.warm_left -= 1
            return
        self.out.send(s=started, l=latency)


def main() -> None:
    """Read the settings, say hello, sample until standard input ends; any failure is one ``fatal`` line."""
    out = Reporter(sys.stdout)
    try:
        probe = ChildProbe(json.loads(sys.stdin.readline()), out)
        out.send(hello=os.getpid(), t=time.monotonic())
        threading.Thread(target=probe.listen, args=(sys.stdin,), daemon=True).start()
        probe.loop()
    except BrokenPipeError:  # the run is gone
        return
    except Exception as exc:  # one line to the run, never a traceback
        try:
            out.send(fatal=failure_words(exc))
        except OSError:
            pass


def failure_words(exc: BaseException) -> str:
    """What went wrong, without the exception's own text unless it is an OS error's: a ValueError of a header
    quotes the header's value, and that may be the token."""
    if isinstance(exc, OSError) and exc.strerror:
        return "%s: %s%s" % (type(exc).__name__, exc.strerror, " (%s)" % exc.filename if exc.filename else "")
    return type(exc).__name__

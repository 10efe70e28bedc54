"""A TLS front for one real apiserver that answers chosen re-store writes with a 404 of its own.

A fault a real server cannot be made to produce on cue: an apiserver behind a load balancer that has not
loaded a CRD's new version yet answers a write at that version `404` with the plain-text body
`404 page not found` (seen on 1.37.2); a Status NotFound can also name some other object or be wrong
about this one. Everything else is passed to the real apiserver unchanged (as the admin user), so the
cluster, the objects and etcd are real; only the chosen answers are not.

Answer forms (`form`):
  plain         404, text/plain, "404 page not found" (a member that lags)
  status_other  404, JSON Status NotFound whose details name ANOTHER object
  status_self   404, JSON Status NotFound naming this very object, although it exists (a GET shows it)
"""
from __future__ import annotations

import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import urllib3

from .pki import Pki

FORMS = ("plain", "status_other", "status_self")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate", "content-length", "host"}


def not_found_status(group: str, plural: str, name: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{plural}.{group} "{name}" not found', "reason": "NotFound",
            "details": {"name": name, "group": group, "kind": plural}, "code": 404}


class FaultFront:
    """Listen with TLS on 127.0.0.1 (the serving cert covers it); forward to `upstream` (https URL).

    PATCH requests to `/apis/<group>/<version>/<plural>/<name>` (cluster scope) or the namespaced form,
    for a `name` where `pick(name)` is true, are answered by the front in `form`; `faulted` holds the
    names answered so, `forwarded` counts the requests passed through."""

    def __init__(self, upstream: str, pki: Pki, group: str, version: str, plural: str,
                 pick: Callable[[str], bool], form: str = "plain") -> None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}")
        self.upstream = upstream.rstrip("/")
        self.group, self.plural, self.form, self.pick = group, plural, form, pick
        self._target = re.compile(rf"^/apis/{re.escape(group)}/{re.escape(version)}/(?:namespaces/[^/]+/)?"
                                  rf"{re.escape(plural)}/([^/?]+)(?:\?.*)?$")
        self.faulted: set[str] = set()
        self.forwarded = 0
        self._lock = threading.Lock()
        self._pool = urllib3.PoolManager(maxsize=32, cert_reqs="CERT_REQUIRED", ca_certs=str(pki.ca_cert),
                                         cert_file=str(pki.admin_cert), key_file=str(pki.admin_key),
                                         retries=False, timeout=urllib3.Timeout(connect=5, read=300))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
        ctx.load_verify_locations(str(pki.ca_cert))
        ctx.verify_mode = ssl.CERT_REQUIRED  # clients prove who they are, as to the apiserver itself
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self._serving = False

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> "FaultFront":
        self._serving = True
        threading.Thread(target=self._server.serve_forever, name="fault-front", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._serving:  # shutdown() waits for serve_forever: only when it runs
            self._server.shutdown()
            self._serving = False
        self._server.server_close()
        self._pool.clear()

    def fault_for(self, method: str, path: str) -> tuple[int, str, bytes] | None:
        """The answer the front gives itself to this request, or None to forward it."""
        # a re-store write: a PATCH of one object at the chosen version, not a server-side dry-run
        match = self._target.match(path) if method == "PATCH" and "dryRun=" not in path else None
        if not match or not self.pick(match.group(1)):
            return None
        name = match.group(1)
        with self._lock:
            self.faulted.add(name)
        if self.form == "plain":
            return 404, "text/plain; charset=utf-8", b"404 page not found\n"
        named = f"{name}-other" if self.form == "status_other" else name
        return 404, "application/json", json.dumps(not_found_status(self.group, self.plural, named)).encode()

    def _handler_class(self):
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args) -> None:  # quiet: the test output is the report
                pass

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = front.fault_for(self.command, self.path)
                if fault:
                    status, ctype, data = fault
                    self._send(status, [("Content-Type", ctype)], data)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                with front._lock:
                    front.forwarded += 1
                resp = front._pool.request(self.command, front.upstream + self.path, body=body, headers=headers,
                                           preload_content=False)
                try:
                    out = [(k, v) for k, v in resp.headers.items() if k.lower() not in HOP_BY_HOP]
                    if resp.headers.get("Content-Length") is not None or "watch=" not in self.path:
                        self._send(resp.status, out, resp.read(decode_content=False))
                        return
                    self._stream(resp.status, out, resp)  # a watch: pass events on as they come
                finally:
                    resp.release_conn()

            def _stream(self, status: int, headers: list[tuple[str, str]], resp) -> None:
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for chunk in resp.stream(4096, decode_content=False):
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        return Handler

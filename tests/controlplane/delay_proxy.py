"""A TCP proxy that delays one direction: makes an apiserver see etcd late, without freezing it.

Put between a kube-apiserver and etcd, it passes bytes through unchanged until `lag(seconds)` is called;
from then on every chunk etcd sends to that apiserver is delivered `seconds` later (in order). The
apiserver keeps running and answering requests, but its informers (the CRD informer among them) learn
each change late: a lagging member of an HA control plane. Requests from the apiserver to etcd are never
delayed, so its writes land at once; only what it learns back (responses, watch events) is late.

Why not SIGSTOP: a stopped process answers nothing, so a client sees timeouts, not stale answers.
Keep the delay under the etcd client's 10 s keepalive timeout (grpc keepalive), or the apiserver
drops the connection and reconnects instead of lagging.
"""
from __future__ import annotations

import collections
import socket
import threading
import time
from dataclasses import dataclass, field

CHUNK = 64 * 1024


@dataclass
class _Link:
    """One proxied connection: downstream (apiserver side) and upstream (etcd side) sockets."""
    down: socket.socket
    up: socket.socket
    queue: collections.deque = field(default_factory=collections.deque)  # (deliver_at, bytes) upstream->down
    cond: threading.Condition = field(default_factory=threading.Condition)
    closed: bool = False

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for sock in (self.down, self.up):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class DelayProxy:
    """Listen on `listen_host`:port, forward to `target`; `lag(s)` delays target->client chunks by s seconds."""

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._server = socket.create_server((listen_host, 0))
        self.host, self.port = self._server.getsockname()[:2]
        self._delay = 0.0
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._stopped = False
        self.delivered_chunks = 0
        self.delayed_chunks = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def delay(self) -> float:
        return self._delay

    def start(self) -> "DelayProxy":
        threading.Thread(target=self._accept_loop, name="delay-proxy-accept", daemon=True).start()
        return self

    def lag(self, seconds: float) -> None:
        """From now on, chunks from the target arrive `seconds` late (0 = pass-through again).

        Chunks already queued keep their delivery time; order is always kept, so switching off
        releases the backlog first."""
        self._delay = max(0.0, float(seconds))

    def stop(self) -> None:
        self._stopped = True
        try:
            self._server.close()
        except OSError:
            pass
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                down, _peer = self._server.accept()
            except OSError:
                return
            try:
                up = socket.create_connection(self.target, timeout=5)
                up.settimeout(None)
            except OSError:
                down.close()
                continue
            for sock in (down, up):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(down, up)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._pump_up, args=(link,), daemon=True).start()
            threading.Thread(target=self._read_down, args=(link,), daemon=True).start()
            threading.Thread(target=self._deliver_down, args=(link,), daemon=True).start()

    def _pump_up(self, link: _Link) -> None:
        """apiserver -> etcd: immediate (its writes and requests are not delayed)."""
        try:
            while True:
                data = link.down.recv(CHUNK)
                if not data:
                    break
                link.up.sendall(data)
        except OSError:
            pass
        link.close()

    def _read_down(self, link: _Link) -> None:
        """etcd -> apiserver: stamp each chunk with its delivery time and queue it."""
        last = 0.0
        try:
            while True:
                data = link.up.recv(CHUNK)
                if not data:
                    break
                delay = self._delay
                # never overtake an earlier chunk: a byte stream must stay in order
                last = max(last, time.monotonic() + delay)
                if delay:
                    self.delayed_chunks += 1
                with link.cond:
                    link.queue.append((last, data))
                    link.cond.notify_all()
        except OSError:
            pass
        with link.cond:
            link.queue.append((last, b""))  # end of stream, delivered in order
            link.cond.notify_all()

    def _deliver_down(self, link: _Link) -> None:
        try:
            while True:
                with link.cond:
                    while not link.queue and not link.closed:
                        link.cond.wait()
                    if link.closed:
                        return
                    deliver_at, data = link.queue[0]
                    wait = deliver_at - time.monotonic()
                    if wait > 0:
                        link.cond.wait(wait)
                        continue
                    link.queue.popleft()
                if not data:
                    break
                link.down.sendall(data)
                self.delivered_chunks += 1
        except OSError:
            pass
        link.close()

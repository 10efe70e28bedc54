"""HAProxy (the Debian package, /usr/sbin/haproxy) in front of an HA control plane's apiservers.

TCP mode with TLS passthrough: the client's TLS session ends at an apiserver, so the client verifies the
apiserver's serving cert (valid for 127.0.0.1, the address the frontend listens on) and authenticates
with its own client cert, as behind a cloud load balancer. `balance roundrobin` hands each new
connection to the next apiserver, so a client with several connections (the re-store's workers) writes
through every member. No health checks: a lagging apiserver still accepts connections and answers, which
is exactly what a load balancer cannot see.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from .processes import ManagedProcess, free_port, port_is_listening

HAPROXY = "/usr/sbin/haproxy"

CONFIG = """\
global
    maxconn 512

defaults
    mode tcp
    timeout connect 5s
    # watches and long LISTs stay open for minutes
    timeout client 1h
    timeout server 1h

frontend apiserver
    bind {bind}:{port}
    default_backend apiservers

backend apiservers
    balance roundrobin
{servers}
"""


class HAProxyMissing(RuntimeError):
    pass


def haproxy_binary() -> str:
    path = shutil.which("haproxy") or (HAPROXY if Path(HAPROXY).exists() else None)
    if not path:
        raise HAProxyMissing("haproxy not found: install the Debian package (tools/setup.sh does, as root: "
                             "apt-get install -y haproxy)")
    return path


class HAProxy:
    """One haproxy process; `url` is the frontend that a kubeconfig names as its server."""

    def __init__(self, folder: Path, backends: list[tuple[str, int]], bind: str = "127.0.0.1") -> None:
        self.folder = Path(folder)
        self.backends = list(backends)
        self.bind = bind
        self.port = 0
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"https://{self.bind}:{self.port}"

    def config(self) -> str:
        servers = "\n".join(f"    server kas{i} {host}:{port}" for i, (host, port) in enumerate(self.backends))
        return CONFIG.format(bind=self.bind, port=self.port, servers=servers)

    def start(self, timeout: float = 15.0) -> "HAProxy":
        binary = haproxy_binary()
        self.port = self.port or free_port(self.bind)
        self.folder.mkdir(parents=True, exist_ok=True)
        cfg = self.folder / "haproxy.cfg"
        cfg.write_text(self.config())
        # -db: stay in the foreground (ManagedProcess owns it); -c first would only repeat the parse
        self.process = ManagedProcess("haproxy", [binary, "-db", "-f", str(cfg)],
                                      self.folder / "logs" / "haproxy.log").start()
        deadline = time.monotonic() + timeout
        while not port_is_listening(self.bind, self.port):
            if not self.process.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start; log {self.process.log_path}:\n{self.process.log_tail()}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process:
            self.process.stop()

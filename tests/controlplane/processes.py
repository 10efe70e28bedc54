"""Child processes that are always torn down: on stop(), at interpreter exit and on SIGINT/SIGTERM."""
from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

_LIVE: set["ManagedProcess"] = set()
_LOCK = threading.Lock()
_HANDLERS_INSTALLED = False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_listening(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def _stop_all(*_args) -> None:
    for proc in list(_LIVE):
        proc.stop()


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)

            def handler(signum, frame, previous=previous):
                _stop_all()
                if callable(previous):
                    previous(signum, frame)
                else:
                    raise SystemExit(128 + signum)

            signal.signal(sig, handler)


class ManagedProcess:
    """One long-running binary with its output in a log file.

    `detached=True` is for the command-line `up`: the process outlives this Python process and is
    stopped later by pid (see state files in cli.py), so it is not registered for exit-time cleanup.
    """

    def __init__(self, name: str, argv: list[str], log_path: Path, detached: bool = False):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.detached = detached
        self.popen: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> "ManagedProcess":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        if not self.detached:
            _install_handlers()
            with _LOCK:
                _LIVE.add(self)
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, for fault-injection tests (an apiserver dying mid-run)."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout)
        with _LOCK:
            _LIVE.discard(self)


def stop_pid(pid: int, timeout: float = 15.0) -> None:
    """Stop a detached process group started by an earlier `up`."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The latency probe in a process of its own, so that it measures the apiserver and not our interpreter.

On a thread of the writers' interpreter, a probe answer waited for the GIL while our writers decoded and encoded
JSON: the probe read our own queueing as the apiserver's latency (its multiple measured 1.1-1.6 times an outside
client's). Here the GETs are sent and timed by another interpreter; this one only collects the timestamps.

Why a child ``sys.executable`` running probe_child.py's text, and not multiprocessing:
- fork copies a process whose other threads (the stop watcher, the Lease renewal, the pool's connections) may hold
  locks at that moment, and Python 3.12 warns against forking a threaded process; forking before any thread starts
  is not possible here, since a run's probe starts with each pass;
- spawn/forkserver start the child by importing the parent's ``__main__``: under AnsiballZ that is the module
  wrapper, which would run the module again;
- a module runs from AnsiballZ's zip, so a child cannot import module_utils by path. probe_child.py is
  self-contained (standard library only); its text is read through its loader (the zip's included) and sent on
  the child's standard input, after which one JSON line of settings follows. The command line holds only a fixed
  bootstrap: the Authorization value and the client key's path travel on the pipe, never on argv or in a log.
The child authenticates as the run's transport does (client certificate, bearer token, CA, tls-server-name, the
impersonation headers: the same user, so the same API Priority and Fairness flow as our writes); a token the
kubeconfig refreshes (exec plugin, OIDC) is sent again when it changes and whenever the apiserver says 401. What
it cannot do the same way (a proxy, a TLS option it does not know, no pool to read) it does not try: the probe then
runs on a thread here, as before, and its summary says why (``process``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import IO, Any, Callable, Dict, Optional, Tuple

from . import probe_child
from ..kube.transport import JSON
from .latency_probe import WARMUP_REQUESTS, LatencyProbe

START_TIMEOUT_S = 10.0  # for the child's hello: an interpreter starts in well under a second even on a busy host
AUTH_RECHECK_S = 30.0  # how often the run's Authorization value is read again (a refreshed token is sent on)
# the command line: reads the program (a JSON string) from stdin, runs it; nothing else, no secret
BOOTSTRAP = ("import json,sys;g={'__name__':'crdops_probe_child'};"
             "exec(compile(json.loads(sys.stdin.readline()),'crdops-probe-child','exec'),g);g['main']()")
# connection pool options the child reproduces (TLS) or that do not change what a request waits for
TLS_OPTIONS = ("cert_reqs", "ca_certs", "ca_cert_data", "cert_file", "key_file", "server_hostname",
               "assert_hostname")
IGNORED_OPTIONS = ("maxsize", "block", "retries", "timeout", "socket_options")  # socket_options: TCP keepalive


def child_settings(wire: Dict[str, Any], path: str, interval: float) -> Tuple[Optional[Dict[str, Any]], str]:
    """The child's settings from a transport's ``wire()``, or (None, why the child cannot reach the apiserver the
    same way). The Authorization value is added by the caller."""
    if wire.get("proxy") or wire.get("pool") != "PoolManager":
        return None, "a proxy" if wire.get("proxy") else "connection pool %s" % wire.get("pool")
    options = dict(wire.get("pool_options") or {})
    unknown = sorted(k for k in options if k not in TLS_OPTIONS + IGNORED_OPTIONS)
    if unknown:
        return None, "connection option %s" % ", ".join(unknown)
    assert_hostname = options.get("assert_hostname")
    if assert_hostname not in (None, False):
        return None, "connection option assert_hostname"
    verify = str(options.get("cert_reqs", "CERT_REQUIRED")) not in ("CERT_NONE", "0", "VerifyMode.CERT_NONE")
    tls = {"verify": verify, "check_hostname": assert_hostname is not False, "ca_file": options.get("ca_certs"),
           "ca_data": options.get("ca_cert_data"), "cert_file": options.get("cert_file"),
           "key_file": options.get("key_file"), "server_hostname": options.get("server_hostname")}
    # "Connection: close" (a transport made to reach each apiserver behind a balancer) would make every probe GET a
    # new connection: the probe's connection stays open, as the in-process probe's own transport's does
    headers = [[k, v] for k, v in wire.get("headers") or [] if k.lower() not in ("connection", "authorization")]
    headers.append(["Accept", JSON])  # as HttpTransport.request asks for the Lease
    return {"url": wire["base_url"], "path": path, "headers": headers, "tls": tls, "interval": interval,
            "timeout": min(float(wire.get("connect_timeout") or 10.0), 10.0), "warmup": WARMUP_REQUESTS}, ""


def child_source(module: Any = probe_child) -> str:
    """probe_child.py's text, through its loader (AnsiballZ's zip importer has one; ansible-core's collection loader,
    in the worker, gives bytes) or from its file."""
    get_source = getattr(getattr(module, "__loader__", None), "get_source", None)
    text = get_source(module.__name__) if get_source is not None else None
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if not text:
        with open(module.__file__, encoding="utf-8") as fh:
            text = fh.read()
    return str(text)


class ProcessSampler:
    """Runs probe_child.py for a :class:`LatencyProbe` and feeds it the child's samples (``start(probe)``)."""

    def __init__(self, wire: Optional[Dict[str, Any]], path: str, executable: Optional[str] = None) -> None:
        self.wire, self.path = wire, path
        self.executable = sys.executable if executable is None else executable
        self.pid: Optional[int] = None
        self.flow_schema: Optional[str] = None
        self.fatal: Optional[str] = None
        self._proc: Optional[subprocess.Popen[str]] = None
        self._reader: Optional[threading.Thread] = None
        self._hello = threading.Event()
        self._offset = 0.0  # add to a child's timestamp to get the probe's clock
        self._stopping = False
        self._write_lock = threading.Lock()
        self._auth_sent: Optional[str] = None
        self._auth_read_at = 0.0

    def start(self, probe: LatencyProbe) -> Optional[str]:
        """Start the child; None when it answered, else why it could not (the probe then runs in-process)."""
        if self.wire is None:
            return "a transport that does not say how it connects"
        settings, why = child_settings(self.wire, self.path, probe.interval)
        if settings is None:
            return why
        if not self.executable:
            return "no Python executable to start it with"
        try:
            settings["auth"] = self._auth_sent = self._auth_value()
        except Exception as exc:  # the kubeconfig's refresh hook (exec plugin, OIDC): whatever it raises
            return "the run's Authorization value not read: %s" % type(exc).__name__
        self._auth_read_at = probe.clock()
        try:
            self._proc = self._spawn()
            sent_at = probe.clock()
            self._send(json.dumps(child_source()), json.dumps(settings))
        except (OSError, ValueError) as exc:
            self.stop()
            return "probe process not started: %s" % type(exc).__name__
        self._reader = threading.Thread(target=self._read, args=(probe, sent_at), name="crdops-probe-reader",
                                        daemon=True)
        self._reader.start()
        if not self._hello.wait(START_TIMEOUT_S) or self.pid is None:  # no hello: it ended, or hangs
            why = self.fatal or ("ended before its first answer" if self._proc_ended() else
                                 "no answer within %.0f s" % START_TIMEOUT_S)
            self.stop()
            return "probe process: %s" % why
        return None

    def _proc_ended(self) -> bool:
        return self._proc is not None and self._proc.poll() is not None

    def _spawn(self) -> subprocess.Popen[str]:
        """The child: -I (isolated: no PYTHON* variables, no user site, the current folder not on its path) and a
        session of its own, so that the terminal's Ctrl-C reaches the run, which then closes the child's input. The
        AnsiballZ-style run_command cannot serve here: it waits for the command to end, and the engine imports no
        Ansible."""
        # fork+exec in one C call (no Python runs between them): safe beside our other threads, unlike a fork
        return subprocess.Popen(  # pylint: disable=ansible-bad-function
            [str(self.executable), "-I", "-c", BOOTSTRAP], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, encoding="utf-8", bufsize=1, close_fds=True,
            start_new_session=True)

    def _send(self, *lines: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        with self._write_lock:
            for line in lines:
                proc.stdin.write(line + "\n")
            proc.stdin.flush()

    def _auth_value(self) -> Optional[str]:
        auth: Optional[Callable[[], Optional[str]]] = (self.wire or {}).get("auth_header")
        return auth() if auth is not None else None

    def _read(self, probe: LatencyProbe, sent_at: float) -> None:
        proc = self._proc
        stdout: Optional[IO[str]] = proc.stdout if proc is not None else None
        if proc is None or stdout is None:
            return
        for line in stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict):
                self._handle(probe, msg, sent_at)
        code = proc.wait()
        self._hello.set()
        if not self._stopping:
            probe.sampler_lost("the probe process ended (%s)" % (self.fatal or "exit code %s" % code))

    def _handle(self, probe: LatencyProbe, msg: Dict[str, Any], sent_at: float) -> None:
        if "s" in msg:
            probe.record(float(msg["s"]) + self._offset, float(msg["l"]))
        elif "e" in msg:
            probe.count_error()
            if msg.get("auth"):  # 401: the token may have expired, its refresh is due
                self._refresh_auth(probe)
        elif "hello" in msg:
            self._hello_from(probe, msg, sent_at)
        elif "flow" in msg:
            self.flow_schema = str(msg["flow"])
        elif "fatal" in msg:
            self.fatal = str(msg["fatal"])[:300]
        if probe.clock() - self._auth_read_at >= AUTH_RECHECK_S:
            self._refresh_auth(probe)

    def _hello_from(self, probe: LatencyProbe, msg: Dict[str, Any], sent_at: float) -> None:
        """The child's pid, and its clock against the probe's: the same monotonic clock on Linux (its ``t`` falls
        between our send and its hello), else the offset at the midpoint of the exchange."""
        now, theirs = probe.clock(), float(msg.get("t") or 0.0)
        self._offset = 0.0 if sent_at <= theirs <= now else (sent_at + now) / 2.0 - theirs
        self.pid = int(msg["hello"])
        self._hello.set()

    def _refresh_auth(self, probe: LatencyProbe) -> None:
        """Send the run's Authorization value again when it changed (a refreshed token); a failing refresh (an exec
        plugin's error) leaves the child with the value it has."""
        self._auth_read_at = probe.clock()
        try:
            value = self._auth_value()
        except Exception:  # the kubeconfig's refresh hook: whatever it raises, the probe goes on
            return
        if value != self._auth_sent:
            self._auth_sent = value
            try:
                self._send(json.dumps({"auth": value}))
            except OSError:
                pass

    def stop(self) -> None:
        """End the child: its input closes (it stops at once), then a kill after 2 s."""
        self._stopping = True
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        if proc.stdout is not None:
            proc.stdout.close()

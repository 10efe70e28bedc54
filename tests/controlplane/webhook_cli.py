"""Run the test conversion webhook (webhook.WebhookServer) detached, for scenarios that outlive one process.

    python -m tests.controlplane.webhook_cli start --pki DIR/cluster-a/pki --dir DIR/webhook
    python -m tests.controlplane.webhook_cli status --dir DIR/webhook
    python -m tests.controlplane.webhook_cli stop --dir DIR/webhook

`start` launches `serve` in its own session (it survives the caller), waits until it accepts TLS
connections, and prints the state as JSON: pid, port, the conversion spec for a CRD
(`spec.conversion`, with the cluster CA as caBundle). The state is also written to DIR/webhook.json
and the pid to DIR/webhook.pid; `stop` ends that pid and removes both. `start` is idempotent: a running
server is reused. The server's certificate is signed by the cluster's CA (the PKI folder of
`python -m tests.controlplane up`), so the apiserver trusts it like a production webhook.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .pki import Pki
from .webhook import WebhookServer, conversion_spec


def _files(folder: Path) -> tuple[Path, Path, Path]:
    return folder / "webhook.pid", folder / "webhook.json", folder / "webhook.log"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _state(folder: Path) -> dict | None:
    pid_file, state_file, _log = _files(folder)
    if not (pid_file.exists() and state_file.exists()):
        return None
    pid = int(pid_file.read_text().strip() or 0)
    if not pid or not _alive(pid):
        return None
    return json.loads(state_file.read_text())


def serve(args: argparse.Namespace) -> int:
    folder = args.dir
    pid_file, state_file, _log = _files(folder)
    server = WebhookServer(Pki(args.pki), folder, port=args.port).start()
    state = {"pid": os.getpid(), "port": server.port, "url": f"https://127.0.0.1:{server.port}/convert",
             "conversion": conversion_spec(server)}
    tmp = state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, state_file)
    pid_file.write_text(f"{os.getpid()}\n")
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


def start(args: argparse.Namespace) -> int:
    folder = args.dir
    folder.mkdir(parents=True, exist_ok=True)
    running = _state(folder)
    if running:
        print(json.dumps(running))
        return 0
    pid_file, state_file, log = _files(folder)
    for f in (pid_file, state_file):
        f.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "tests.controlplane.webhook_cli", "serve", "--pki", str(args.pki),
            "--dir", str(folder), "--port", str(args.port)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=Path(__file__).resolve().parents[2])
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print(f"webhook server exited with {proc.returncode}; log: {log}\n{log.read_text()[-2000:]}", file=sys.stderr)
            return 1
        state = _state(folder)
        if state:
            try:
                socket.create_connection(("127.0.0.1", state["port"]), timeout=1).close()
            except OSError:
                pass
            else:
                print(json.dumps(state))
                return 0
        time.sleep(0.1)
    proc.terminate()
    print(f"webhook server not ready after {args.timeout}s; log: {log}", file=sys.stderr)
    return 1


def status(args: argparse.Namespace) -> int:
    state = _state(args.dir)
    print(json.dumps(state or {"running": False}))
    return 0 if state else 1


def stop(args: argparse.Namespace) -> int:
    pid_file, state_file, _log = _files(args.dir)
    if not pid_file.exists():
        print("not running")
        return 0
    pid = int(pid_file.read_text().strip() or 0)
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    state_file.unlink(missing_ok=True)
    print(f"stopped {pid}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.controlplane.webhook_cli", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (("start", start), ("serve", serve), ("status", status), ("stop", stop)):
        p = sub.add_parser(name)
        p.add_argument("--dir", type=Path, required=True, help="folder of the pid, state, log, cert and key files")
        if name in ("start", "serve"):
            p.add_argument("--pki", type=Path, required=True, help="the cluster's PKI folder (ca.crt, ca.key)")
            p.add_argument("--port", type=int, default=0, help="default: a free port")
        if name == "start":
            p.add_argument("--timeout", type=float, default=20)
        p.set_defaults(func=func)
    args = parser.parse_args(argv)
    args.dir = args.dir.resolve()
    if getattr(args, "pki", None):
        args.pki = args.pki.resolve()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

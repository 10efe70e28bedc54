"""Locate (or build) the binaries the clients run: crdops-clients (kubectl and Flux's apply library) and helm,
both built from Go modules by a script in this folder and cached by version."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


class ClientsMissing(RuntimeError):
    pass


def clients_binary(build: bool = True) -> Path:
    """CRDOPS_CLIENTS_BIN if set, else the version-keyed build in the cache (built on demand by build.sh)."""
    return cached_binary("build.sh", "CRDOPS_CLIENTS_BIN", "crdops-clients", ClientsMissing, build)


def cached_binary(script: str, override_env: str, what: str, missing: type[RuntimeError], build: bool = True) -> Path:
    """The binary named by `override_env` if set, else the one tests/clients/<script> caches by version, built
    on demand unless `build` is False. `what` names the binary in messages; `missing` is raised without one.

    The script is asked for the path (`--print-path`) rather than computing it here, so the cache key is
    defined once, in the script."""
    override = os.environ.get(override_env)
    if override:
        if not os.access(override, os.X_OK):
            raise missing(f"{override_env}={override} is not an executable {what} binary")
        return Path(override)
    command = str(HERE / script)
    path = Path(subprocess.run([command, "--print-path"], check=True, capture_output=True, text=True).stdout.strip())
    if not path.exists():
        if not build:
            raise missing(f"{what} is not built; run tests/clients/{script} (or set {override_env} to a {what} binary)")
        if subprocess.run([command], check=False).returncode != 0:
            raise missing(f"tests/clients/{script} failed; see the message above")
    return path

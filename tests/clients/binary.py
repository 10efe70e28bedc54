"""Locate (or build) the crdops-clients binary: kubectl and Flux's apply library, built from Go modules."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


class ClientsMissing(RuntimeError):
    pass


def clients_binary(build: bool = True) -> Path:
    """CRDOPS_CLIENTS_BIN if set, else the version-keyed build in the cache (built on demand by build.sh)."""
    override = os.environ.get("CRDOPS_CLIENTS_BIN")
    if override:
        if not os.access(override, os.X_OK):
            raise ClientsMissing(f"CRDOPS_CLIENTS_BIN={override} is not an executable crdops-clients binary")
        return Path(override)
    path = Path(subprocess.run([str(HERE / "build.sh"), "--print-path"], check=True, capture_output=True,
                               text=True).stdout.strip())
    if not path.exists():
        if not build:
            raise ClientsMissing("the real clients are not built; run tests/clients/build.sh "
                                 "(or set CRDOPS_CLIENTS_BIN to a crdops-clients binary)")
        if subprocess.run([str(HERE / "build.sh")], check=False).returncode != 0:
            raise ClientsMissing("tests/clients/build.sh failed; see the message above")
    return path

"""Manifest files for the clients: one document per object, written where the client process reads them."""
from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_manifests(objects: Iterable[dict], folder: Path | None = None) -> Path:
    """Write the objects as a multi-document YAML stream (JSON is YAML) and return the file's path."""
    docs = [json.dumps(o, sort_keys=True) for o in objects]
    fd, name = tempfile.mkstemp(prefix="manifests-", suffix=".yaml", dir=folder)
    with open(fd, "w", encoding="utf-8") as fh:
        fh.write("\n---\n".join(docs) + "\n")
    return Path(name)

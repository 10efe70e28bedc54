"""The engine's modules, imported from a snapshot of the collection.

Every process of a run (this one and its children) imports the same snapshot, so an edit made to the
working tree while the benchmark runs cannot mix two versions of the engine into one result.
"""
from __future__ import annotations

import importlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from types import ModuleType

from tools import collection_tree

from . import REPO

PACKAGE = "ansible_collections.crdops.migration.plugins.module_utils._crdops"
SNAPSHOT_ITEMS = ("galaxy.yml", "meta", "plugins", "roles", "playbooks")


def snapshot(ref: str | None = None) -> str:
    """A collections root holding a copy of what Ansible loads of this collection: of the working tree, or as it
    was at the git commit ``ref`` (an engine to compare with this one in the same run)."""
    root = tempfile.mkdtemp(prefix="crdops-bench-collections-")
    if ref is None:
        collection_tree.copy(root, str(REPO), only=SNAPSHOT_ITEMS)
        return root
    dest = collection_tree.collection_dir(root)
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", ref, *SNAPSHOT_ITEMS],
                             capture_output=True, check=False)
    if archive.returncode != 0:
        shutil.rmtree(root)
        raise SystemExit(f"--against {ref}: git archive failed: {archive.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return root


def use(collections: str) -> None:
    """Put the snapshot first on the import path (the namespace package may already be imported from the
    `ansible` package's collections: extend its search path too)."""
    if collections not in sys.path:
        sys.path.insert(0, collections)
    namespace = sys.modules.get("ansible_collections")
    extra = f"{collections}/ansible_collections"
    if namespace is not None and hasattr(namespace, "__path__") and extra not in list(namespace.__path__):
        namespace.__path__.insert(0, extra)


def has_module(name: str) -> bool:
    """Does the snapshot's engine have this module (an older one may not)?"""
    try:
        return importlib.util.find_spec(f"{PACKAGE}.{name}") is not None
    except ModuleNotFoundError:  # its folder is missing too
        return False


def module(name: str) -> ModuleType:
    """`kube.transport`, `restore.restore`, `proof.etcd_scan`, ... (folder.module) of the snapshot given to `use()`."""
    return importlib.import_module(f"{PACKAGE}.{name}")

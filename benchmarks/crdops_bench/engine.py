"""The engine's modules, imported from a snapshot of the collection.

Every process of a run (this one and its children) imports the same snapshot, so an edit made to the
working tree while the benchmark runs cannot mix two versions of the engine into one result.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import tempfile
from types import ModuleType

from tools import collection_tree

from . import REPO

PACKAGE = "ansible_collections.crdops.migration.plugins.module_utils._crdops"
SNAPSHOT_ITEMS = ("galaxy.yml", "meta", "plugins", "roles", "playbooks")


def snapshot() -> str:
    """A collections root holding a copy of what Ansible loads of this collection."""
    root = tempfile.mkdtemp(prefix="crdops-bench-collections-")
    collection_tree.copy(root, str(REPO), only=SNAPSHOT_ITEMS)
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

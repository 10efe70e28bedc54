# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make the repository importable by its collection path.

The repository root *is* the collection root, so make ``<tmp>/ansible_collections/crdops/migration``
a symlink to it (tools/collection_tree.py) and put ``<tmp>`` on ``sys.path``. ``ansible_collections`` is a namespace package,
so this merges with any installed collections (e.g. from the ``ansible`` package). When the tests run
from a real ``ansible_collections/crdops/migration`` tree (ansible-test), nothing is needed.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _collection_tree():
    """tools/collection_tree.py, loaded by path: nothing of the repository is importable yet."""
    spec = importlib.util.spec_from_file_location("crdops_collection_tree",
                                                  os.path.join(_REPO, "tools", "collection_tree.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shim():
    parts = _REPO.split(os.sep)
    if len(parts) >= 3 and parts[-3:-1] == ["ansible_collections", "crdops"] and parts[-1] == "migration":
        root = os.sep.join(parts[:-3])
        if root not in sys.path:
            sys.path.insert(0, root)
        return
    tmp = tempfile.mkdtemp(prefix="crdops-unit-")
    atexit.register(shutil.rmtree, tmp, True)
    _collection_tree().link(tmp, _REPO)
    sys.path.insert(0, tmp)
    # a namespace package already imported keeps its old __path__; extend it
    mod = sys.modules.get("ansible_collections")
    if mod is not None and hasattr(mod, "__path__"):
        try:
            mod.__path__.append(os.path.join(tmp, "ansible_collections"))
        except AttributeError:  # pragma: no cover
            pass


_shim()

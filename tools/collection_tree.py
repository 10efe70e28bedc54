# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lay out ``<root>/ansible_collections/crdops/migration`` -- the one place that knows how.

Ansible finds the collection only under that path, and the repository root *is* the collection root, so
every tool that runs Ansible, ansible-test or antsibull-docs against this tree needs one. Two kinds:

  link   a symlink to the working tree (setup, demo, molecule, unit tests, integration tests): edits are
         seen at once, nothing is copied.
  copy   a real copy (sanity, lint, docs, benchmarks): ansible-test refuses a symlink (it resolves
         os.getcwd()), and a benchmark must not mix two versions of the engine when the tree is edited
         while it runs. ``--only`` copies just the named top-level entries, ``--no-git`` leaves .git out.

CLI (prints the collection directory it made):
    python3 tools/collection_tree.py link ROOT [--src DIR]
    python3 tools/collection_tree.py copy ROOT [--src DIR] [--no-git] [--only galaxy.yml,plugins,...]
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMESPACE, NAME = "crdops", "migration"
# build output and caches never belong in a copy; top-level entries only, except the patterns below
EXCLUDED_TOP = ("tests/output", "build", ".venv", "docs/_build")
EXCLUDED_ANYWHERE = ("__pycache__", ".pytest_cache", "*.tar.gz")


def collection_dir(root: str) -> str:
    """Where the collection sits under a collections root."""
    return os.path.join(root, "ansible_collections", NAMESPACE, NAME)


def link(root: str, src: str = REPO) -> str:
    """``root/ansible_collections/crdops/migration`` -> ``src``; an existing link is replaced (ln -sfn)."""
    dest = collection_dir(root)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    if os.path.islink(dest):
        os.unlink(dest)
    elif os.path.exists(dest):
        raise FileExistsError("%s exists and is not a symlink; refusing to replace it" % dest)
    os.symlink(os.path.abspath(src), dest)
    return dest


def _ignore(src: str):
    top = {os.path.normpath(os.path.join(src, p)) for p in EXCLUDED_TOP}

    def ignore(folder: str, names: list) -> set:
        return {n for n in names
                if os.path.normpath(os.path.join(folder, n)) in top
                or any(fnmatch.fnmatch(n, pat) for pat in EXCLUDED_ANYWHERE)}

    return ignore


def copy(root: str, src: str = REPO, *, git: bool = True, only: tuple = ()) -> str:
    """A real copy of ``src`` (symlinks inside kept as symlinks) at the collection path under ``root``."""
    dest = collection_dir(root)
    os.makedirs(dest, exist_ok=True)
    ignore = _ignore(src)
    entries = only or sorted(set(os.listdir(src)) - ignore(src, os.listdir(src)))
    for name in entries:
        if name == ".git" and not git:
            continue
        path = os.path.join(src, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.copytree(path, os.path.join(dest, name), symlinks=True, ignore=ignore, dirs_exist_ok=True)
        elif os.path.lexists(path):
            shutil.copy2(path, os.path.join(dest, name), follow_symlinks=False)
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("link", "copy"))
    ap.add_argument("root", help="the collections root (what ANSIBLE_COLLECTIONS_PATH names)")
    ap.add_argument("--src", default=REPO, help="the tree to lay out (default: this repository)")
    ap.add_argument("--no-git", action="store_true", help="copy: leave .git out")
    ap.add_argument("--only", default="", help="copy: comma list of top-level entries to copy")
    args = ap.parse_args(argv)
    if args.mode == "link":
        print(link(args.root, args.src))
    else:
        print(copy(args.root, args.src, git=not args.no_git, only=tuple(filter(None, args.only.split(",")))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

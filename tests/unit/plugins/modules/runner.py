# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run a module's ``main()`` as Ansible does (args in, JSON result out) against a fake apiserver.

``connect_to(monkeypatch, fake)`` makes the glue's one engine connection return ``fake`` and records what it
was asked for in ``fake.seen`` (the ConnectionOptions and the keyword arguments), and how often in
``fake.connects``; ``connected_fake`` builds the usual fake and connects to it.
"""
from __future__ import annotations

import json

import pytest
from tests.unit.compat import patch_module_args

from ansible_collections.crdops.migration.plugins.module_utils import _crdops_glue
from tests.unit.crdops_fakes import FakeCluster

NAME = "crontabs.stable.example.com"


def connect_to(monkeypatch, fake):
    fake.seen = {}
    fake.connects = 0

    def connect(options, **kw):
        fake.seen.update(options=options, kw=kw)
        fake.connects += 1
        return fake
    monkeypatch.setattr(_crdops_glue, "connect", connect)
    return fake


def connected_fake(monkeypatch, objects=12, namespaces=("a", "b")):
    """A FakeCluster with the CRD ``NAME`` (storedVersions v1, v2; storage v2) and ``objects`` objects stored at
    v1, which the modules connect to."""
    fake = FakeCluster()
    fake.add_crd()
    fake.add_objects(NAME, objects, namespaces=namespaces)
    return connect_to(monkeypatch, fake)


def run(module, args, capsys, check_mode=False):
    """The module's result, with its exit code as ``_rc``."""
    with patch_module_args(dict(args, _ansible_check_mode=check_mode)):
        with pytest.raises(SystemExit) as ei:
            module.main()
    out = json.loads(capsys.readouterr().out)
    out["_rc"] = ei.value.code
    return out

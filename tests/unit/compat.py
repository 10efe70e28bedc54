# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Module-args patching that works on every ansible-core CI runs (2.16 ... 2.21).

ansible-core 2.19 added ``ansible.module_utils.testing.patch_module_args``; older cores read the args
from ``basic._ANSIBLE_ARGS`` (the way collection unit tests set them before 2.19). ansible-core 2.21
adds ``invocation`` to a result only when the controller asks (``INJECT_INVOCATION``, off by default):
the tests ask, so they see what a run with it switched on would print - the worst case for secrets.
"""
from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.common import parameters

try:
    from ansible.module_utils.testing import patch_module_args as _core_patch
except ImportError:  # ansible-core < 2.19
    _core_patch = None

_INJECT = "inject_invocation" in getattr(parameters, "PASS_VARS", {})


@contextlib.contextmanager
def patch_module_args(args: dict[str, Any] | None = None) -> Iterator[None]:
    """Expose ``args`` to the AnsibleModule instances created inside the block."""
    args = dict(args or {})
    if _INJECT:
        args.setdefault("_ansible_inject_invocation", True)
    if _core_patch is not None:
        with _core_patch(args):
            yield
        return
    args.setdefault("_ansible_remote_tmp", "/tmp")
    args.setdefault("_ansible_keep_remote_files", False)
    raw = json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()
    with mock.patch.object(basic, "_ANSIBLE_ARGS", raw):
        yield

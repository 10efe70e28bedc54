# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Offline stand-in for get-pip.py, used only by tests/sanity/run.sh.

Why this file exists: when ansible-test builds a virtual environment it bootstraps pip by
downloading https://ci-files.testing.ansible.com/ansible-test/get-pip-<ver>.py into
~/.ansible/test/cache/get_pip_<ver>.py (ansible_test/_util/target/setup/requirements.py,
bootstrap()).  If that cache file already exists the download is skipped
(see ansible/ansible#77304).  Our CI machines reach PyPI but not ci-files.testing.ansible.com,
so run.sh copies this script to that cache path.

What it does, like the real get-pip.py:
  1. install pip into the running interpreter with the stdlib `ensurepip` (offline);
  2. `pip install` the requirement strings it was given (e.g. "pip==24.2") from the
     configured index.
ensurepip runs pip with PIP_CONFIG_FILE=/dev/null; we drop that variable for step 2 so pip
reads /etc/pip.conf or ~/.config/pip/pip.conf (ansible-test strips PIP_* env variables).
"""

from __future__ import annotations

import os
import subprocess
import sys

# get-pip.py options that are not pip options
_GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main() -> int:
    args = [a for a in sys.argv[1:] if a not in _GET_PIP_ONLY]
    env = dict(os.environ)
    env.pop("PIP_CONFIG_FILE", None)
    rc = subprocess.call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"], env=env)
    if rc != 0:
        sys.stderr.write("get_pip_standin: ensurepip failed (rc=%d)\n" % rc)
        return rc
    env.pop("PIP_CONFIG_FILE", None)
    packages = [a for a in args if not a.startswith("-")]
    options = [a for a in args if a.startswith("-")]
    if not packages:
        return 0
    return subprocess.call([sys.executable, "-m", "pip", "install"] + options + packages, env=env)


if __name__ == "__main__":
    sys.exit(main())

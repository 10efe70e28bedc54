# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""A dead man's switch for a pass that runs in the background (Ansible ``async``).

An async job is detached from ansible-playbook: when the playbook is cancelled (AWX / ansible-runner
cancel, Ctrl-C, kill) the job would go on writing objects nobody watches. The role touches a file at
every progress poll; the pass stops before its next write once the file is older than the timeout.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Optional

from .errors import at_least


class Heartbeat:
    def __init__(self, path: str, timeout: float, clock: Callable[[], float] = time.time) -> None:
        at_least("heartbeat_timeout", timeout, 0, strict=True)
        self.path = path
        self.timeout = timeout
        self._clock = clock

    def stop_reason(self) -> Optional[str]:
        """None while the file was touched within ``timeout`` seconds; otherwise why the pass must stop."""
        try:
            age = self._clock() - os.stat(self.path).st_mtime
        except OSError:
            return ("heartbeat file %s is gone: the playbook that started this background job ended; "
                    "stopped before the next write" % self.path)
        if age > self.timeout:
            return ("no heartbeat for %.0fs (heartbeat_timeout %.0fs): the playbook that started this background "
                    "job is gone (cancelled or killed); stopped before the next write" % (age, self.timeout))
        return None

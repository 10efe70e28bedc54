# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import os
import threading

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.heartbeat import Heartbeat
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.plugins.module_utils.test_crdops_restore import NAME, cluster_with, run


def test_heartbeat_fresh_stale_and_gone(tmp_path):
    path = tmp_path / "hb"
    path.write_text("")
    os.utime(path, (1000, 1000))
    now = [1010.0]
    hb = Heartbeat(str(path), 30, clock=lambda: now[0])
    assert hb.stop_reason() is None
    now[0] = 1031.0
    assert "no heartbeat for 31s (heartbeat_timeout 30s)" in hb.stop_reason()
    path.unlink()
    assert "is gone" in hb.stop_reason()


def test_a_stop_reason_ends_the_pass_before_the_next_write_and_no_record():
    c = cluster_with(60)
    calls = {"n": 0}
    lock = threading.Lock()

    def should_stop():
        with lock:
            calls["n"] += 1
            return "no heartbeat for 31s" if calls["n"] > 20 else None

    r = run(c, workers=1, should_stop=should_stop)
    writes = [p for m, p, q in c.writes() if "customresourcedefinitions" not in p]
    assert len(writes) == 20 and r.rewritten == 20
    assert not r.complete and r.aborted_reason == "no heartbeat for 31s"
    assert not r.record_written and RECORD_ANNOTATION not in get_crd(c, NAME).annotations

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Following a pass has no depth (thousands of polls, constant stack); a stop request ends a pass cleanly."""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.progress import (
    ProgressFollower, follow, progress_line, run_followed)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.migration_run import ProgressFile
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import CHECKPOINT_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, RestorePass
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.stop import StopSignal, Supervision
from tests.unit.crdops_fakes import FakeCluster

NAME = "crontabs.stable.example.com"
TOTAL = 5000


def depth() -> int:
    frame, n = sys._getframe(1), 0
    while frame is not None:
        n += 1
        frame = frame.f_back
    return n


def fake_pass(progress: ProgressFile, updates: int, until=None) -> None:
    """What the engine does: one progress update per drained page (here: one object per page); with ``until``,
    the pass goes on (without passing ``updates``) until the follower has printed enough lines."""
    progress.state["crds_total"] = 1
    i = 0
    while i < updates or (until is not None and not until()):
        i = min(i + 1, updates)
        progress.update({"crd": NAME, "listed": updates, "done": i, "rewritten": i, "objects_per_s": 1000.0})
        if until is not None:
            time.sleep(0.0001)
    progress.state["crds_done"] = 1
    progress.update()


def test_following_thousands_of_polls_keeps_a_flat_stack():
    follower = ProgressFollower(count=lambda transport, crd: TOTAL)
    follower.totals[NAME] = TOTAL
    progress = ProgressFile(None, "c1", False, on_error=lambda msg: None)
    progress.on_update = follower.update
    lines, depths = [], []

    def emit(line):
        depths.append(depth())
        lines.append(line)

    finished = threading.Event()
    polls = []
    printer = threading.Thread(target=lambda: polls.append(follow(follower, emit, 0.0002, finished)))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(depth() + 80)  # any nesting per poll would hit this within the first hundred polls
    try:
        printer.start()
        fake_pass(progress, TOTAL, until=lambda: len(lines) >= 3000)
        finished.set()
        printer.join(10)
    finally:
        sys.setrecursionlimit(limit)
    assert follower.updates >= TOTAL + 1
    assert polls[0] >= 3000, polls  # thousands of polls against the fake pass, each printing a line
    assert len(lines) >= 3000 and max(depths) == min(depths), (len(lines), set(depths))
    assert lines[-1].startswith("CRD 1/1 %s: %d/%d objects (100.0%%)" % (NAME, TOTAL, TOTAL)), lines[-1]


def test_run_followed_returns_the_run_result_and_prints_nothing_at_interval_zero():
    follower = ProgressFollower()
    lines = []
    assert run_followed(lambda: 42, follower, lines.append, 0) == 42 and lines == []
    progress = ProgressFile(None, "c1", False, on_error=lambda msg: None)
    progress.on_update = follower.update
    assert run_followed(lambda: fake_pass(progress, 200), follower, lines.append, 0.01) is None
    assert lines and "200/200 objects (100.0%)" in lines[-1]


def test_progress_line_percent_eta_and_checkpoint():
    state = {"crds_total": 2, "crds_done": 1, "current": {"crd": NAME, "done": 1000, "skipped_by_checkpoint": 500,
                                                          "listed": 1600, "rewritten": 990, "unchanged": 10,
                                                          "objects_per_s": 50.0}}
    line = progress_line(state, 3000)
    assert line.startswith("CRD 2/2 %s: 1500/3000 objects (50.0%%)" % NAME), line
    assert "ETA 30s" in line and "skipped by checkpoint 500" in line
    assert "ETA unknown" in progress_line(dict(state, current=dict(state["current"], objects_per_s=0)), 3000)
    assert progress_line({"current": None}, 10) is None


def test_sigterm_and_sigint_request_a_stop_and_the_previous_handlers_come_back():
    for signum, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        before = signal.getsignal(signum)
        stop = StopSignal()
        heard = []
        stop.listen(heard.append)
        with Supervision(stop, watch_parent=False, poll=0.01):
            os.kill(os.getpid(), signum)
            assert stop.wait(5)
        assert stop.reason == "stopped by signal %s" % name and heard == [stop.reason]
        assert signal.getsignal(signum) is before


def test_a_vanished_parent_requests_a_stop():
    parents = iter([4242] + [1] * 100)
    stop = StopSignal()
    with Supervision(stop, watch_parent=True, poll=0.01, getppid=lambda: next(parents)):
        assert stop.wait(5)
    assert stop.reason == "stopped: the supervising process (pid 4242) is gone"


def test_a_stop_ends_the_pass_without_new_writes_and_keeps_the_checkpoint():
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, 30, namespaces=("a",))
    stop = StopSignal()
    pages = []

    def on_progress(info):
        pages.append(info["done"])
        if info["pages"] == 2:
            stop.request("stopped by signal SIGINT")

    p = RestorePass(c, get_crd(c, NAME), RestoreOptions(page_size=5, workers=1), progress=on_progress, stop=stop,
                    now=lambda: "2026-12-01T05:00:00Z")
    result = p.run().to_dict()
    assert result["complete"] is False and result["aborted_reason"] == "stopped by signal SIGINT"
    written = len([w for w in c.writes() if "/crontabs/" in w[1]])
    # page 3 was submitted while page 2 drained; nothing after the stop is started
    assert written <= 15 and result["rewritten"] == written and result["not_attempted"] == 15 - written
    assert result["record_written"] is False
    crd = c.crds[NAME]
    # the checkpoint stays at the last page whose every object was written (page 3 only if it completed)
    last = "a/obj-00014" if written == 15 else "a/obj-00009"
    assert json.loads(crd["metadata"]["annotations"][CHECKPOINT_ANNOTATION])["last"] == last


def test_a_stop_requested_before_the_pass_writes_nothing():
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, 10, namespaces=("a",))
    stop = StopSignal()
    stop.request("stopped by signal SIGTERM")
    result = RestorePass(c, get_crd(c, NAME), RestoreOptions(page_size=5), stop=stop).run().to_dict()
    assert [w for w in c.writes() if "/crontabs/" in w[1]] == [] and result["complete"] is False and result["aborted_reason"] == "stopped by signal SIGTERM"


def test_time_limit_requests_a_stop():
    ticks = iter(range(0, 1000, 2))
    stop = StopSignal()
    with Supervision(stop, watch_parent=False, poll=0.01, time_limit=5, clock=lambda: next(ticks)):
        assert stop.wait(5)
    assert stop.reason == "stopped: time_limit of 5 s reached"


def test_answered_writes_move_the_line_and_a_late_older_report_does_not_move_it_back():
    follower = ProgressFollower()
    follower.totals[NAME] = 1000
    base = {"crds_total": 1, "crds_done": 0}
    follower.update(dict(base, current={"crd": NAME, "done": 500, "answered": 730, "objects_per_s": 10.0}))
    assert "730/1000 objects (73.0%)" in follower.line()
    follower.update(dict(base, current={"crd": NAME, "done": 500, "answered": 700, "objects_per_s": 10.0}))
    assert follower.line() is None  # the older report was ignored
    follower.update(dict(base, crds_done=1, current={"crd": NAME, "done": 1000, "answered": 1000}))
    assert "1000/1000 objects (100.0%)" in follower.line()


def test_a_plan_reports_its_listing():
    state = {"crds_total": 1, "crds_done": 0, "current": {"crd": NAME, "done": 0, "listed": 300, "check_mode": True}}
    assert progress_line(state, 1200).startswith("CRD 1/1 %s: 300/1200 objects (25.0%%)" % NAME)
    assert progress_line(state, 1200).endswith("[plan only]")


def test_a_confirming_pass_is_named_before_its_counts_which_are_its_own():
    """Its "0 changed" must not read as the re-store's result, printed right before the re-store's counts line."""
    current = {"crd": NAME, "done": 300, "listed": 300, "unchanged": 300, "confirming": True}
    line = progress_line({"crds_total": 1, "crds_done": 0, "current": current}, 300)
    assert line.startswith("CRD 1/1 %s, confirming pass (no-op writes, nothing to re-store): 300/300 objects (100.0%%), "
                           "changed 0, confirmed 300, gone 0, failed 0; " % NAME), line
    restore = progress_line({"crds_total": 1, "crds_done": 0, "current": dict(current, confirming=False)}, 300)
    assert restore.startswith("CRD 1/1 %s: 300/300 objects (100.0%%), rewritten 0, unchanged 300, gone 0, failed 0, "
                              "skipped by checkpoint 0; " % NAME), restore

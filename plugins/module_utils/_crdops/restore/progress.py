# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Following a pass that runs in this process: progress lines with percent and ETA, at an interval.

The follower is a flat loop in a thread of its own (no task includes, no recursion), so a pass of any
length costs the same stack as a short one. Percent and ETA use the object count of each CRD taken
before the pass (LIST limit=1 + remainingItemCount, as discovery counts), and the objects a checkpoint
let the pass skip count as done.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, Optional

from .listing import count_objects
from .pace import describe

Emit = Callable[[str], None]


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60)
    if seconds >= 60:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%ds" % seconds


def progress_line(state: Dict[str, Any], total: Optional[int]) -> Optional[str]:
    """One line for the latest progress state of a run, or None before the first page."""
    cur = state.get("current") or {}
    if not cur.get("crd"):
        return None
    # "done" moves per drained page, "answered" per write (a gentle run drains a page only every few seconds)
    done = _reached(state)
    if cur.get("check_mode"):  # a plan writes nothing: its progress is the listing
        done = int(cur.get("listed") or 0)
    expected = max(int(total or 0), int(cur.get("listed") or 0), done)
    pct = 100.0 * done / expected if expected else 100.0
    rate = float(cur.get("objects_per_s") or 0)
    remaining = max(expected - done, 0)
    eta = _duration(remaining / rate) if rate > 0 else ("0s" if remaining == 0 else "unknown")
    position = crd_position(state)
    pace = "" if cur.get("check_mode") else describe(cur.get("pace"))
    return ("CRD %d/%d %s%s: %d/%d objects (%.1f%%), %s; %.1f obj/s, ETA %s%s%s" % (
        position, int(state.get("crds_total") or 1), cur["crd"], _which_pass(cur), done, expected, pct,
        _counts(cur), rate, eta, "; " + pace if pace else "", " [plan only]" if cur.get("check_mode") else ""))


def _which_pass(cur: Dict[str, Any]) -> str:
    """The pass after the re-store that proves it (record_proof.py) lists every object again: say so before its counts,
    or its second run from 0 to 100% reads as a restart, and its "0 changed" as the re-store's result."""
    return ", confirming pass (no-op writes, nothing to re-store)" if cur.get("confirming") else ""


def _counts(cur: Dict[str, Any]) -> str:
    """A confirming pass counts objects its no-op write changed (stored at another version) and confirmed; it
    has no checkpoint. The re-store counts what it rewrote."""
    if cur.get("confirming"):
        return "changed %d, confirmed %d, gone %d, failed %d" % (
            cur.get("rewritten") or 0, cur.get("unchanged") or 0, cur.get("gone") or 0, cur.get("failed") or 0)
    return "rewritten %d, unchanged %d, gone %d, failed %d, skipped by checkpoint %d" % (
        cur.get("rewritten") or 0, cur.get("unchanged") or 0, cur.get("gone") or 0, cur.get("failed") or 0,
        cur.get("skipped_by_checkpoint") or 0)


def crd_position(state: Dict[str, Any]) -> int:
    """1-based position of the CRD the line is about. ``crd_index`` is set when a CRD's pass starts; the last
    report of a pass comes after ``crds_done`` already counts it, so ``crds_done + 1`` would name the next CRD."""
    total = int(state.get("crds_total") or 1)
    if state.get("crd_index"):
        return min(int(state["crd_index"]), total)
    return min(int(state.get("crds_done") or 0) + 1, total)


def _reached(state: Dict[str, Any]) -> int:
    cur = state.get("current") or {}
    return max(int(cur.get("done") or 0), int(cur.get("answered") or 0)) + int(cur.get("skipped_by_checkpoint") or 0)


def _behind(new: Dict[str, Any], old: Optional[Dict[str, Any]]) -> bool:
    """Progress is reported from the workers too; a late, older report of the same CRD must not move it back."""
    if old is None or (new.get("crds_done"), (new.get("current") or {}).get("crd")) != (
            old.get("crds_done"), (old.get("current") or {}).get("crd")):
        return False
    return _reached(new) < _reached(old)


class ProgressFollower:
    """Holds the latest progress of a run (updated from the pass) and turns it into lines (read by ``follow``)."""

    def __init__(self, count: Callable[[Any, Any], Optional[int]] = count_objects) -> None:
        self._count = count
        self._lock = threading.Lock()
        self._state: Optional[Dict[str, Any]] = None
        self._version = 0
        self._shown = 0
        self.totals: Dict[str, Optional[int]] = {}
        self.updates = 0

    def expect(self, crds: Iterable[Any], transport: Any) -> None:
        """Count each CRD's objects before the pass (one small LIST each; a failure only loses the percent)."""
        for crd in crds:
            try:
                self.totals[crd.name] = self._count(transport, crd)
            except Exception:  # the count is for the display only; the pass reports real errors
                self.totals[crd.name] = None

    def update(self, state: Dict[str, Any]) -> None:
        with self._lock:
            if _behind(state, self._state):  # a worker's report that lost the race with a newer one
                return
            self._state = state
            self._version += 1
            self.updates += 1

    def line(self) -> Optional[str]:
        """The line for the latest state when it changed since the last line, else None."""
        with self._lock:
            if self._state is None or self._version == self._shown:
                return None
            self._shown = self._version
            state = self._state
        cur = state.get("current") or {}
        return progress_line(state, self.totals.get(cur.get("crd", "")))


def follow(follower: ProgressFollower, emit: Emit, interval: float, finished: threading.Event) -> int:
    """Emit a line every ``interval`` seconds while the run goes on, and the last one at its end; iterative."""
    polls = 0
    while not finished.wait(interval):
        polls += 1
        line = follower.line()
        if line:
            emit(line)
    line = follower.line()
    if line:
        emit(line)
    return polls


def run_followed(run: Callable[[], Any], follower: ProgressFollower, emit: Emit, interval: float) -> Any:
    """``run()`` in this thread while ``follow`` prints its progress from another; interval 0 prints nothing."""
    if interval <= 0:
        return run()
    finished = threading.Event()
    printer = threading.Thread(target=follow, args=(follower, emit, interval, finished),
                               name="crdops-follow", daemon=True)
    printer.start()
    try:
        return run()
    finally:
        finished.set()
        printer.join(timeout=5)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Stop means stop: a request to end a pass, from a signal or because the supervising process is gone.

A pass that is told to stop submits nothing more, lets the requests already sent finish, and keeps its
checkpoint (pages with objects not attempted are not clean, so the checkpoint never moves past them).

Signal handlers only set a flag: a handler runs between two bytecodes of the main thread, which may
hold the very lock that ``threading.Event.set`` needs. A watcher thread turns the flag (and a vanished
parent process) into the request, within ``poll`` seconds.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType
from typing import Any, Callable, Dict, List, Optional

StopListener = Callable[[str], None]


class StopSignal:
    """A one-shot request to stop, with the first reason; listeners are called once, in the requesting thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._listeners: List[StopListener] = []
        self.reason: Optional[str] = None

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float]) -> bool:
        return self._event.wait(timeout)

    def request(self, reason: str) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            listeners = list(self._listeners)
        for listener in listeners:
            listener(reason)

    def listen(self, listener: StopListener) -> None:
        """Call ``listener(reason)`` on the request (at once when it was already made)."""
        with self._lock:
            if not self._event.is_set():
                self._listeners.append(listener)
                return
        listener(self.reason or "stopped")


class Supervision:
    """While active: SIGINT/SIGTERM and the loss of the parent process request a stop of ``stop``.

    ``time_limit``: seconds after which the run stops the same way (a rerun resumes from the checkpoint).
    ``watch_parent``: the pid the parent had when supervision began; when ``os.getppid()`` differs (the
    parent died and the process was re-parented), the supervisor is gone. Use it where the parent is the
    run's supervisor (ansible-playbook for its worker); signals need the main thread.
    """

    def __init__(self, stop: StopSignal, watch_parent: bool = True, poll: float = 0.25,
                 getppid: Callable[[], int] = os.getppid, time_limit: Optional[float] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stop = stop
        self.poll = poll
        self.time_limit = time_limit
        self._clock = clock
        self._started = clock()
        self._getppid = getppid
        self._parent = getppid() if watch_parent else None
        self._signalled: Optional[int] = None
        self._previous: Dict[int, Any] = {}
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> Supervision:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._on_signal)
        self._thread = threading.Thread(target=self._watch, name="crdops-supervision", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:  # only a flag: see the module docstring
        if self._signalled is None:
            self._signalled = signum

    def check(self) -> None:
        """One look at the flag and the parent (the watcher thread calls this every ``poll`` seconds)."""
        if self._signalled is not None:
            self.stop.request("stopped by signal %s" % signal.Signals(self._signalled).name)
        elif self._parent is not None and self._getppid() != self._parent:
            self.stop.request("stopped: the supervising process (pid %d) is gone" % self._parent)
        elif self.time_limit is not None and self._clock() - self._started >= self.time_limit:
            self.stop.request("stopped: time_limit of %g s reached" % self.time_limit)

    def _watch(self) -> None:
        while not self._done.wait(self.poll):
            self.check()
        self.check()  # a signal that arrived at the very end still counts

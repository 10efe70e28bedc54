"""A client that keeps applying in the background (a GitOps controller's reconcile loop), until stopped."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .flux import Flux
from .kubectl import Kubectl

# What to apply on iteration n: a fixed list, or a function of n. An apply of an unchanged manifest writes
# nothing (and so leaves no fresh managedFields time); a function can change a value each time.
Objects = Iterable[dict] | Callable[[int], Iterable[dict]]


@dataclass(frozen=True)
class Outcome:
    iteration: int
    started: float  # time.time() when the apply began
    ok: bool
    detail: str  # the client's error message when not ok


class ApplyLoop:
    """Call `step(n)` every `interval` seconds on a daemon thread; each call's outcome is kept in `outcomes`.

    Use as a context manager, or start() / stop(). stop() waits for the apply in progress to finish."""

    def __init__(self, step: Callable[[int], tuple[bool, str]], interval: float = 3.0, name: str = "client"):
        self.step = step
        self.interval = interval
        self.name = name
        self.outcomes: list[Outcome] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ApplyLoop":
        self._thread = threading.Thread(target=self._run, name=f"apply-loop-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> list[Outcome]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"apply loop {self.name} did not stop within {timeout}s")
        return list(self.outcomes)

    def __enter__(self) -> "ApplyLoop":
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def succeeded(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            started = time.time()
            try:
                ok, detail = self.step(n)
            except Exception as exc:  # a client that crashes is an outcome too, not the end of the loop
                ok, detail = False, f"{type(exc).__name__}: {exc}"
            self.outcomes.append(Outcome(n, started, ok, detail))
            n += 1
            self._stop.wait(max(0.0, self.interval - (time.time() - started)))


def _resolve(objects: Objects, n: int) -> list[dict]:
    return list(objects(n) if callable(objects) else objects)


def kubectl_apply_loop(kubectl: Kubectl, objects: Objects, interval: float = 3.0, *, server_side: bool = True,
                       field_manager: str | None = "argocd-controller", force_conflicts: bool = False) -> ApplyLoop:
    """`kubectl apply [--server-side --field-manager=...]` of `objects` every `interval` seconds (not started)."""
    def step(n: int) -> tuple[bool, str]:
        res = kubectl.apply(_resolve(objects, n), server_side=server_side,
                            field_manager=field_manager if server_side else None, force_conflicts=force_conflicts)
        return res.ok, res.stderr.strip()
    return ApplyLoop(step, interval, name=field_manager or "kubectl")


def flux_apply_loop(flux: Flux, objects: Objects, interval: float = 3.0) -> ApplyLoop:
    """Flux's ApplyAllStaged of `objects` every `interval` seconds (not started)."""
    def step(n: int) -> tuple[bool, str]:
        res = flux.apply(_resolve(objects, n))
        return res.ok, res.error
    return ApplyLoop(step, interval, name=flux.field_manager)

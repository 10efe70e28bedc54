"""Flux's server-side apply (github.com/fluxcd/pkg/ssa ResourceManager.ApplyAllStaged, set up as
kustomize-controller sets it up), run as a subprocess against one kubeconfig context."""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .binary import clients_binary
from .manifests import write_manifests
from .result import ClientResult, CommandFailed

FLUX_MANAGER = "kustomize-controller"
# the Kustomization the binary labels the objects with when `Flux.apply` names none (its --owner-* defaults)
DEFAULT_KUSTOMIZATION = "flux-system/crdops-test"


class FluxFailed(CommandFailed):
    def describe(self, result: FluxResult) -> str:
        return f"Flux apply failed (exit {result.returncode}): {result.error or result.stderr.strip()}"


@dataclass(frozen=True)
class FluxResult(ClientResult):
    """One reconcile: per object Flux's action (created, configured, unchanged, skipped).

    Not a CommandResult: it holds Flux's JSON report rather than the output, and `ok` also needs a report
    without an error."""
    failure = FluxFailed
    returncode: int
    objects: list[dict] = field(default_factory=list)
    applied: int = 0
    changed: int = 0
    error: str = ""
    stderr: str = ""
    inventory: list[dict] = field(default_factory=list)  # kustomize-controller's status.inventory.entries

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.error

    def actions(self) -> dict[str, str]:
        """name (namespace/name for namespaced objects) -> action."""
        return {(f"{o['namespace']}/{o['name']}" if o.get("namespace") else o["name"]): o["action"]
                for o in self.objects}


class Flux:
    """A Flux Kustomization's apply step, as the field manager `kustomize-controller` by default."""

    def __init__(self, kubeconfig: Path | str, context: str | None = None, binary: Path | None = None,
                 field_manager: str = FLUX_MANAGER, timeout: float = 90.0):
        self.binary = binary or clients_binary()
        self.kubeconfig = str(kubeconfig)
        self.context = context
        self.field_manager = field_manager
        self.timeout = timeout

    def apply(self, objects: Iterable[dict], kustomization: str | None = None) -> FluxResult:
        """One reconcile of ``objects``, labelled with ``kustomization`` (namespace/name) as kustomize-controller
        labels them (the binary's default Kustomization when None)."""
        path = write_manifests(objects)
        try:
            argv = [str(self.binary), "flux-apply", "--kubeconfig", self.kubeconfig, "--file", str(path),
                    "--field-manager", self.field_manager]
            if kustomization:
                namespace, name = kustomization.split("/", 1)
                argv += ["--owner-namespace", namespace, "--owner-name", name]
            if self.context:
                argv += ["--context", self.context]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
        finally:
            path.unlink(missing_ok=True)
        try:
            out = json.loads(proc.stdout)
        except ValueError:
            return FluxResult(proc.returncode, error=proc.stdout.strip() or "no output", stderr=proc.stderr)
        return FluxResult(proc.returncode, out.get("objects") or [], out.get("applied", 0), out.get("changed", 0),
                          out.get("error", ""), proc.stderr, out.get("inventory") or [])

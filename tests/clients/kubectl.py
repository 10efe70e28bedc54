"""kubectl v1.37 (k8s.io/kubectl, built from Go modules) run as a subprocess against one kubeconfig context."""
from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .binary import clients_binary
from .manifests import write_manifests
from .result import CommandFailed, CommandResult


class KubectlFailed(CommandFailed):
    tool = "kubectl"


class Result(CommandResult):
    """One kubectl run; check() raises KubectlFailed."""
    failure = KubectlFailed


class Kubectl:
    """kubectl with --kubeconfig/--context set; each instance has its own discovery cache, so a CRD that a
    test just created (or a cluster restarted on a reused port) is never hidden by a stale cache."""

    def __init__(self, kubeconfig: Path | str, context: str | None = None, binary: Path | None = None,
                 timeout: float = 60.0):
        self.binary = binary or clients_binary()
        self.kubeconfig = str(kubeconfig)
        self.context = context
        self.timeout = timeout
        self._cache = tempfile.mkdtemp(prefix="kubectl-cache-")

    def run(self, *args: str, stdin: str | None = None) -> Result:
        base = ["--kubeconfig", self.kubeconfig, "--cache-dir", self._cache]
        if self.context:
            base += ["--context", self.context]
        argv = list(args) + base
        proc = subprocess.run([str(self.binary), "kubectl", *argv], input=stdin, capture_output=True, text=True,
                              timeout=self.timeout, check=False)
        return Result(list(args), proc.returncode, proc.stdout, proc.stderr)

    def apply(self, objects: Iterable[dict], *, server_side: bool = False, field_manager: str | None = None,
              force_conflicts: bool = False, dry_run: str | None = None, extra: Iterable[str] = ()) -> Result:
        """`kubectl apply -f <file>`: client-side unless server_side; never forced unless force_conflicts."""
        path = write_manifests(objects)
        try:
            args = ["apply", "-f", str(path)]
            if server_side:
                args.append("--server-side")
            if field_manager:
                args.append(f"--field-manager={field_manager}")
            if force_conflicts:
                args.append("--force-conflicts")
            if dry_run:
                args.append(f"--dry-run={dry_run}")
            return self.run(*args, *extra)
        finally:
            path.unlink(missing_ok=True)

    def get(self, resource: str, name: str | None = None, namespace: str | None = None) -> dict:
        """`kubectl get -o json` of one object, or of a list when name is None."""
        args = ["get", resource] + ([name] if name else []) + (["-n", namespace] if namespace else []) + ["-o", "json"]
        return json.loads(self.run(*args).check().stdout)

    def label(self, resource: str, name: str, labels: dict[str, str], namespace: str | None = None,
              overwrite: bool = True) -> Result:
        args = ["label", resource, name] + [f"{k}={v}" for k, v in labels.items()]
        if namespace:
            args += ["-n", namespace]
        if overwrite:
            args.append("--overwrite")
        return self.run(*args)

    def version(self) -> dict:
        return json.loads(self.run("version", "--client", "-o", "json").check().stdout)

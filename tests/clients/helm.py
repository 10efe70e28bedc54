"""Helm v4 (helm.sh/helm/v4, built from Go modules by build_helm.sh) run as a subprocess against one context.

Tests use it to leave release Secrets in a cluster exactly as Helm writes them, and to prove that
`helm upgrade` works (or fails as helm/helm#7361 describes) after a CRD version is removed.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

import yaml

from .binary import cached_binary
from .result import CommandFailed, CommandResult


class HelmMissing(RuntimeError):
    pass


def helm_binary(build: bool = True) -> Path:
    """CRDOPS_HELM_BIN if set, else the version-keyed build in the cache (built on demand by build_helm.sh)."""
    return cached_binary("build_helm.sh", "CRDOPS_HELM_BIN", "helm", HelmMissing, build)


class HelmFailed(CommandFailed):
    tool = "helm"


class HelmResult(CommandResult):
    """One helm run; check() raises HelmFailed."""
    failure = HelmFailed


class Helm:
    """helm with --kubeconfig/--kube-context set and its own config, cache and data folders, so a test never
    reads or changes the user's repositories or plugins."""

    def __init__(self, kubeconfig: Path | str, context: str | None = None, binary: Path | None = None,
                 timeout: float = 180.0, driver: str = "secret"):
        """``driver``: HELM_DRIVER, where Helm stores its releases (``secret``, ``configmap``)."""
        self.binary = binary or helm_binary()
        self.kubeconfig = str(kubeconfig)
        self.context = context
        self.timeout = timeout
        home = tempfile.mkdtemp(prefix="helm-home-")
        self.env = dict(os.environ, HELM_CONFIG_HOME=f"{home}/config", HELM_CACHE_HOME=f"{home}/cache",
                        HELM_DATA_HOME=f"{home}/data", HELM_DRIVER=driver)

    def run(self, *args: str, check: bool = False) -> HelmResult:
        base = ["--kubeconfig", self.kubeconfig] + (["--kube-context", self.context] if self.context else [])
        proc = subprocess.run([str(self.binary), *args, *base], capture_output=True, text=True, env=self.env,
                              timeout=self.timeout, check=False)
        result = HelmResult(list(args), proc.returncode, proc.stdout, proc.stderr)
        return result.check() if check else result

    def install(self, release: str, namespace: str, chart_dir: Path | str, *, extra: Iterable[str] = (),
                check: bool = False) -> HelmResult:
        """`helm install` (creating the namespace), waiting for nothing: custom resources have no readiness."""
        return self.run("install", release, str(chart_dir), "--namespace", namespace, "--create-namespace",
                        *extra, check=check)

    def upgrade(self, release: str, namespace: str, chart_dir: Path | str, *, extra: Iterable[str] = (),
                check: bool = False) -> HelmResult:
        return self.run("upgrade", release, str(chart_dir), "--namespace", namespace, *extra, check=check)

    def rollback(self, release: str, namespace: str, revision: int, *, extra: Iterable[str] = (),
                 check: bool = False) -> HelmResult:
        return self.run("rollback", release, str(revision), "--namespace", namespace, *extra, check=check)

    def history(self, release: str, namespace: str) -> list[dict]:
        """`helm history -o json`: one entry per revision (revision, status, chart, description, ...)."""
        out = self.run("history", release, "--namespace", namespace, "--output", "json", check=True).stdout
        return json.loads(out)


def write_chart(folder: Path | str, name: str, version: str, documents: list[dict]) -> Path:
    """A minimal chart `folder/name` (Chart.yaml apiVersion v2, one template per document) and its path.

    Documents are written as block YAML, as charts are, so each `apiVersion:` is a line of its own in the
    manifest Helm stores."""
    chart = Path(folder) / name
    templates = chart / "templates"
    templates.mkdir(parents=True, exist_ok=True)
    for old in templates.glob("*.yaml"):
        old.unlink()  # a chart rewritten at a new version keeps no template of the old one
    meta = {"apiVersion": "v2", "name": name, "version": version, "type": "application"}
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
    for i, doc in enumerate(documents):
        stem = f"{i:02d}-{doc.get('kind', 'object').lower()}-{doc.get('metadata', {}).get('name', i)}"
        (templates / f"{stem}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return chart

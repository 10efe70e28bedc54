"""Run a playbook the way AWX does: ansible-runner on a private data dir laid out as AWX writes it.

AWX (awx/main/tasks/jobs.py, build_private_data_files / build_env) writes:
  env/extravars   the job's extra vars, survey answers included (text answers are strings)
  env/envvars     the job's environment, credential injections included
  env/<tmpfile>   files a credential injects (a CA certificate, a kubeconfig), referenced from envvars
  inventory/hosts the inventory
  project/        the project checkout: ansible-playbook runs with this as its working directory; here it
                  holds playbooks that import the collection's (docs/awx.md) and, where a test puts them,
                  the release manifests
The events, stdout and the set_stats data (`artifact_data` of the playbook_on_stats event) land in
artifacts/<ident>/, which is what AWX reads back.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Optional

import yaml

from tests.integration.modrun import ansible_env


class PrivateDataDir:
    def __init__(self, root: Path, inventory: dict, extravars: dict, envvars: Optional[dict] = None):
        self.root = Path(root)
        for sub in ("env", "inventory", "project"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "inventory" / "hosts").write_text(yaml.safe_dump(inventory))
        # the project, as docs/awx.md lays it out: a job template runs a playbook file of its project, which
        # imports the collection's playbook (the collection is installed, as in an execution environment)
        for name in ("fleet_upgrade", "fleet_audit", "fleet_report_merge"):
            (self.root / "project" / f"{name}.yml").write_text(yaml.safe_dump(
                [{"name": name, "ansible.builtin.import_playbook": f"crdops.migration.{name}"}]))
        self.envvars = dict(envvars or {})
        self.extravars = dict(extravars)

    def credential_file(self, content: str) -> str:
        """A file a credential injects: private (0600) under env/, as AWX writes it."""
        handle, path = tempfile.mkstemp(dir=self.root / "env")
        with os.fdopen(handle, "w") as fh:
            fh.write(content)
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        return path

    def write(self) -> None:
        env = {k: v for k, v in ansible_env().items() if k.startswith("ANSIBLE_")}
        env.update(self.envvars)
        (self.root / "env" / "envvars").write_text(yaml.safe_dump(env))
        (self.root / "env" / "extravars").write_text(json.dumps(self.extravars))


def run(pdd: PrivateDataDir, playbook: str, *, limit: Optional[str] = None,
        cancel_callback: Optional[Callable[[], bool]] = None, ident: Optional[str] = None, verbosity: int = 0):
    """ansible_runner.run in this process (the way AWX's worker calls it); returns the Runner."""
    import ansible_runner

    pdd.write()
    kwargs = dict(private_data_dir=str(pdd.root), playbook=playbook, quiet=True, ident=ident)
    if limit:
        kwargs["limit"] = limit
    if cancel_callback is not None:
        kwargs["cancel_callback"] = cancel_callback
    if verbosity:
        kwargs["verbosity"] = verbosity
    return ansible_runner.run(**kwargs)


def stats_artifacts(runner) -> dict:
    """set_stats data of the run, as AWX stores it in the job's artifacts."""
    stats = [e for e in runner.events if e.get("event") == "playbook_on_stats"]
    assert len(stats) == 1, [e.get("event") for e in runner.events][-5:]
    return stats[0]["event_data"].get("artifact_data") or {}


def stdout(runner) -> str:
    return runner.stdout.read()


def clean_process_env(monkeypatch) -> None:
    """ansible-runner passes its own environment on; keep the caller's ANSIBLE_* / K8S_AUTH_* out of it, except
    where ansible-core keeps its own files (tools/env.sh: under ~/.cache/crdops, never the user's ~/.ansible)."""
    for key in list(os.environ):
        if key in ("ANSIBLE_HOME", "ANSIBLE_REMOTE_TEMP"):
            continue
        if key.startswith(("ANSIBLE_", "K8S_AUTH_", "CRDOPS_CONNECT")):
            monkeypatch.delenv(key)

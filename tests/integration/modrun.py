"""Run the collection's modules the way Ansible does, without a playbook per call.

A module reads {"ANSIBLE_MODULE_ARGS": {...}} from a file given as its first argument and prints its
JSON result; `_ansible_check_mode` / `_ansible_diff` are how Ansible passes --check / --diff.
The modules are imported by their collection path from a temporary ansible_collections tree.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tools import collection_tree

REPO = Path(__file__).resolve().parents[2]
_TREE = Path(tempfile.mkdtemp(prefix="crdops-collections-"))
collection_tree.link(str(_TREE), str(REPO))
COLLECTIONS_PATH = str(_TREE)
# crd_storage_migrate waits a drain window (default 65 s) after a storage flip before it writes; tests that
# flip and migrate at once use this short one, except where a test passes its own (a test about the drain)
TEST_DRAIN_WINDOW = 1.0


class ModuleRun:
    """A module running in the background (to inject a fault while it works).

    Every run started is kept in `started` until its result is read: a test that fails before that leaves the
    module writing into the shared cluster, where the next test's "nothing written since" would count its
    writes; `stop_leftovers` (run after each test by conftest) kills those."""

    started: list["ModuleRun"] = []

    def __init__(self, name: str, args: dict, check_mode: bool = False, diff: bool = False,
                 env: dict | None = None):
        self.name = name
        if name == "crd_storage_migrate":
            args = dict({"drain_window": TEST_DRAIN_WINDOW}, **args)
        full_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump({"ANSIBLE_MODULE_ARGS": full_args}, fh)
            self.args_file = fh.name
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_")}
        run_env.update(env or {})
        run_env["PYTHONPATH"] = COLLECTIONS_PATH
        self.proc = subprocess.Popen(
            [sys.executable, "-m", f"ansible_collections.crdops.migration.plugins.modules.{name}", self.args_file],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run_env)
        ModuleRun.started.append(self)

    def result(self, timeout: float = 600) -> dict:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            self._forget()
        try:
            parsed = json.loads(out)
        except ValueError as exc:
            raise AssertionError(f"{self.name} printed no JSON (rc={self.proc.returncode}):\n{out}\n{err}") from exc
        parsed["_stderr"] = err
        parsed["_rc"] = self.proc.returncode
        return parsed

    def _forget(self) -> None:
        """The run's result is read, or it was killed: its arguments file goes, and stop_leftovers passes it by."""
        if os.path.exists(self.args_file):
            os.unlink(self.args_file)
        if self in ModuleRun.started:
            ModuleRun.started.remove(self)


def stop_leftovers() -> list[str]:
    """Kill the module runs a test started and never read; returns their names (for the test's log)."""
    stopped = []
    for run in list(ModuleRun.started):
        if run.proc.poll() is None:
            run.proc.kill()
            stopped.append(run.name)
        run.proc.communicate()
        run._forget()
    return stopped


def run_module(name: str, args: dict, check_mode: bool = False, diff: bool = False,
               env: dict | None = None, timeout: float = 600) -> dict:
    return ModuleRun(name, args, check_mode, diff, env).result(timeout)


def wait_for_progress(path, predicate, timeout: float = 120) -> dict:
    """Poll a module's progress_file until `predicate(state)` holds."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = json.loads(Path(path).read_text())
            if predicate(state):
                return state
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"progress in {path} never satisfied the condition")


def auth_args(cluster, context: str | None = None) -> dict:
    return {"kubeconfig": str(cluster.kubeconfig), "context": context or cluster.contexts()[0]}


def ansible_env(collections_path: str = COLLECTIONS_PATH) -> dict:
    """Environment for ansible-* commands: only `collections_path` and the collections that ship with the
    `ansible` package (kubernetes.core) are found; no ANSIBLE_* or K8S_AUTH_* from the caller leaks in."""
    import ansible_collections
    site = os.path.dirname(list(ansible_collections.__path__)[-1])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_"))}
    # where ansible-core keeps its own files (tools/env.sh: under ~/.cache/crdops), not a behaviour setting
    env.update({k: os.environ[k] for k in ("ANSIBLE_HOME", "ANSIBLE_REMOTE_TEMP") if k in os.environ})
    env.update(ANSIBLE_COLLECTIONS_PATH=f"{collections_path}:{site}", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    return env


def ansible_playbook(*args: str, env: dict | None = None, cwd=None, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run ansible-playbook from this interpreter's environment; the caller asserts on the outcome."""
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), *args], capture_output=True,
                          text=True, env=env or ansible_env(), cwd=cwd, timeout=timeout, check=False)

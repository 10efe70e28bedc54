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

REPO = Path(__file__).resolve().parents[2]
_TREE = Path(tempfile.mkdtemp(prefix="crdops-collections-"))
(_TREE / "ansible_collections" / "crdops").mkdir(parents=True)
(_TREE / "ansible_collections" / "crdops" / "migration").symlink_to(REPO)
COLLECTIONS_PATH = str(_TREE)


def run_module(name: str, args: dict, check_mode: bool = False, diff: bool = False,
               env: dict | None = None, timeout: float = 600) -> dict:
    full_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"ANSIBLE_MODULE_ARGS": full_args}, fh)
        args_file = fh.name
    try:
        run_env = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_")}
        run_env.update(env or {})
        run_env["PYTHONPATH"] = COLLECTIONS_PATH
        proc = subprocess.run(
            [sys.executable, "-m", f"ansible_collections.crdops.migration.plugins.modules.{name}", args_file],
            capture_output=True, text=True, env=run_env, timeout=timeout, check=False)
    finally:
        os.unlink(args_file)
    try:
        result = json.loads(proc.stdout)
    except ValueError as exc:
        raise AssertionError(f"{name} printed no JSON (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from exc
    result["_stderr"] = proc.stderr
    result["_rc"] = proc.returncode
    return result


def auth_args(cluster, context: str | None = None) -> dict:
    return {"kubeconfig": str(cluster.kubeconfig), "context": context or cluster.contexts()[0]}

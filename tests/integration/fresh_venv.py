"""A new user's machine for README tests: a fresh venv with ansible-core only, and a HOME of its own.

The venv gets the leg's ansible-core from a wheel folder kept under $CRDOPS_CACHE (filled once from the
package index, keyed by what it holds), so a second run installs offline in seconds. Nothing of the test
venv leaks in: no PYTHONPATH, VIRTUAL_ENV, ANSIBLE_* or K8S_AUTH_*, and HOME is the test's, so `~/.ansible`
and `~/.kube` are the defaults a README names.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("CRDOPS_CACHE", Path.home() / ".cache" / "crdops"))


def _run(argv: list[str], env: dict | None = None, cwd: Path | None = None,
         shell: bool = False) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv if not shell else argv[0], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600, check=False, shell=shell)
    assert proc.returncode == 0, f"{argv} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"
    return proc


def ansible_core_pin() -> str:
    """The leg's ansible-core pin (this interpreter runs it)."""
    from ansible.release import __version__
    return f"ansible-core=={__version__}"


def wheels(requirements: list[str]) -> Path:
    """A folder holding wheels for ``requirements`` (and their dependencies), downloaded once."""
    key = hashlib.sha256(("\n".join(sorted(requirements)) + sys.version).encode()).hexdigest()[:12]
    folder = CACHE / f"wheels-{key}"
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(folder), *requirements])
        (folder / ".complete").touch()
    return folder


@dataclass
class FreshMachine:
    root: Path
    wheel_folder: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    def env(self) -> dict:
        """The environment of a shell with the venv activated: PATH, HOME; pip installs from the wheel folder
        (offline), without compiling bytecode (PIP_NO_COMPILE=0 is pip's spelling of --no-compile)."""
        keep = ("LANG", "LC_ALL", "TMPDIR", "TERM")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update(HOME=str(self.home), PATH=f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
                   VIRTUAL_ENV=str(self.venv), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(self.wheel_folder),
                   PIP_NO_COMPILE="0", PIP_DISABLE_PIP_VERSION_CHECK="1", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_FORCE_COLOR="0",
                   # a module task on the local connection makes its temp folder under `~<remote user>/.ansible/tmp`,
                   # which ansible expands from the passwd entry, not from HOME: without this, the same uid's real home
                   # gets ~/.ansible (the report's file tasks); a new user's would be their own HOME, as set here
                   ANSIBLE_REMOTE_TEMP=str(self.home / ".ansible" / "tmp"))
        return env

    def sh(self, command: str, cwd: Path) -> subprocess.CompletedProcess:
        """One shell command line as a user types it."""
        return _run([command], env=self.env(), cwd=cwd, shell=True)

    def sh_may_fail(self, command: str, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(command, shell=True, capture_output=True, text=True, env=self.env(), cwd=cwd,
                              timeout=600, check=False)


def fresh_machine(root: Path, extra_requirements: list[str]) -> FreshMachine:
    """A venv with ansible-core only (the Ansible a user brings); ``extra_requirements``' wheels are in the
    folder pip installs from, for the README's own pip step."""
    root.mkdir(parents=True, exist_ok=True)
    machine = FreshMachine(root, wheels([ansible_core_pin(), *extra_requirements]))
    machine.home.mkdir(exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(machine.venv)])
    machine.sh(f"python3 -m pip install --quiet '{ansible_core_pin()}'", cwd=root)
    return machine


def galaxy_stand_in(machine: FreshMachine, namespace: str, name: str) -> Path:
    """A collection dependency as `ansible-galaxy` would have put it in the default path from Galaxy (which
    is not reachable offline): the same release, copied from the one the test venv ships."""
    import ansible_collections
    source = next(Path(p) / namespace / name for p in ansible_collections.__path__
                  if (Path(p) / namespace / name / "MANIFEST.json").exists())
    dest = machine.home / ".ansible" / "collections" / "ansible_collections" / namespace / name
    shutil.copytree(source, dest)
    return dest

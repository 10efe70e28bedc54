"""The example execution environment builds a context with ansible-builder (v3 schema), and the collection's
own EE metadata gives the builder its Python requirements."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.modrun import COLLECTIONS_PATH, REPO


def builder() -> str:
    found = Path(sys.executable).parent / "ansible-builder"
    if not found.exists():
        found = shutil.which("ansible-builder")
    if not found:
        pytest.skip("ansible-builder is not installed")
    return str(found)


def test_example_execution_environment_creates_a_build_context(tmp_path):
    definition = REPO / "docs" / "execution-environment.yml"
    assert yaml.safe_load(definition.read_text())["version"] == 3
    proc = subprocess.run([builder(), "create", "-f", str(definition), "--context", str(tmp_path / "ctx"),
                           "--output-filename", "Containerfile"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    containerfile = (tmp_path / "ctx" / "Containerfile").read_text()
    assert "quay.io/centos/centos:stream10" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert 'ansible-core>=2.19,<2.22 ansible-runner>=2.4,<2.5' in containerfile
    requirements = yaml.safe_load((tmp_path / "ctx" / "_build" / "requirements.yml").read_text())
    assert requirements == {"collections": [{"name": "crdops.migration", "version": ">=1.0.0"}]}


def test_collection_metadata_gives_the_builder_its_python_requirements():
    proc = subprocess.run([builder(), "introspect", "--sanitize", COLLECTIONS_PATH],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = yaml.safe_load(proc.stdout.split("---", 1)[1])
    names = sorted(line.split(">")[0].split("=")[0].split("#")[0].strip() for line in data["python"])
    assert names == ["kubernetes", "orjson"], data
    assert all("from collection crdops.migration" in line for line in data["python"])

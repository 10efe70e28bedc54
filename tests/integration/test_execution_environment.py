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


def test_the_tarball_variant_of_the_example_puts_the_tarball_where_the_galaxy_stage_reads_it(tmp_path):
    """docs/execution-environment.yml's commented tarball variant, uncommented as its comments say."""
    text = (REPO / "docs" / "execution-environment.yml").read_text()
    galaxy_entry = ("      - name: crdops.migration\n        version: \">=1.0.0\"\n")
    assert galaxy_entry in text
    tarball_entry = [line.replace("      #   ", "      ", 1) for line in text.splitlines()
                     if line.startswith("      #   ") and ("/build/collections/" in line or "type: file" in line)]
    files = [line[2:] for line in text.split("# The release tarball, next to this file", 1)[1].splitlines()[1:]]
    variant = text.replace(galaxy_entry, "\n".join(tarball_entry) + "\n") + "\n".join(files) + "\n"
    (tmp_path / "crdops-migration-1.0.0.tar.gz").write_bytes(b"stand-in for the release tarball")
    (tmp_path / "execution-environment.yml").write_text(variant)
    proc = subprocess.run([builder(), "create", "-f", str(tmp_path / "execution-environment.yml"), "--context",
                           str(tmp_path / "ctx"), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr + variant
    requirements = yaml.safe_load((tmp_path / "ctx" / "_build" / "requirements.yml").read_text())
    assert requirements == {"collections": [{"name": "/build/collections/crdops-migration-1.0.0.tar.gz",
                                             "type": "file"}]}
    assert (tmp_path / "ctx" / "_build" / "collections" / "crdops-migration-1.0.0.tar.gz").exists()
    # the galaxy stage copies _build to /build before it installs the requirements
    containerfile = (tmp_path / "ctx" / "Containerfile").read_text()
    assert containerfile.index("COPY _build /build") < containerfile.index("ansible-galaxy collection install")

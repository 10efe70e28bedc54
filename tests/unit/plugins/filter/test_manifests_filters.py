# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest
import yaml

from ansible_collections.crdops.migration.plugins.filter.manifests import (
    AnsibleFilterError, FilterModule, crd_upgrade_manifests)
from tests.unit.crdops_fakes import make_crd

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gw"}}


def test_manifests_relative_to_the_base_dir_or_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "bundle.yaml").write_text(
        "---\n" + yaml.safe_dump(NAMESPACE) + "---\n" + yaml.safe_dump(dict(make_crd(), status={"x": 1})))
    got = crd_upgrade_manifests(["crds/*.yaml"], str(tmp_path))
    path = str(tmp_path / "crds" / "bundle.yaml")
    assert got["files"] == [path]
    assert [d["metadata"]["name"] for d in got["crds"]] == ["crontabs.stable.example.com"]
    assert "status" not in got["crds"][0]
    assert got["skipped"] == [{"file": path, "index": "0", "kind": "Namespace"}]
    monkeypatch.chdir(tmp_path)
    assert crd_upgrade_manifests(["crds/*.yaml"]) == got
    assert crd_upgrade_manifests("crds/bundle.yaml", str(tmp_path))["files"] == [path]  # one string: a list of one
    assert crd_upgrade_manifests([], str(tmp_path)) == {"files": [], "crds": [], "skipped": [], "stripped": []}


def test_manifests_fail_with_the_readers_message(tmp_path):
    (tmp_path / "ns.yaml").write_text(yaml.safe_dump(NAMESPACE))
    with pytest.raises(AnsibleFilterError, match="crd_upgrade_target_manifests: no CustomResourceDefinition in ns.yaml"):
        crd_upgrade_manifests(["ns.yaml"], str(tmp_path), "crd_upgrade_target_manifests")


def test_filter_names():
    assert sorted(FilterModule().filters()) == ["crd_upgrade_manifests"]

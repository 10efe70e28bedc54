# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_storage_info as Ansible runs it, against the fake apiserver of the engine tests."""
from __future__ import annotations

import pytest
import yaml

from ansible_collections.crdops.migration.plugins.modules import crd_storage_info
from tests.unit.crdops_fakes import make_crd
from tests.unit.plugins.modules.runner import NAME, connected_fake, run


@pytest.fixture
def cluster(monkeypatch):
    return connected_fake(monkeypatch)


def test_info(cluster, capsys):
    out = run(crd_storage_info, {"names": [NAME], "context": "prod"}, capsys)
    assert out["_rc"] == 0 and out["changed"] is False and out["cluster"] == "test-cluster"
    crd = out["crds"][0]
    assert crd["name"] == NAME and crd["object_count"] == 12 and crd["needs_migration"]
    assert crd["stored_versions"] == ["v1", "v2"] and crd["migration_record"]["valid"] is False
    assert crd["release_in_effect"] is None and crd["release_changes"] == []  # no release_check: not asked
    assert cluster.writes() == [] and getattr(cluster, "closed", False)
    assert cluster.seen["options"].context == "prod" and cluster.seen["kw"]["pool_size"] == 2


def test_unknown_crd_names_cluster(cluster, capsys):
    out = run(crd_storage_info, {"names": ["nope.example.com"]}, capsys)
    assert out["_rc"] == 1 and "nope.example.com" in out["msg"] and "test-cluster" in out["msg"]
    assert out["error"]["kind"] == "selection" and out["error"]["crd"] == "nope.example.com" and out["crds"] == []


def test_connect_timeout_default_and_passed_to_the_engine(cluster, capsys):
    out = run(crd_storage_info, {"names": [NAME]}, capsys)
    assert out["_rc"] == 0 and cluster.seen["kw"]["connect_timeout"] == 10.0
    out = run(crd_storage_info, {"names": [NAME], "connect_timeout": 2.5}, capsys)
    assert cluster.seen["kw"]["connect_timeout"] == 2.5
    out = run(crd_storage_info, {"names": [NAME], "connect_timeout": 0}, capsys)
    assert out["_rc"] == 1 and out["msg"] == "connect_timeout must be > 0, got 0.0"


@pytest.mark.parametrize("option", ["managed_fields_sample", "diff_sample"])
def test_negative_samples_fail_before_connecting(cluster, capsys, option):
    out = run(crd_storage_info, {"names": [NAME], option: -1}, capsys)
    assert out["_rc"] == 1 and out["msg"] == "%s must be >= 0, got -1" % option
    assert out["error"]["kind"] == "bad_input" and out["crds"] == [] and cluster.connects == 0


def test_a_release_bundle_is_read_and_its_other_documents_are_listed(cluster, capsys, tmp_path):
    bundle = tmp_path / "release.yaml"
    bundle.write_text("---\n" + yaml.safe_dump({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
                      + "---\n" + yaml.safe_dump(make_crd(name=NAME, versions=(("v2", True, True),))))
    out = run(crd_storage_info, {"names": [NAME], "target_manifests": [str(bundle)]}, capsys)
    assert out["_rc"] == 0 and out["skipped_documents"] == [{"file": str(bundle), "index": "0", "kind": "Namespace"}]
    assert out["crds"][0]["target_found"] is True and out["crds"][0]["blocked_removals"] == ["v1"]


def test_an_apiextensions_v1beta1_manifest_fails_naming_the_document(cluster, capsys, tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(dict(make_crd(name=NAME), apiVersion="apiextensions.k8s.io/v1beta1")))
    out = run(crd_storage_info, {"names": [NAME], "target_manifests": [str(old)]}, capsys)
    assert out["_rc"] == 1 and out["msg"].startswith("%s document 0: CustomResourceDefinition at apiVersion " % old)
    assert out["error"]["kind"] == "bad_input" and out["skipped_documents"] == [] and cluster.connects == 0

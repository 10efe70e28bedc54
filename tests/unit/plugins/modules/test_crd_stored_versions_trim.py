# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_stored_versions_trim as Ansible runs it, against the fake apiserver of the engine tests."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.modules import crd_stored_versions_trim
from tests.unit.plugins.modules.runner import NAME, connected_fake, run


@pytest.fixture
def cluster(monkeypatch):
    return connected_fake(monkeypatch, objects=3)


def with_record(cluster, proof="confirming-pass"):
    cluster.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION] = json.dumps(
        {"storageVersion": "v2", "generation": 2, "failed": 0, "proof": proof, "crdUid": "u-" + NAME})


def test_trim_refuses_a_record_without_proof_unless_accept_unproven(cluster, capsys):
    with_record(cluster, proof="none")
    refused = run(crd_stored_versions_trim, {"names": [NAME]}, capsys)
    assert refused["_rc"] == 1 and "no proof" in refused["msg"] and "accept_unproven" in refused["msg"]
    assert cluster.crds[NAME]["status"]["storedVersions"] == ["v1", "v2"]
    accepted = run(crd_stored_versions_trim, {"names": [NAME], "accept_unproven": True}, capsys)
    assert accepted["_rc"] == 0 and accepted["changed"] is True
    assert accepted["crds"][0]["migration_record"]["proof"] == "none"


def test_trim_with_diff_then_nothing_to_do(cluster, capsys):
    with_record(cluster)
    trim = run(crd_stored_versions_trim, {"names": [NAME], "_ansible_diff": True}, capsys)
    assert trim["_rc"] == 0 and trim["changed"] is True
    assert trim["diff"][0]["after"] == {"storedVersions": ["v2"]}
    assert cluster.crds[NAME]["status"]["storedVersions"] == ["v2"]
    again = run(crd_stored_versions_trim, {"names": [NAME], "_ansible_diff": True}, capsys)
    assert again["_rc"] == 0 and again["changed"] is False and "diff" not in again


def test_trim_refusal_without_record(cluster, capsys):
    out = run(crd_stored_versions_trim, {"names": [NAME]}, capsys)
    assert out["_rc"] == 1 and "missing" in out["msg"] and cluster.writes() == []
    assert out["error"]["kind"] == "record" and out["error"]["crd"] == NAME
    out = run(crd_stored_versions_trim, {"names": [NAME], "versions": ["v2"], "force": True}, capsys)
    assert out["_rc"] == 1 and "refusing to drop the storage version" in out["msg"]
    assert out["error"]["kind"] == "refusal"


def test_trim_check_mode(cluster, capsys):
    with_record(cluster)
    out = run(crd_stored_versions_trim, {"names": [NAME]}, capsys, check_mode=True)
    assert out["changed"] is True and out["crds"][0]["stored_versions_after"] == ["v2"] and cluster.writes() == []

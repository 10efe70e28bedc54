# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""crd_storage_verify as Ansible runs it: its outcome failures carry error.kind like the engine's errors.

etcd is faked here by its scan results (the reader is tested against a real etcd in tests/integration)."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils import _crdops_glue
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import EtcdScanResult
from ansible_collections.crdops.migration.plugins.modules import crd_storage_verify
from tests.unit.plugins.modules.runner import NAME, connected_fake, run

ARGS = {"names": [NAME], "etcd_url": "http://127.0.0.1:2379"}


class FakeReader:
    """Keys per apiVersion, as an EtcdReader would count them; ``problem`` as explain_no_keys would set it."""

    counts = {}
    problem = None
    closed = False

    def __init__(self, options):
        self.options = options

    def scan(self, crd, group, plural, expected):
        total = sum(FakeReader.counts.values())
        return EtcdScanResult(crd, expected, total=total, counts=dict(FakeReader.counts),
                              mismatched_keys=["/registry/%s/%s/a/obj-0" % (group, plural)])

    def explain_no_keys(self, scan, group, plural, api_objects):
        scan.problem = FakeReader.problem

    def close(self):
        FakeReader.closed = True


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setattr(crd_storage_verify, "EtcdReader", FakeReader)
    FakeReader.counts, FakeReader.problem, FakeReader.closed = {}, None, False
    return connected_fake(monkeypatch, objects=3)


def test_every_key_at_the_storage_version_verifies(cluster, capsys):
    FakeReader.counts = {"stable.example.com/v2": 3}
    out = run(crd_storage_verify, ARGS, capsys)
    assert out["_rc"] == 0 and out["verified"] is True and out["crds"][0]["key_count"] == 3 and FakeReader.closed


def test_a_mismatch_fails_with_its_kind_unless_told_not_to(cluster, capsys):
    FakeReader.counts = {"stable.example.com/v1": 1, "stable.example.com/v2": 2}
    out = run(crd_storage_verify, ARGS, capsys)
    assert out["_rc"] == 1 and out["verified"] is False and FakeReader.closed
    assert out["msg"] == ("cluster test-cluster: CRD %s: 1 of 3 keys in etcd are not stored at stable.example.com/v2 "
                          "(for example /registry/stable.example.com/crontabs/a/obj-0)" % NAME)
    assert out["error"] == dict(out["error"], kind="etcd_mismatch", cluster="test-cluster", crd=NAME, msg=out["msg"])
    out = run(crd_storage_verify, dict(ARGS, fail_on_mismatch=False), capsys)
    assert out["_rc"] == 0 and out["verified"] is False


def test_no_key_while_the_api_lists_objects_fails_even_without_fail_on_mismatch(cluster, capsys):
    FakeReader.problem = "etcd has no key under /registry/stable.example.com/crontabs/"
    out = run(crd_storage_verify, dict(ARGS, fail_on_mismatch=False), capsys)
    assert out["_rc"] == 1 and out["error"]["kind"] == "etcd_prefix" and out["error"]["crd"] == NAME
    assert out["msg"] == "cluster test-cluster: CRD %s: %s" % (NAME, FakeReader.problem)


def test_without_urllib3_it_fails_before_connecting(cluster, capsys, monkeypatch):
    monkeypatch.setattr(_crdops_glue, "HAS_URLLIB3", False)
    out = run(crd_storage_verify, ARGS, capsys)
    assert out["_rc"] == 1 and "urllib3" in out["msg"] and out["error"]["kind"] == "missing_library"
    assert cluster.connects == 0

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import (
    ConflictError, NotFoundError, RecordError, RefusalError)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    RECORD_ANNOTATION, MigrationRecord, validate_record, write_record)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.trim import trim_stored_versions
from tests.unit.crdops_fakes import FakeCluster, make_crd, status

NAME = "crontabs.stable.example.com"


def rec(sv="v2", gen=2, failed=0, proof="confirming-pass"):
    return MigrationRecord(sv, gen, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", 3, 2, 1, 0, failed,
                           proof=proof, crd_uid="u-" + NAME).to_annotation()


@pytest.mark.parametrize("annotations,ok,words", [
    ({}, False, ["missing"]),
    ({RECORD_ANNOTATION: "{not json"}, False, ["unreadable"]),
    ({RECORD_ANNOTATION: rec(sv="v1")}, False, ["stale", "storage version v1", "v2"]),
    ({RECORD_ANNOTATION: rec(gen=1)}, False, ["stale", "generation 1", "generation is 2"]),
    ({RECORD_ANNOTATION: rec(failed=3)}, False, ["3 failed"]),
    ({RECORD_ANNOTATION: rec()}, True, ["valid"]),
    # copied with the CRD's annotations from another cluster (exported bundle, restore): another uid proves nothing
    ({RECORD_ANNOTATION: MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof="etcd-scan",
                                         crd_uid="u-from-the-canary").to_annotation()}, False,
     ["foreign", "u-from-the-canary", "u-" + NAME, "run the migration again"]),
    ({RECORD_ANNOTATION: MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof="etcd-scan").to_annotation()},
     False, ["unbound", "no CRD uid"]),
])
def test_validate_record(annotations, ok, words):
    v = validate_record(Crd.from_api(make_crd(annotations=annotations)))
    assert v.ok is ok
    for w in words:
        assert w in v.reason
    d = v.to_dict()
    assert d["valid"] is ok and d["present"] is (RECORD_ANNOTATION in annotations and "not json" not in annotations.get(RECORD_ANNOTATION, ""))


def test_write_record_refuses_failures_and_changed_crd():
    c = FakeCluster()
    c.add_crd()
    crd = get_crd(c, NAME)
    with pytest.raises(RecordError):
        write_record(c, crd, MigrationRecord("v2", 2, "a", "b", failed=1))
    c.crds[NAME]["spec"]["versions"][0]["storage"] = True
    c.crds[NAME]["spec"]["versions"][1]["storage"] = False
    with pytest.raises(RecordError) as ei:
        write_record(c, crd, MigrationRecord("v2", 2, "a", "b", crd_uid=crd.uid))
    assert "storage version v2 -> v1" in str(ei.value)
    assert c.crd_writes == 0


def test_write_record_refuses_a_crd_created_again_during_the_pass():
    c = FakeCluster()
    c.add_crd()
    crd = get_crd(c, NAME)
    c.crds[NAME]["metadata"]["uid"] = "u-created-again"
    with pytest.raises(RecordError) as ei:
        write_record(c, crd, MigrationRecord("v2", 2, "a", "b", crd_uid=crd.uid))
    assert "deleted and created again" in str(ei.value) and c.crd_writes == 0


def test_write_record_retries_on_conflict_and_uses_rv_lock():
    c = FakeCluster()
    c.add_crd()
    crd = get_crd(c, NAME)
    n = []

    def hook(method, path, q, body):
        if method == "PATCH" and not n:
            n.append(1)
            assert b'"resourceVersion"' in body
            return status(409, "the object has been modified", "Conflict")
    c.hooks.append(hook)
    out = write_record(c, crd, MigrationRecord("v2", 2, "a", "b", crd_uid=crd.uid))
    assert validate_record(out).ok and n == [1]


def trim_cluster(annotations=None, stored=("v1", "v2")):
    c = FakeCluster()
    c.add_crd(annotations=annotations, stored=stored)
    return c


def test_trim_with_valid_record():
    c = trim_cluster({RECORD_ANNOTATION: rec()})
    r = trim_stored_versions(c, NAME)
    assert r.changed and r.before == ["v1", "v2"] and r.after == ["v2"]
    assert c.crds[NAME]["status"]["storedVersions"] == ["v2"]
    patch = list(c.writes())[0]
    assert patch[1].endswith("/%s/status" % NAME)
    assert r.diff()["before"] == {"storedVersions": ["v1", "v2"]}


@pytest.mark.parametrize("annotations,word", [({}, "missing"), ({RECORD_ANNOTATION: rec(gen=1)}, "stale"),
                                              ({RECORD_ANNOTATION: rec(sv="v1")}, "stale")])
def test_trim_refuses_without_valid_record(annotations, word):
    c = trim_cluster(annotations)
    with pytest.raises(RecordError) as ei:
        trim_stored_versions(c, NAME)
    assert word in str(ei.value) and "test-cluster" in str(ei.value) and NAME in str(ei.value)
    assert c.writes() == []


@pytest.mark.parametrize("proof", ["etcd-scan", "confirming-pass"])
def test_trim_takes_a_proven_record(proof):
    c = trim_cluster({RECORD_ANNOTATION: rec(proof=proof)})
    assert trim_stored_versions(c, NAME).record["proof"] == proof


def test_trim_refuses_a_record_without_proof_unless_accepted():
    old = json.loads(rec())
    del old["proof"]  # a record written before the proof existed reads as proof "none"
    for annotation in (rec(proof="none"), json.dumps(old)):
        c = trim_cluster({RECORD_ANNOTATION: annotation})
        with pytest.raises(RecordError) as ei:
            trim_stored_versions(c, NAME)
        assert "no proof" in str(ei.value) and "accept_unproven" in str(ei.value) and NAME in str(ei.value)
        assert [w for w in c.writes() if w[1].endswith("/status")] == []
        r = trim_stored_versions(c, NAME, accept_unproven=True)
        assert r.changed and c.crds[NAME]["status"]["storedVersions"] == ["v2"]


def test_trim_force_overrides_only_record_check():
    c = trim_cluster({})
    r = trim_stored_versions(c, NAME, force=True)
    assert r.changed and r.forced and c.crds[NAME]["status"]["storedVersions"] == ["v2"]
    c2 = trim_cluster({})
    with pytest.raises(RefusalError) as ei:
        trim_stored_versions(c2, NAME, versions=["v2"], force=True)
    assert "storage version v2" in str(ei.value) and "test-cluster" in str(ei.value)
    assert c2.writes() == []


def test_trim_drop_specific_versions():
    c = FakeCluster()
    c.add_crd(versions=(("v1", True, False), ("v2", True, False), ("v3", True, True)), stored=("v1", "v2", "v3"),
              annotations={RECORD_ANNOTATION: rec(sv="v3")})
    r = trim_stored_versions(c, NAME, versions=["v1"])
    assert r.after == ["v2", "v3"]


def test_trim_already_clean_is_noop():
    c = trim_cluster({}, stored=("v2",))
    r = trim_stored_versions(c, NAME)
    assert not r.changed and c.writes() == []


def test_trim_check_mode_writes_nothing():
    c = trim_cluster({RECORD_ANNOTATION: rec()})
    r = trim_stored_versions(c, NAME, check_mode=True)
    assert r.changed and r.after == ["v2"] and c.writes() == []
    assert c.crds[NAME]["status"]["storedVersions"] == ["v1", "v2"]


def test_trim_conflict_is_clear_error():
    c = trim_cluster({RECORD_ANNOTATION: rec()})
    c.hooks.append(lambda m, p, q, b: status(409, "the object has been modified", "Conflict") if m == "PATCH" else None)
    with pytest.raises(ConflictError) as ei:
        trim_stored_versions(c, NAME)
    assert "CRD changed since it was read" in str(ei.value)


def test_trim_lock_uses_resource_version_read():
    c = trim_cluster({RECORD_ANNOTATION: rec()})
    orig = c._route

    def route(method, path, q, body, ct):
        if method == "PATCH":
            c.crds[NAME]["metadata"]["resourceVersion"] = "999"  # concurrent writer
        return orig(method, path, q, body, ct)
    c._route = route
    with pytest.raises(ConflictError):
        trim_stored_versions(c, NAME)
    assert c.crds[NAME]["status"]["storedVersions"] == ["v1", "v2"]


def test_trim_gone_crd():
    c = FakeCluster()
    with pytest.raises(NotFoundError) as ei:
        trim_stored_versions(c, NAME)
    assert "not found" in str(ei.value) and NAME in str(ei.value)


def _settled_record(proof):
    return {RECORD_ANNOTATION: MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof=proof, crd_uid="u-" + NAME,
                                               barrier_mode="settle-fallback").to_annotation()}


def test_a_settle_fallback_record_proven_by_confirming_passes_is_not_trimmed_without_the_opt_in():
    c = trim_cluster(_settled_record("confirming-pass"))
    with pytest.raises(RecordError) as ei:
        trim_stored_versions(c, NAME)
    assert "settle fallback" in str(ei.value) and "accept_settle_fallback" in str(ei.value)
    assert c.crds[NAME]["status"]["storedVersions"] == ["v1", "v2"]
    assert trim_stored_versions(c, NAME, accept_settle_fallback=True).after == ["v2"]


def test_a_settle_fallback_record_proven_from_etcd_is_trimmed():
    c = trim_cluster(_settled_record("etcd-scan"))
    assert trim_stored_versions(c, NAME).after == ["v2"]


def test_the_record_keeps_the_barrier_mode():
    text = _settled_record("confirming-pass")[RECORD_ANNOTATION]
    assert MigrationRecord.from_annotation(text).barrier_mode == "settle-fallback"
    assert "barrier settle-fallback" in validate_record(Crd.from_api(make_crd(annotations={RECORD_ANNOTATION: text}))).reason


def test_a_crd_deleted_since_it_was_selected_is_a_refusal_that_names_it_and_writes_nothing():
    c = FakeCluster()
    with pytest.raises(NotFoundError) as ei:
        trim_stored_versions(c, NAME)
    assert str(ei.value).startswith("[cluster ") and "CRD %s] refusing to trim: CRD not found (HTTP 404)" % NAME in str(ei.value)
    assert ei.value.status == 404 and c.crd_writes == 0

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure half of "nothing to do" (settled.py): what the live CRD, its record and the releases say is left."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import (
    CHECKPOINT_ANNOTATION, RECORD_ANNOTATION, MigrationRecord)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair_diagnosis import REPAIR_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.settled import (
    Releases, Verdict, crd_blockers, decide, differences, release_blockers)
from tests.unit.crdops_fakes import make_crd

NAME = "crontabs.stable.example.com"
DONE = (("v2", True, True),)  # release N+1: v1 removed


def rec(sv="v2", gen=2, failed=0, listed=3, proof="etcd-scan"):
    return MigrationRecord(sv, gen, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", listed, 2, 1, 0, failed,
                           proof=proof, crd_uid="u-" + NAME).to_annotation()


def crd(stored=("v2",), generation=2, **annotations):
    return Crd.from_api(make_crd(versions=DONE, stored=stored, generation=generation, annotations=annotations))


def test_a_trimmed_crd_with_a_proven_record_leaves_nothing():
    assert crd_blockers(crd(**{RECORD_ANNOTATION: rec()})) == []


def test_a_record_stale_only_by_generation_still_counts():
    # applying release N+1 bumps the generation after the record was written; the storage version is the same
    assert crd_blockers(crd(generation=3, **{RECORD_ANNOTATION: rec(gen=2)})) == []


def test_a_record_copied_from_another_crd_never_counts_whatever_its_generation():
    copied = MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof="etcd-scan", crd_uid="u-canary").to_annotation()
    for generation in (2, 3):
        (blocker,) = crd_blockers(crd(generation=generation, **{RECORD_ANNOTATION: copied}))
        assert "foreign" in blocker and "u-canary" in blocker


def test_a_record_written_before_records_named_their_crd_counts_as_before_on_a_finished_crd():
    # a cluster finished by an earlier version: release N+1 bumped the generation after its record
    legacy = MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof="etcd-scan").to_annotation()
    assert crd_blockers(crd(generation=3, **{RECORD_ANNOTATION: legacy})) == []


def test_an_unfinished_repair_is_something_left():
    note = json.dumps({"addedVersions": ["v1"], "crdUid": "u-" + NAME})
    (blocker,) = crd_blockers(crd(**{RECORD_ANNOTATION: rec(), REPAIR_ANNOTATION: note}))
    assert "a repair added v1 back" in blocker


@pytest.mark.parametrize("c,words", [
    (crd(stored=("v1", "v2"), **{RECORD_ANNOTATION: rec()}), ["storedVersions is ['v1', 'v2'], not [v2]"]),
    (crd(), ["no migration record", "missing"]),
    (crd(**{RECORD_ANNOTATION: "{not json"}), ["no migration record", "unreadable"]),
    (crd(**{RECORD_ANNOTATION: rec(sv="v1")}), ["record is for storage version v1, the CRD's is v2"]),
    (crd(**{RECORD_ANNOTATION: rec(failed=1, listed=4)}), ["not of a complete pass with zero failures", "failed 1"]),
    (crd(generation=3, **{RECORD_ANNOTATION: rec(gen=2, listed=5)}), ["not of a complete pass", "listed 5, accounted for 3"]),
    (crd(**{RECORD_ANNOTATION: rec(proof="none")}), ["has no proof"]),
    (crd(**{RECORD_ANNOTATION: rec(), CHECKPOINT_ANNOTATION: "{}"}), ["resume checkpoint"]),
])
def test_each_thing_left_is_named(c, words):
    (blocker,) = crd_blockers(c)
    assert blocker.startswith(NAME + ": ")
    for w in words:
        assert w in blocker, blocker


def test_release_n_outside_release_n_plus_1_and_a_crd_to_create_are_left():
    assert release_blockers(["a"], ["a"], ["a"]) == []
    assert release_blockers(["a"], ["a", "b"], ["a", "c"]) == [
        "b: in release N but not in release N+1, so the storage flip would apply it",
        "c: release N+1 would create it"]


def test_differences_name_the_paths_that_change():
    live = {"metadata": {"labels": {"a": "1"}}, "spec": {"names": {"plural": "x"}, "versions": [1]}}
    after = {"metadata": {"labels": {"a": "2"}}, "spec": {"names": {"plural": "x", "shortNames": ["y"]},
                                                          "versions": [1]}}
    assert differences(live, live) == []
    assert differences(live, after) == [".metadata.labels.a", ".spec.names.shortNames"]
    assert differences(live, after, limit=1) == [".metadata.labels.a"]
    assert differences([1], [2]) == ["."]


def test_the_verdict_says_why_or_what_is_left():
    done = Verdict(nothing_to_do=True, why=["a: checked", "release N+1 applied with no change (dry-run)"],
                   objects_listed=7)
    assert done.summary.startswith("1 CRD(s) at their storage version alone") and "7 objects read" in done.summary
    left = Verdict(blockers=["a", "b", "c", "d", "e"])
    assert left.summary == "a; b; c (and 2 more)"
    assert left.to_dict()["nothing_to_do"] is False


class NoRequests:
    """A transport that must not be used: what the live CRDs say already decides."""
    cluster_label = "test-cluster"

    def request(self, *args, **kwargs):
        raise AssertionError("no request expected")


def test_what_the_crds_say_decides_before_any_request():
    verdict = decide(NoRequests(), [crd()], Releases(), selected=[NAME, "gone.example.com"])
    assert verdict.nothing_to_do is False and verdict.why == []
    assert verdict.blockers[0] == "gone.example.com: selected but not found"
    assert "no migration record" in verdict.blockers[1]
    assert decide(NoRequests(), [], Releases()).blockers == ["no selected CRD exists"]

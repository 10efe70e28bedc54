# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure half of "nothing to do" (nothing_to_do.py): what the live CRD, its record and the releases say is left."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.pass_lease import lease_name
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    CHECKPOINT_ANNOTATION, RECORD_ANNOTATION, MigrationRecord)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.diagnosis import REPAIR_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.nothing_to_do import (
    Peers, Releases, Verdict, crd_blockers, decide, release_blockers)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.crd_changes import differences
from tests.unit.crdops_fakes import FakeCluster, _micro_time, make_crd, status

NAME = "crontabs.stable.example.com"
DONE = (("v2", True, True),)  # release N+1: v1 removed


def rec(sv="v2", gen=2, failed=0, listed=3, proof="etcd-scan"):
    return MigrationRecord(sv, gen, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", listed, 2, 1, 0, failed,
                           proof=proof, crd_uid="u-" + NAME).to_annotation()


def crd(stored=("v2",), generation=2, **annotations):
    return Crd.from_api(make_crd(versions=DONE, stored=stored, generation=generation, annotations=annotations))


def test_a_trimmed_crd_with_a_proven_record_leaves_nothing():
    assert crd_blockers(crd(**{RECORD_ANNOTATION: rec()})) == []


def test_a_record_that_names_its_crd_must_be_of_its_generation():
    # the role re-stamps its record after its own apply of release N+1 (record.carry_record): a generation the record
    # does not name is a spec change nobody proved harmless, whatever storedVersions (any status writer) says
    (blocker,) = crd_blockers(crd(generation=3, **{RECORD_ANNOTATION: rec(gen=2)}))
    assert blocker == (NAME + ": migration record not valid (stale: record is for CRD generation 2, the CRD's "
                       "generation is 3)"), blocker


def test_a_record_copied_from_another_crd_never_counts_whatever_its_generation():
    copied = MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof="etcd-scan", crd_uid="u-canary").to_annotation()
    for generation in (2, 3):
        (blocker,) = crd_blockers(crd(generation=generation, **{RECORD_ANNOTATION: copied}))
        assert "foreign" in blocker and "u-canary" in blocker


def test_a_record_that_names_no_crd_is_missing_whatever_its_generation():
    # nothing ties it to this CRD (made by hand, or copied from a cluster where it was written before records were
    # bound): a stale generation must not make it count where a current one does not
    unbound = MigrationRecord("v2", 2, "a", "b", 3, 2, 1, 0, 0, proof="etcd-scan").to_annotation()
    for generation in (2, 3):
        (blocker,) = crd_blockers(crd(generation=generation, **{RECORD_ANNOTATION: unbound}))
        assert "unbound: the migration record names no CRD uid" in blocker, (generation, blocker)


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


# -- who else acts on the CRD: another run's pass Lease, an apiserver that does not serve the storage version --------

def done_cluster():
    """A cluster whose CRD is done (storedVersions [v2], a proven record of its generation), nothing else left."""
    fake = FakeCluster()
    live = Crd.from_api(fake.add_crd(versions=DONE, stored=("v2",), annotations={RECORD_ANNOTATION: rec()}))
    return fake, live


def hold_lease(fake, age, namespace="default", holder="crdops@other-host/pid-7/0a1b2c3d"):
    """The pass Lease of NAME as another run writes it, last renewed ``age`` seconds ago by the fake's clock."""
    fake.leases[(namespace, lease_name(NAME))] = {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease_name(NAME), "namespace": namespace, "resourceVersion": "7"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30, "renewTime": _micro_time(fake.now - age)}}


def test_a_pass_lease_another_run_still_renews_is_something_left():
    fake, live = done_cluster()
    assert decide(fake, [live], Releases()).nothing_to_do is True  # no Lease: 404
    hold_lease(fake, age=5)
    verdict = decide(fake, [live], Releases())
    assert verdict.nothing_to_do is False
    (blocker,) = verdict.blockers
    assert blocker.startswith(NAME + ": pass Lease held by holder crdops@other-host/pid-7/0a1b2c3d, last renewed ")
    assert blocker.endswith("(another run is writing)") and "5 s ago" in blocker, blocker
    assert verdict.objects_listed == 0 and verdict.why == []  # cheap checks first: the objects were not listed


def test_an_expired_pass_lease_is_not_and_the_namespace_is_the_runs():
    fake, live = done_cluster()
    hold_lease(fake, age=31)  # renewTime + 30 s is in the past by the apiserver's clock: a killed run's Lease
    assert decide(fake, [live], Releases()).nothing_to_do is True
    hold_lease(fake, age=1, namespace="crdops")
    assert decide(fake, [live], Releases()).nothing_to_do is True  # not where this run's Leases are
    (blocker,) = decide(fake, [live], Releases(), peers=Peers(lease_namespace="crdops")).blockers
    assert "pass Lease held by holder crdops@other-host" in blocker


def test_a_pass_lease_that_cannot_be_read_is_a_doubt():
    fake, live = done_cluster()
    fake.hooks.append(lambda method, path, query, body: status(
        403, 'leases.coordination.k8s.io "%s" is forbidden' % lease_name(NAME), "Forbidden")
        if "/leases/" in path else None)
    (blocker,) = decide(fake, [live], Releases()).blockers
    assert blocker.startswith(NAME + ": could not check the pass Lease default/" + lease_name(NAME) + ": HTTP 403")
    assert "grant get on leases.coordination.k8s.io in namespace default" in blocker


class Unreachable:
    cluster_label = "test-cluster"

    def request(self, *args, **kwargs):
        raise CrdOpsError("connection refused", cluster="test-cluster")


def test_every_apiserver_given_must_serve_and_store_at_the_storage_version():
    fake, live = done_cluster()
    lagging, bare = FakeCluster(), FakeCluster()
    lagging.crds = fake.crds
    lagging.stale_storage_view = {NAME: "v1"}  # its informer still has the CRD before the flip to v2
    members = {"https://10.0.0.1:6443": fake, "https://10.0.0.2:6443": lagging, "https://10.0.0.3:6443": bare,
               "https://10.0.0.4:6443": Unreachable()}
    verdict = decide(fake, [live], Releases(), peers=Peers(apiservers=members))
    assert verdict.nothing_to_do is False
    assert len(verdict.blockers) == 3, verdict.blockers
    assert verdict.blockers[0].startswith(NAME + ": apiserver https://10.0.0.2:6443 does not store at v2 yet")
    assert verdict.blockers[1] == NAME + ": apiserver https://10.0.0.3:6443 does not serve crontabs at v2"
    assert verdict.blockers[2] == (NAME + ": apiserver https://10.0.0.4:6443 could not be asked what it serves "
                                   "(connection refused)")
    assert decide(fake, [live], Releases(), peers=Peers(apiservers={"https://10.0.0.1:6443": fake})).nothing_to_do

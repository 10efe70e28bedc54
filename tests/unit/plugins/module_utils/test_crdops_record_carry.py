# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The record follows our own spec writes (record.carry_record): after the role's apply of release N+1 bumped the
generation, the record names the new one, and only when nothing but that write happened in between. The states
where it must not (another writer's change at the same moment, a conflict with a status update) cannot be produced
on cue by a real apiserver; the role's carry on a real one is in tests/integration/test_role_nothing_to_do.py."""
from __future__ import annotations

import json

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    RECORD_ANNOTATION, MigrationRecord, carry_record, validate_record)
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"
DONE = (("v2", True, True),)


def record(gen=2, uid="u-" + NAME):
    return MigrationRecord("v2", gen, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", 3, 2, 1, 0, 0,
                           proof="etcd-scan", crd_uid=uid).to_annotation()


def cluster(text=None, stored=("v2",)):
    """(fake, the CRD as read before our write): generation 2, its record (``text``, default one of generation 2)."""
    fake = FakeCluster()
    before = Crd.from_api(fake.add_crd(versions=DONE, stored=stored, generation=2,
                                       annotations={RECORD_ANNOTATION: text or record()}))
    return fake, before


def our_write(fake, generation=3):
    """What the apply of release N+1 leaves: the spec changed, so the generation moved on."""
    fake.crds[NAME]["metadata"]["generation"] = generation
    fake.crds[NAME]["metadata"]["resourceVersion"] = fake.next_rv()


def live_record(fake):
    return json.loads(fake.crds[NAME]["metadata"]["annotations"][RECORD_ANNOTATION])


def test_the_record_names_the_generation_our_write_made_and_says_nothing_else_new():
    fake, before = cluster()
    our_write(fake)
    assert carry_record(fake, before, 3) == "carried to generation 3"
    assert live_record(fake) == dict(json.loads(record()), generation=3)
    assert validate_record(Crd.from_api(fake.crds[NAME])).ok
    # the write is locked on the resourceVersion read just before it
    (patch,) = [c for c in fake.calls if c[0] == "PATCH"]
    assert patch[1].endswith("/" + NAME)


def test_no_generation_change_or_no_valid_record_writes_nothing():
    fake, before = cluster()
    assert carry_record(fake, before, 2) is None
    for text in (record(gen=1), record(uid="u-elsewhere"), record(uid="")):  # stale, foreign, unbound
        fake, before = cluster(text)
        our_write(fake)
        assert carry_record(fake, before, 3) is None
        assert fake.writes() == []


def test_a_generation_our_write_alone_did_not_make_is_not_carried():
    fake, before = cluster()
    our_write(fake, generation=4)  # someone else changed the spec between our read and our apply
    assert carry_record(fake, before, 4) == "not carried: generation 2 -> 4, not our write alone"
    assert fake.writes() == [] and live_record(fake)["generation"] == 2


def test_a_crd_changed_after_our_write_is_not_carried():
    fake, before = cluster()
    our_write(fake)
    fake.crds[NAME]["metadata"]["generation"] = 4  # a writer after us
    assert carry_record(fake, before, 3).startswith("not carried: the CRD changed after the write (generation 4")
    fake, before = cluster()
    our_write(fake)
    fake.crds[NAME]["status"]["storedVersions"] = ["v1", "v2"]  # the apiserver stored at another version meanwhile
    assert "storedVersions ['v1', 'v2']" in carry_record(fake, before, 3)
    assert fake.writes() == [] and live_record(fake)["generation"] == 2


def test_a_status_update_in_between_is_read_again():
    fake, before = cluster()
    our_write(fake)
    conflicts = []

    def conflict_once(method, path, query, body):
        if method == "PATCH" and not conflicts:
            conflicts.append(path)
            return status(409, "the object has been modified", "Conflict")
        return None

    fake.hooks.append(conflict_once)
    assert carry_record(fake, before, 3) == "carried to generation 3"
    assert len(conflicts) == 1 and live_record(fake)["generation"] == 3

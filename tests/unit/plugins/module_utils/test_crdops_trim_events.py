# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Events on trim: a trim and a refusal each leave an Event on the CRD; an Event never fails the trim."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import (
    ConflictError, RecordError, RefusalError)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    RECORD_ANNOTATION, MigrationRecord)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.trim import trim_stored_versions
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"


def cluster(annotations):
    c = FakeCluster()
    c.add_crd(annotations=annotations)
    return c


def valid_record():
    return {RECORD_ANNOTATION: MigrationRecord("v2", 2, "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z",
                                               3, 2, 1, 0, 0, proof="confirming-pass",
                                               crd_uid="u-crontabs.stable.example.com").to_annotation()}


def test_a_trim_posts_stored_versions_trimmed_about_the_crd():
    c = cluster(valid_record())
    r = trim_stored_versions(c, NAME)
    assert r.changed and r.event_error is None and len(c.events) == 1
    event = c.events[0]
    assert event["reason"] == "StoredVersionsTrimmed" and event["type"] == "Normal"
    assert event["involvedObject"]["kind"] == "CustomResourceDefinition" and event["involvedObject"]["name"] == NAME
    assert "['v1', 'v2'] to ['v2']" in event["message"]


def test_a_forced_trim_posts_a_warning():
    c = cluster({})
    trim_stored_versions(c, NAME, force=True)
    assert [e["type"] for e in c.events] == ["Warning"] and "WITHOUT a valid migration record" in c.events[0]["message"]


@pytest.mark.parametrize("annotations,versions,error", [({}, None, RecordError), (valid_record(), ["v2"], RefusalError)])
def test_a_refusal_posts_stored_versions_trim_refused(annotations, versions, error):
    c = cluster(annotations)
    errors = []
    with pytest.raises(error):
        trim_stored_versions(c, NAME, versions=versions, event_errors=errors)
    assert [(e["reason"], e["type"]) for e in c.events] == [("StoredVersionsTrimRefused", "Warning")]
    assert "not trimmed" in c.events[0]["message"] and errors == []
    assert c.crds[NAME]["status"]["storedVersions"] == ["v1", "v2"]


def test_a_lost_optimistic_lock_posts_a_refusal():
    c = cluster(valid_record())
    c.hooks.append(lambda m, p, q, b: status(409, "the object has been modified", "Conflict")
                   if m == "PATCH" else None)
    with pytest.raises(ConflictError):
        trim_stored_versions(c, NAME)
    assert [e["reason"] for e in c.events] == ["StoredVersionsTrimRefused"]


def test_check_mode_posts_no_event():
    c = cluster({})
    trim_stored_versions(c, NAME, force=True, check_mode=True)
    with pytest.raises(RecordError):
        trim_stored_versions(c, NAME, check_mode=True)
    assert c.events == [] and c.writes(include_events=True) == []


def test_an_event_that_cannot_be_posted_is_reported_never_raised():
    def forbid_events(method, path, q, body):
        if path.endswith("/events"):
            return status(403, 'events is forbidden: User "x" cannot create resource "events"', "Forbidden")
        return None

    c = cluster(valid_record())
    c.hooks.append(forbid_events)
    r = trim_stored_versions(c, NAME)
    assert r.changed and c.crds[NAME]["status"]["storedVersions"] == ["v2"]
    assert "event StoredVersionsTrimmed not posted: HTTP 403" in r.event_error and r.to_dict()["event_error"]

    c = cluster({})
    c.hooks.append(forbid_events)
    errors = []
    with pytest.raises(RecordError) as err:
        trim_stored_versions(c, NAME, event_errors=errors)
    assert "migration record missing" in str(err.value) or "missing" in str(err.value)
    assert len(errors) == 1 and NAME in errors[0] and "StoredVersionsTrimRefused not posted: HTTP 403" in errors[0]

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A record authorises a trim only when its counts account for every listed object."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    RECORD_ANNOTATION, MigrationRecord, validate_record)
from tests.unit.crdops_fakes import make_crd


def validate(**counts):
    data = {"storageVersion": "v2", "generation": 2, "startedAt": "a", "completedAt": "b",
            "crdUid": "u-crontabs.stable.example.com"}
    data.update(counts)
    return validate_record(Crd.from_api(make_crd(annotations={RECORD_ANNOTATION: json.dumps(data)})))


@pytest.mark.parametrize("counts,ok", [
    (dict(listed=10, rewritten=6, unchanged=2, gone=1, failed=0, skippedByCheckpoint=1), True),
    (dict(listed=10, rewritten=6, unchanged=2, gone=1, failed=0, skippedByCheckpoint=0), False),  # one unaccounted
    (dict(listed=10, rewritten=6, unchanged=2, gone=1, failed=0, skippedByCheckpoint=2), False),  # one too many
    (dict(listed=10, rewritten=10, failed=1, skippedByCheckpoint=0), False),
    (dict(listed=3, rewritten=4, unchanged=-1, skippedByCheckpoint=0), False),
    # a record from before skippedByCheckpoint existed: valid only when rewritten+unchanged+gone == listed
    (dict(listed=10, rewritten=6, unchanged=3, gone=1, failed=0), True),
    (dict(listed=10, rewritten=6, unchanged=2, gone=1, failed=0), False),
])
def test_accounting_identity(counts, ok):
    v = validate(**counts)
    assert v.ok is ok, v.reason
    if not ok and not counts.get("failed"):
        assert v.reason.startswith("unaccounted") and "run the migration again" in v.reason


def test_new_fields_round_trip_and_old_annotation_reads_zero():
    rec = MigrationRecord("v2", 2, "a", "b", 5, 3, 1, 0, 0, skipped_by_checkpoint=1, managed_fields_rewritten=4,
                          managed_fields_dropped=2, objects_with_stale_managed_fields=3)
    data = json.loads(rec.to_annotation())
    assert (data["skippedByCheckpoint"], data["managedFieldsRewritten"], data["managedFieldsDropped"],
            data["objectsWithStaleManagedFields"]) == (1, 4, 2, 3)
    assert MigrationRecord.from_annotation(rec.to_annotation()) == rec
    old = MigrationRecord.from_annotation(json.dumps({"storageVersion": "v2", "generation": 2, "listed": 1}))
    assert (old.skipped_by_checkpoint, old.managed_fields_rewritten) == (0, 0)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the repair holds and checks before it writes: the pass Lease, the storage diff, the owners of spec.versions.

The real apiserver's side (managedFields after the edits, the Lease, etcd) is tests/integration/test_repair_guards.py.
"""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import RefusalError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.pass_lease import (
    LeaseHeldError, PassLease)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.repair import repair_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.diagnosis import REPAIR_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.versions_owners import (
    owner_entries, owners, restored)
from tests.unit.plugins.module_utils.test_crdops_repair import NAME, broken, opts

HELM = {"manager": "helm", "operation": "Apply", "apiVersion": "apiextensions.k8s.io/v1", "time": "2026-01-01T00:00:00Z",
        "fieldsV1": {"f:spec": {"f:group": {}, "f:versions": {}}}}
REPAIR = {"manager": "crdops.migration", "operation": "Update", "apiVersion": "apiextensions.k8s.io/v1",
          "time": "2026-12-01T15:00:00Z", "fieldsV1": {"f:spec": {"f:versions": {}}}}
KUBECTL = {"manager": "kubectl-create", "operation": "Update", "apiVersion": "apiextensions.k8s.io/v1",
           "time": "2026-01-01T00:00:00Z", "fieldsV1": {"f:spec": {"f:versions": {}}}}


def object_writes(c):
    """Writes to the custom objects (not the Lease, not the CRD)."""
    return [w for w in c.writes() if "/leases" not in w[1] and "/customresourcedefinitions/" not in w[1]]


def test_the_repairs_ownership_goes_back_to_the_owner_that_still_has_an_entry():
    helm_after_edit = dict(HELM, fieldsV1={"f:spec": {"f:group": {}}})
    out = restored([helm_after_edit, REPAIR], [HELM])
    assert out == [HELM]  # the repair's entry owned nothing else: it is gone


def test_an_owner_whose_entry_went_away_is_given_its_entry_back():
    out = restored([REPAIR], owner_entries([KUBECTL, {"manager": "other", "fieldsV1": {"f:metadata": {}}}]))
    assert owners(out) == ["kubectl-create"]
    assert out[0]["fieldsV1"] == {"f:spec": {"f:versions": {}}} and out[0]["operation"] == "Update"


def test_nobody_owned_it_before_so_nobody_owns_it_after():
    assert owners(restored([REPAIR, HELM], [])) == []


def test_the_repair_holds_the_pass_lease_and_fails_naming_the_holder_when_another_run_has_it():
    c = broken()
    other = PassLease(c, NAME, identity="another-run").acquire(0)
    with pytest.raises(LeaseHeldError) as err:
        repair_crd(c, NAME, opts(lease_wait=0))
    assert "another-run" in str(err.value)
    assert c.spec_writes == [] and object_writes(c) == []  # nothing edited, nothing re-stored
    other.release()
    res = repair_crd(c, NAME, opts())
    assert res.lease["holder"] != "another-run" and res.lease["release_error"] is None
    assert c.leases == {}  # released at the end


def _diff(removed=None, unverified=None):
    return lambda crd: {"checked": True, "compared": 3, "key_count": 5, "removed": removed or {},
                        "unverified": unverified}


def test_a_storage_diff_that_finds_a_loss_stops_the_repair_before_the_re_store():
    c = broken()
    with pytest.raises(RefusalError) as err:
        repair_crd(c, NAME, opts(), storage_diff=_diff({".spec.legacy": 2}))
    text = str(err.value)
    assert "deletes .spec.legacy (2 of 3 compared)" in text and "accept_pruning" in text and NAME in text
    assert object_writes(c) == [] and c.spec_writes == [["v2", "v1"]]  # readable again, not re-stored
    assert json.loads(c.crds[NAME]["metadata"]["annotations"][REPAIR_ANNOTATION])["addedVersions"] == ["v1"]
    res = repair_crd(c, NAME, opts(accept_pruning=True), storage_diff=_diff({".spec.legacy": 2}))
    assert res.restore["rewritten"] == 3 and any("accept_pruning is true" in w for w in res.warnings)


def test_objects_the_diff_could_not_compare_stop_it_too():
    with pytest.raises(RefusalError) as err:
        repair_crd(broken(), NAME, opts(), storage_diff=_diff(unverified="v1 is not served and ..."))
    assert "could not compare some objects: v1 is not served" in str(err.value)


def test_without_etcd_the_diff_is_reported_not_checked():
    res = repair_crd(broken(), NAME, opts())
    assert res.storage_diff == {"checked": False, "reason": "no etcd_url: the stored values were not compared"}
    assert any("without etcd_url that was not checked" in w for w in res.warnings)

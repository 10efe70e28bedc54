# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The confirming pass classifies a re-read object's managedFields with the main pass's policy.

When another client writes an object between the confirming pass's listing and its no-op write, the write's
resourceVersion test fails and the object is read again. What that read's entries need must be decided by the rules
of the run (the versions release N+1 removes, appliers' declarations kept while served), not by conversion None's
"every other version", which rewrote entries at a version that stays and erased appliers' declarations.
"""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.listing import ObjectRef
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.managed_fields import ManagedFieldsPolicy
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.object_write import confirm_object
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_mf_fakes import entry, stale_cluster

NAME = "crontabs.stable.example.com"
GROUP = "stable.example.com"
KEY = "a/obj-00000"


def raced():
    """An object whose entries are an applier's at v1 and a controller's status writes at v1 and v2, listed at a
    resourceVersion another client has moved on from."""
    c = stale_cluster(1)
    c.set_managed_fields(NAME, KEY, [entry("argocd", GROUP + "/v1"),
                                     entry("ctl", GROUP + "/v1", "Update", "status"),
                                     entry("ctl", GROUP + "/v2", "Update", "status")])
    listed = c.objects[NAME][KEY]["rv"]
    c.objects[NAME][KEY]["rv"] = c.next_rv()  # the other client's write
    return c, ObjectRef("a", "obj-00000", listed)


def managed_fields_writes(c):
    return [ops for _path, ops in c.json_patches if len(ops) > 1]


def test_a_version_that_stays_served_is_not_touched_by_the_confirming_re_read():
    c, ref = raced()
    crd = get_crd(c, NAME)
    nothing_removed = ManagedFieldsPolicy(GROUP, "v2", "None", frozenset(), served=frozenset(["v1", "v2"]))
    confirm_object(c, crd, ref, nothing_removed)
    assert managed_fields_writes(c) == [] and [e["apiVersion"] for e in c.mf(NAME, KEY)] == [
        GROUP + "/v1", GROUP + "/v1", GROUP + "/v2"]


def test_an_appliers_declaration_survives_the_confirming_re_read_and_a_leftover_is_still_fixed():
    c, ref = raced()
    crd = get_crd(c, NAME)
    keep = ManagedFieldsPolicy(GROUP, "v2", "None", frozenset(["v1"]), served=frozenset(["v1", "v2"]),
                               keep_declared=True)
    confirm_object(c, crd, ref, keep)
    # the Apply entry stays at v1; ctl's v1 status entry would duplicate its v2 one, so it is removed
    assert [(e["manager"], e["apiVersion"]) for e in c.mf(NAME, KEY)] == [
        ("argocd", GROUP + "/v1"), ("ctl", GROUP + "/v2")]


def test_without_the_runs_policy_the_old_rule_rewrites_every_other_version():
    # what the confirming pass did before it was given the run's policy: the applier's declaration is gone
    c, ref = raced()
    confirm_object(c, get_crd(c, NAME), ref)
    assert [(e["manager"], e["apiVersion"]) for e in c.mf(NAME, KEY)] == [
        ("argocd", GROUP + "/v2"), ("ctl", GROUP + "/v2")]


def test_a_write_since_the_run_began_at_a_served_removed_version_is_kept_as_evidence():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha.server_clock import parse_time
    began = parse_time("2026-12-01T15:00:00Z")
    policy = ManagedFieldsPolicy(GROUP, "v2", "None", frozenset(["v1"]), served=frozenset(["v1", "v2"]),
                                 keep_declared=True, keep_written_since=began)
    before = dict(entry("kubectl-create", GROUP + "/v1", "Update"), time="2026-12-01T14:00:00Z")
    during = dict(entry("widget-ctrl", GROUP + "/v1", "Update", "status"), time="2026-12-01T15:00:20Z")
    stale = policy.classify([before, during])
    assert [(f.manager, f.action) for f in stale.fixes] == [("kubectl-create", "rewritten"), ("widget-ctrl", "untouched")]
    # once the version is gone from the CRD nothing is kept: the apiserver can no longer convert it
    gone = ManagedFieldsPolicy(GROUP, "v2", "None", frozenset(["v1"]), served=frozenset(["v2"]),
                               keep_declared=True, keep_written_since=began)
    assert [f.action for f in gone.classify([before, during]).fixes] == ["rewritten", "rewritten"]

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The preflight plans from a sample: one LIST of the first objects gives the dry-run sample and the count."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.listing import count_objects, first_page
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import (
    RestoreOptions, fix_managed_fields, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import resp, status
from tests.unit.crdops_mf_fakes import entry, stale_cluster

NAME = "crontabs.stable.example.com"
G = "stable.example.com"


def cluster(n=40):
    c = stale_cluster(n, NAME)
    c.set_managed_fields(NAME, "a/obj-00001", [entry("argocd", G + "/v1")])
    if n > 30:
        c.set_managed_fields(NAME, "a/obj-00030", [entry("flux", G + "/v1")])  # outside the sample
    return c


def lists(c):
    return [q for m, p, q in c.calls if m == "GET" and p.endswith("/crontabs")]


def test_first_page_gives_the_objects_and_the_count_in_one_request():
    c = cluster()
    refs, count = first_page(c, get_crd(c, NAME), 5)
    assert [r.name for r in refs] == ["obj-%05d" % i for i in range(5)] and count == 40
    assert lists(c) == [{"limit": "5"}]
    assert count_objects(c, get_crd(c, NAME)) == 40


def test_first_page_of_everything_counts_without_remaining_and_unknown_is_none():
    c = cluster(3)
    assert first_page(c, get_crd(c, NAME), 5)[1] == 3
    # more to come, but no remainingItemCount (a server that does not count, e.g. with a selector)
    c.hooks.append(lambda m, p, q, b: resp(200, {"metadata": {"continue": "x"}, "items": [
        {"metadata": {"namespace": "a", "name": "obj-00000", "resourceVersion": "7"}}]}))
    assert first_page(c, get_crd(c, NAME), 1)[1] is None


def test_sample_only_lists_once_dry_runs_the_sample_and_writes_nothing():
    c = cluster()
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(check_mode=True, sample_only=True, preflight_sample=5))
    assert lists(c) == [{"limit": "5"}] and c.writes() == [] and len(c.dry_runs()) == 5
    assert (r.listed, r.object_count, r.sampled, r.complete, r.pages) == (5, 40, True, True, 1)
    assert r.objects_with_stale_managed_fields == 1  # obj-00001 only: the sample's plan
    assert r.to_dict()["object_count"] == 40


def test_sample_only_reports_rejections_and_a_list_failure_stops_the_plan():
    c = cluster()
    c.hooks.append(lambda m, p, q, b: status(422, 'admission webhook "deny" denied the request', "Invalid")
                   if m == "PATCH" and p.endswith("obj-00002") else None)
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(check_mode=True, sample_only=True, preflight_sample=3))
    assert [x["name"] for x in r.predicted_rejections] == ["obj-00002"]
    c.hooks[:] = [lambda m, p, q, b: status(403, "forbidden", "Forbidden") if m == "GET" and "limit" in q else None]
    bad = migrate_crd(c, get_crd(c, NAME), RestoreOptions(check_mode=True, sample_only=True))
    assert not bad.complete and bad.aborted_kind == "permission"


def test_sample_only_for_a_done_crd_plans_the_sampled_managed_fields_and_needs_check_mode():
    c = cluster()
    r = fix_managed_fields(c, get_crd(c, NAME), RestoreOptions(check_mode=True, sample_only=True, preflight_sample=0))
    assert lists(c) == [{"limit": "1"}] and c.dry_runs() == [] and (r.listed, r.object_count) == (1, 40)
    with pytest.raises(BadInputError, match="check mode"):
        RestoreOptions(sample_only=True).validate()

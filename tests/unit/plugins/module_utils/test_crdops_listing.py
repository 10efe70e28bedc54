# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ApiError, PermissionDenied
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.listing import (
    ListStats, count_objects, list_pages)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import ACCEPT_PARTIAL_LIST
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"


def cluster(n):
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, n, namespaces=("x", "y"))
    return c


def test_pages_stream_all_objects_at_storage_version_metadata_only():
    c = cluster(23)
    accepts = []
    orig = c.request

    def spy(method, path, **kw):
        accepts.append((path, kw.get("accept")))
        return orig(method, path, **kw)
    c.request = spy
    stats = ListStats()
    pages = list(list_pages(c, get_crd(c, NAME), 10, stats=stats))
    assert [len(p) for p in pages] == [10, 10, 3]
    keys = [r.key for p in pages for r in p]
    assert keys == sorted(c.objects[NAME]) and stats.listed == 23 and stats.pages == 3
    assert all(path == "/apis/stable.example.com/v2/crontabs" and a == ACCEPT_PARTIAL_LIST
               for path, a in accepts[1:])
    assert pages[0][0].resource_version == c.objects[NAME][keys[0]]["rv"]


def test_410_with_inconsistent_continue_token_resumes():
    c = cluster(9)
    fired = []

    def hook(method, path, q, body):
        if q.get("continue") == sorted(c.objects[NAME])[3] and not fired:
            fired.append(1)
            return status(410, "too old", "Expired", continue_token=sorted(c.objects[NAME])[3])
    c.hooks.append(hook)
    stats = ListStats()
    keys = [r.key for p in list_pages(c, get_crd(c, NAME), 4, stats=stats) for r in p]
    assert keys == sorted(c.objects[NAME])  # no duplicates, nothing missed
    assert stats.relists == 0 and stats.resumed_inconsistent == 1


def test_410_without_token_relists_from_scratch():
    c = cluster(9)
    fired = []

    def hook(method, path, q, body):
        if q.get("continue") and not fired:
            fired.append(1)
            return status(410, "too old", "Expired")
    c.hooks.append(hook)
    stats = ListStats()
    keys = [r.key for p in list_pages(c, get_crd(c, NAME), 4, stats=stats) for r in p]
    assert stats.relists == 1 and len(keys) == 13 and set(keys) == set(c.objects[NAME])


def test_410_forever_gives_up():
    c = cluster(9)
    c.hooks.append(lambda m, p, q, b: status(410, "too old", "Expired") if q.get("continue") else None)
    with pytest.raises(ApiError) as ei:
        list(list_pages(c, get_crd(c, NAME), 4, max_relists=3))
    assert "expired" in str(ei.value) and NAME in str(ei.value)


def test_list_403_raises_with_context():
    c = cluster(3)
    c.hooks.append(lambda m, p, q, b: status(403, 'crontabs is forbidden: User "u" cannot list', "Forbidden")
                   if "crontabs" in p and "customresourcedefinitions" not in p else None)
    with pytest.raises(PermissionDenied) as ei:
        list(list_pages(c, get_crd(c, NAME), 4))
    assert "test-cluster" in str(ei.value) and "cannot list" in str(ei.value)


def test_count_objects():
    c = cluster(42)
    assert count_objects(c, get_crd(c, NAME)) == 42
    assert c.calls[-1][2]["limit"] == "1"
    assert count_objects(cluster(0), get_crd(cluster(0), NAME)) == 0
    c1 = cluster(1)
    assert count_objects(c1, get_crd(c1, NAME)) == 1


def test_count_unknown_without_remaining_item_count():
    c = cluster(5)
    orig = c._route

    def route(*a):
        r = orig(*a)
        if a[0] == "GET" and "crontabs" in a[1] and "customresource" not in a[1]:
            body = r.json()
            body["metadata"].pop("remainingItemCount", None)
            import json
            r.data = json.dumps(body).encode()
        return r
    c._route = route
    assert count_objects(c, get_crd(c, NAME)) is None

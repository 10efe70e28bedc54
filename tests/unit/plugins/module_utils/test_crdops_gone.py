# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Gone means gone (DESIGN invariant 8): a 404 on the write is "deleted" only when it names the object and a
read at a version every apiserver serves agrees. The lagging-member answer is a fault injected on cue here."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.object_write import confirm_version
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import RECORD_ANNOTATION
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, migrate_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import ApiResponse
from tests.unit.crdops_fakes import FakeCluster, make_crd, not_found
from tests.unit.crdops_mf_fakes import MfCluster, entry

NAME = "crontabs.stable.example.com"
G = "stable.example.com"
PLAIN_404 = ApiResponse(404, {"Content-Type": "text/plain; charset=utf-8"}, b"404 page not found\n")


def cluster(n=10, cls=FakeCluster, **kw):
    c = cls()
    c.add_crd(**kw)
    c.add_objects(NAME, n, namespaces=("a",))
    return c


def run(c):
    return migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=4, workers=2))


def on_write_of(c, name, answer, delete=False):
    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith("/" + name):
            if delete:
                c.objects[NAME].pop("a/" + name, None)
            return answer
    c.hooks.append(hook)


def test_notfound_naming_the_object_confirmed_by_a_get_at_the_old_storage_version_is_gone():
    c = cluster()
    on_write_of(c, "obj-00004", None, delete=True)
    r = run(c)
    assert (r.listed, r.rewritten, r.gone, r.failed) == (10, 9, 1, 0) and r.ok and r.record_written
    confirm = [p for m, p, q in c.calls if m == "GET" and p.endswith("/obj-00004")]
    assert confirm == ["/apis/%s/v1/namespaces/a/crontabs/obj-00004" % G]  # v1: served by every apiserver


def test_plain_text_404_of_a_lagging_apiserver_is_a_failure_and_no_record():
    c = cluster()
    on_write_of(c, "obj-00004", PLAIN_404)
    r = run(c)
    assert (r.rewritten, r.gone, r.failed) == (9, 0, 1) and r.complete and not r.ok and not r.record_written
    f = r.first_failures[0]
    assert f["name"] == "obj-00004" and f["status"] == 404 and f["message"] == "404 page not found"
    assert "without naming the object" in f["error"] and "lagging HA member" in f["error"]
    assert "not counted as deleted" in f["error"] and "test-cluster" in f["error"] and NAME in f["error"]
    assert RECORD_ANNOTATION not in get_crd(c, NAME).annotations
    # the object was never confirmed absent, so nothing was read to confirm it
    assert [p for m, p, q in c.calls if m == "GET" and p.endswith("/obj-00004")] == []


def test_notfound_naming_another_object_is_a_failure():
    c = cluster()
    on_write_of(c, "obj-00004", not_found(G, "crontabs", "obj-00005"))
    r = run(c)
    assert (r.gone, r.failed) == (0, 1) and "without naming the object" in r.first_failures[0]["error"]


def test_notfound_of_another_resource_is_a_failure():
    c = cluster()
    on_write_of(c, "obj-00004", not_found(G, "cronjobs", "obj-00004"))
    r = run(c)
    assert (r.gone, r.failed) == (0, 1)


def test_confirming_get_that_still_finds_the_object_is_a_failure():
    c = cluster()
    on_write_of(c, "obj-00004", not_found(G, "crontabs", "obj-00004"))  # the object is still there
    r = run(c)
    assert (r.gone, r.failed) == (0, 1) and not r.record_written
    assert "a GET at v1 still finds the object" in r.first_failures[0]["error"]


def test_confirming_get_answering_plain_404_is_a_failure():
    c = cluster()
    on_write_of(c, "obj-00004", None, delete=True)
    c.hooks.append(lambda m, p, q, b: PLAIN_404 if m == "GET" and p.endswith("/obj-00004") else None)
    r = run(c)
    assert (r.gone, r.failed) == (0, 1) and "confirm" in r.first_failures[0]["error"]


def test_json_patch_write_gets_the_same_confirmation():
    c = cluster(cls=MfCluster)
    c.set_managed_fields(NAME, "a/obj-00002", [entry("argocd", G + "/v1")])
    c.set_managed_fields(NAME, "a/obj-00003", [entry("argocd", G + "/v1")])
    on_write_of(c, "obj-00002", PLAIN_404)
    on_write_of(c, "obj-00003", None, delete=True)
    r = run(c)
    assert (r.rewritten, r.gone, r.failed) == (8, 1, 1)
    assert r.first_failures[0]["name"] == "obj-00002" and "without naming" in r.first_failures[0]["error"]


def test_confirm_version_is_a_served_stored_version_other_than_storage():
    def crd(versions, stored):
        return Crd.from_api(make_crd(versions=versions, stored=stored))
    assert confirm_version(crd((("v1", True, False), ("v2", True, True)), ("v1", "v2"))) == "v1"
    # not served any more: fall back to the storage version
    assert confirm_version(crd((("v1", False, False), ("v2", True, True)), ("v1", "v2"))) == "v2"
    assert confirm_version(crd((("v1", True, False), ("v2", True, True)), ("v2",))) == "v2"

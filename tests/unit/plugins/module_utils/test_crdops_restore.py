# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record.record import (
    CHECKPOINT_ANNOTATION, RECORD_ANNOTATION, validate_record)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions, migrate_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import get_crd
from tests.unit.crdops_fakes import FakeCluster, status

NAME = "crontabs.stable.example.com"


def cluster_with(n_old, n_new=0, **kw):
    c = FakeCluster()
    c.add_crd(**kw)
    c.add_objects(NAME, n_old, namespaces=("a", "b", "c"), stored="v1")
    objs = c.objects[NAME]
    # mark the last n_new (in key order) as already at the storage version
    for key in sorted(objs)[len(objs) - n_new:] if n_new else []:
        objs[key]["stored"] = "v2"
    return c


def run(c, **opts):
    opts.setdefault("page_size", 7)
    opts.setdefault("workers", 3)
    return migrate_crd(c, get_crd(c, NAME), RestoreOptions(**opts))


def test_counts_rewritten_vs_unchanged_and_writes_record():
    c = cluster_with(50, n_new=12)
    r = run(c)
    assert (r.listed, r.rewritten, r.unchanged, r.gone, r.failed) == (50, 38, 12, 0, 0)
    assert r.pages == 8 and r.complete and r.ok and r.record_written
    assert c.stored_versions_on_disk(NAME) == ["v2"]
    crd = get_crd(c, NAME)
    v = validate_record(crd)
    assert v.ok, v.reason
    rec = json.loads(crd.annotations[RECORD_ANNOTATION])
    assert rec["storageVersion"] == "v2" and rec["generation"] == 2 and rec["rewritten"] == 38
    assert CHECKPOINT_ANNOTATION not in crd.annotations
    # second run: nothing rewritten
    r2 = run(c)
    assert (r2.rewritten, r2.unchanged) == (0, 50)


def test_only_empty_patches_to_storage_version_endpoint():
    c = cluster_with(5)
    run(c, use_checkpoint=False)
    obj_patches = [p for m, p, q in c.writes() if "customresourcedefinitions" not in p]
    assert len(obj_patches) == 5
    assert all(p.startswith("/apis/stable.example.com/v2/namespaces/") for p in obj_patches)


def test_gone_objects_are_counted_not_failed():
    c = cluster_with(10)

    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith("/obj-00003"):  # deleted between the list and the write
            c.objects[NAME].pop("a/obj-00003", None)
    c.hooks.append(hook)
    r = run(c)
    assert r.gone == 1 and r.failed == 0 and r.rewritten == 9 and r.ok


def test_admission_rejection_counted_pass_continues_no_record():
    c = cluster_with(20)

    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith(("/obj-00004", "/obj-00011")):
            return status(400, 'admission webhook "validate.example.com" denied the request: nope', "BadRequest")
    c.hooks.append(hook)
    r = run(c)
    assert r.failed == 2 and r.rewritten == 18 and r.complete and not r.ok
    assert not r.record_written
    f = r.first_failures[0]
    assert f["namespace"] == "b" and f["name"] == "obj-00004" and f["status"] == 400
    assert "denied the request: nope" in f["message"] and f["kind"] == "admission"
    assert RECORD_ANNOTATION not in get_crd(c, NAME).annotations


def test_max_failures_aborts():
    c = cluster_with(40)
    c.hooks.append(lambda m, p, q, b: status(422, "invalid: spec.x", "Invalid") if m == "PATCH" and "/obj-" in p else None)
    r = run(c, max_failures=0, workers=1, page_size=5)
    assert not r.complete and "max_failures=0" in r.aborted_reason
    assert r.failed < 40


def test_conversion_webhook_failure_aborts_pass_with_full_message():
    c = cluster_with(30)

    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith("/obj-00010"):
            return status(500, 'conversion webhook for stable.example.com/v1, Kind=CronTab failed: '
                          'Post "https://conv.svc:443/convert": connection refused', "InternalError")
    c.hooks.append(hook)
    r = run(c, workers=1, page_size=5)
    assert not r.complete and not r.record_written
    assert "conversion webhook" in r.aborted_reason
    assert "test-cluster" in r.aborted_reason and NAME in r.aborted_reason and "obj-00010" in r.aborted_reason
    assert "connection refused" in r.aborted_reason
    # objects after the failing one's page were never written
    assert r.rewritten + r.failed + r.not_attempted <= 30 and r.rewritten < 29


def test_403_aborts():
    c = cluster_with(10)
    c.hooks.append(lambda m, p, q, b: status(403, 'crontabs.stable.example.com "x" is forbidden: User "bob" cannot patch',
                                             "Forbidden") if m == "PATCH" and "/obj-" in p else None)
    r = run(c, workers=1)
    assert not r.complete and "forbidden" in r.aborted_reason.lower() and "HTTP 403" in r.aborted_reason


def test_listing_failure_aborts():
    c = cluster_with(10)
    c.hooks.append(lambda m, p, q, b: status(500, "conversion webhook for x failed: boom", "InternalError")
                   if m == "GET" and q.get("continue") else None)
    r = run(c, page_size=4)
    assert not r.complete and "conversion webhook" in r.aborted_reason and not r.record_written


def test_webhook_crd_probe_runs_per_page_and_failure_aborts():
    conv = {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"],
                                               "clientConfig": {"url": "https://x", "caBundle": "Q0E="}}}
    c = cluster_with(12, conversion=conv)
    probes = []

    def hook(method, path, q, body):
        if method == "GET" and "/obj-" in path:
            probes.append(path)
            if len(probes) > 2:
                return status(500, "conversion webhook for stable.example.com/v1 failed: timeout", "InternalError")
    c.hooks.append(hook)
    r = run(c, page_size=5, workers=1)
    assert len(probes) == 3  # page 1: v1 and v2 ok, page 2: v1 fails
    assert not r.complete and "conversion" in r.aborted_reason
    # only page 1 was submitted; its writes not yet started when the probe failed are cancelled
    assert r.rewritten <= 5 and r.rewritten + r.not_attempted == 5
    assert c.object_writes == r.rewritten


def test_check_mode_writes_nothing():
    c = cluster_with(25)
    r = run(c, check_mode=True)
    assert c.writes() == [] and r.listed == 25 and r.rewritten == 0 and r.complete
    assert not r.record_written and r.check_mode


def test_check_mode_predicts_rejections_on_a_sample_of_preflight_sample_objects():
    c = cluster_with(25)

    def hook(method, path, q, body):
        if method == "PATCH" and q.get("dryRun") == "All":
            return status(403, "change freeze: updates are frozen", "Forbidden")
    c.hooks.append(hook)
    r = run(c, check_mode=True, preflight_sample=3)
    assert c.writes() == [] and len(c.dry_runs()) == 3 and r.listed == 25
    assert len(r.predicted_rejections) == 3
    assert all(x["status"] == 403 and "change freeze" in x["message"] for x in r.predicted_rejections)
    c0 = cluster_with(5)
    r0 = run(c0, check_mode=True, preflight_sample=0)
    assert c0.dry_runs() == [] and r0.predicted_rejections == [] and r0.listed == 5


def test_bad_input_raises_before_any_request():
    c = cluster_with(3)
    crd = get_crd(c, NAME)
    n = len(c.calls)
    for kw in ({"page_size": 0}, {"workers": 0}, {"workers": -1}, {"max_failures": -1}):
        with pytest.raises(BadInputError):
            migrate_crd(c, crd, RestoreOptions(**kw))
    assert len(c.calls) == n


def test_checkpoint_written_and_resume_skips_done_objects():
    c = cluster_with(30)

    # fail hard (fatal 401) on the 4th page
    def hook(method, path, q, body):
        if method == "PATCH" and path.endswith("/obj-00020"):
            return status(401, "Unauthorized", "Unauthorized")
    c.hooks.append(hook)
    r = run(c, page_size=5, workers=1)
    assert not r.complete
    ckpt = json.loads(get_crd(c, NAME).annotations[CHECKPOINT_ANNOTATION])
    assert ckpt["storageVersion"] == "v2" and ckpt["generation"] == 2
    done_keys = sorted(c.objects[NAME])
    last_index = done_keys.index(ckpt["last"])
    assert last_index >= 4  # at least one clean page
    c.hooks.clear()
    before = len([x for x in c.writes() if "/obj-" in x[1]])
    r2 = run(c, page_size=5, workers=1)
    after = len([x for x in c.writes() if "/obj-" in x[1]])
    assert r2.ok and r2.record_written and r2.resumed_from == ckpt["last"]
    assert r2.skipped_by_checkpoint == last_index + 1
    assert validate_record(get_crd(c, NAME)).ok  # rewritten + skipped_by_checkpoint == listed
    assert after - before == 30 - (last_index + 1)
    assert json.loads(get_crd(c, NAME).annotations[RECORD_ANNOTATION])["startedAt"] == ckpt["startedAt"]
    assert c.stored_versions_on_disk(NAME) == ["v2"]


def test_checkpoint_does_not_advance_past_a_failure():
    c = cluster_with(20)
    c.hooks.append(lambda m, p, q, b: status(400, "admission webhook denied", "BadRequest")
                   if m == "PATCH" and p.endswith("/obj-00007") else None)
    run(c, page_size=5, workers=2)
    ckpt = json.loads(get_crd(c, NAME).annotations[CHECKPOINT_ANNOTATION])
    keys = sorted(c.objects[NAME])
    assert keys.index(ckpt["last"]) < keys.index("b/obj-00007")


def test_stale_checkpoint_is_ignored():
    stale = json.dumps({"storageVersion": "v1", "generation": 2, "last": "zzz", "startedAt": "x"})
    c = cluster_with(10, annotations={CHECKPOINT_ANNOTATION: stale})
    r = run(c)
    assert r.resumed_from is None and "stale" in r.checkpoint_note and r.rewritten == 10


def test_a_checkpoint_of_another_crd_is_ignored():
    copied = json.dumps({"storageVersion": "v2", "generation": 2, "last": "zzz", "startedAt": "x", "crdUid": "u-other"})
    c = cluster_with(10, annotations={CHECKPOINT_ANNOTATION: copied})
    r = run(c)
    assert r.resumed_from is None and "foreign" in r.checkpoint_note and r.rewritten == 10


def test_record_not_written_when_crd_changed_during_pass():
    c = cluster_with(10)
    crd = get_crd(c, NAME)
    c.crds[NAME]["metadata"]["generation"] = 3  # someone edited the spec mid-pass
    r = migrate_crd(c, crd, RestoreOptions(page_size=4))
    assert r.complete and not r.record_written and "generation 2 -> 3" in r.record_error
    assert RECORD_ANNOTATION not in get_crd(c, NAME).annotations


def test_410_relist_and_progress_callback():
    c = cluster_with(12)
    state = {"n": 0}

    def hook(method, path, q, body):
        if method == "GET" and q.get("continue") and state["n"] == 0:
            state["n"] += 1
            return status(410, "The provided continue parameter is too old", "Expired")
    c.hooks.append(hook)
    seen = []
    r = migrate_crd(c, get_crd(c, NAME), RestoreOptions(page_size=5, workers=2), progress=seen.append)
    assert r.relists == 1 and r.ok and r.rewritten == 12 and c.stored_versions_on_disk(NAME) == ["v2"]
    assert seen and seen[-1]["crd"] == NAME and seen[-1]["done"] >= 12


def test_cluster_scoped():
    c = FakeCluster()
    c.add_crd(scope="Cluster")
    c.add_objects(NAME, 6)
    r = run(c)
    assert r.rewritten == 6 and r.ok
    assert any(p == "/apis/stable.example.com/v2/crontabs/obj-00000" for m, p, q in c.writes())


def test_result_to_dict_is_json():
    c = cluster_with(3)
    d = run(c).to_dict()
    json.dumps(d)
    assert d["name"] == NAME and d["record_written"] is True


def test_crd_view():
    crd = Crd.from_api(FakeCluster().add_crd(conversion={"strategy": "Webhook", "webhook": {
        "clientConfig": {"caBundle": "c2VjcmV0", "service": {"name": "s", "namespace": "n"}}}}))
    assert crd.storage_version == "v2" and crd.needs_migration and crd.served_versions == ["v1", "v2"]
    assert "caBundle" not in json.dumps(crd.to_dict())

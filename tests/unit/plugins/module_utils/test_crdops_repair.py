# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Repair logic against the fake apiserver (the real broken state is tests/integration/test_repair.py)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import (
    BadInputError, ConflictError, RefusalError)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.repair import (
    RepairError, RepairOptions, decide_missing, repair_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.diagnosis import (
    PERMISSIVE_SCHEMA, REPAIR_ANNOTATION, ListProbe, previous_crd, version_entry, versions_named_in_error)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.restore import RestoreOptions
from tests.unit.crdops_fakes import CRD_PREFIX, FakeCluster, make_crd, resp, status

NAME = "widgets.g.example.com"
GROUP = "g.example.com"

# kube-apiserver 1.37.2's answer to a LIST when keys are stored at a removed version (as observed)
MESSAGE_137 = ("failed to read one or more widgets.g.example.com from the storage: StorageError: corrupt object, "
               "Code: 7, Key: /registry/g.example.com/widgets/default/obj-00000, ResourceVersion: 0, "
               "AdditionalErrorMsg: object not decodable revision=12: request to convert CR from an invalid "
               "group/version: g.example.com/v1 (and 2 more)")


class BrokenFake(FakeCluster):
    """FakeCluster plus what the repair needs: CRD spec edits, events, and the 1.37 StorageReadError."""

    def __init__(self):
        super().__init__()
        self.events = []
        self.spec_writes = []

    def _route(self, method, path, q, body, content_type):
        if path == "/api/v1/namespaces/default/events" and method == "POST":
            self.events.append(json.loads(body))
            return resp(201, json.loads(body))
        if path.startswith(CRD_PREFIX) and method == "PATCH" and not path.endswith("/status"):
            patch = json.loads(body)
            if "spec" in patch:
                return self._patch_spec(path[len(CRD_PREFIX):].strip("/"), patch)
        if path.startswith("/apis/%s/" % GROUP) and NAME in self.crds:
            bad = self._unreadable()
            if bad:
                return self._storage_read_error(bad)
        return super()._route(method, path, q, body, content_type)

    def _patch_spec(self, name, patch):
        crd = self.crds[name]
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        if rv and rv != crd["metadata"]["resourceVersion"]:
            return status(409, "the object has been modified", "Conflict")
        for k, v in ((patch.get("metadata") or {}).get("annotations") or {}).items():
            if v is None:
                crd["metadata"]["annotations"].pop(k, None)
            else:
                crd["metadata"]["annotations"][k] = v
        crd["spec"]["versions"] = patch["spec"]["versions"]
        crd["metadata"]["generation"] += 1
        crd["metadata"]["resourceVersion"] = self.next_rv()
        self.spec_writes.append([v["name"] for v in crd["spec"]["versions"]])
        return resp(200, crd)

    def _unreadable(self):
        names = [v["name"] for v in self.crds[NAME]["spec"]["versions"]]
        return sorted(k for k, o in self.objects[NAME].items() if o["stored"] not in names)

    def _storage_read_error(self, bad):
        first = self.objects[NAME][bad[0]]["stored"]
        msg = MESSAGE_137.replace("g.example.com/v1 (", "g.example.com/%s (" % first).replace(
            "(and 2 more)", "(and %d more)" % (len(bad) - 1))
        causes = [{"reason": "UnexpectedServerResponse", "field": "/registry/x/%s" % k,
                   "message": "... invalid group/version: %s/%s" % (GROUP, self.objects[NAME][k]["stored"])}
                  for k in bad]
        body = {"kind": "Status", "status": "Failure", "code": 500, "reason": "StorageReadError",
                "message": msg, "details": {"causes": causes}}
        return resp(500, body)


class Killed(BaseException):
    """The process dies mid-pass (as SIGKILL would; nothing below catches a BaseException)."""


def broken(stored_old=3, stored_new=2, old="v1"):
    """The unreadable resource: objects at v1, storedVersions trimmed to [v2], v1 removed from the CRD."""
    c = BrokenFake()
    c.add_crd(name=NAME, versions=(("v2", True, True),), stored=("v2",))
    c.add_objects(NAME, stored_old + stored_new, stored=old)
    for key in sorted(c.objects[NAME])[stored_old:]:
        c.objects[NAME][key]["stored"] = "v2"
    return c


def opts(**kw):
    restore = RestoreOptions(page_size=2, workers=2, check_mode=kw.pop("check_mode", False), preflight_sample=0)
    return RepairOptions(restore=restore, check_mode=restore.check_mode, wait_timeout=0, **kw)


def test_version_named_in_the_137_message_and_causes():
    versions, reported = versions_named_in_error({"message": MESSAGE_137}, GROUP)
    assert versions == ["v1"] and reported == 3
    body = {"message": MESSAGE_137, "details": {"causes": [
        {"field": "/registry/a", "message": "invalid group/version: g.example.com/v1"},
        {"field": "/registry/b", "message": "invalid group/version: g.example.com/v0"},
        {"field": "/registry/c", "message": "invalid group/version: other.io/v9"}]}}
    assert versions_named_in_error(body, GROUP) == (["v1", "v0"], 3)
    assert versions_named_in_error({"message": "etcdserver: request timed out"}, GROUP) == ([], None)


def test_unpaginated_list_429_while_the_cache_cannot_fill_is_the_same_case():
    """1.37.2, LIST without limit: the watch cache cannot fill, 429 with the corrupt-object text (observed)."""
    message = "storage is (re)initializing: failed to list <unspecified>: " + MESSAGE_137
    probe = ListProbe(False, status=429, reason="TooManyRequests", message=message,
                      named_versions=versions_named_in_error({"message": message}, GROUP)[0])
    assert probe.storage_read_error and probe.named_versions == ["v1"]
    assert not ListProbe(False, status=429, reason="TooManyRequests", message="rate limited").storage_read_error


def test_repair_of_the_broken_state():
    c = broken()
    res = repair_crd(c, NAME, opts())
    assert res.broken and res.changed
    assert res.missing_versions == ["v1"] and res.evidence["list_error"] == ["v1"]
    assert res.list_before["unreadable_reported"] == 3 and res.list_before["status"] == 500
    assert res.restore["rewritten"] == 3 and res.restore["unchanged"] == 2 and res.restore["failed"] == 0
    assert c.stored_versions_on_disk(NAME) == ["v2"]
    assert c.spec_writes == [["v2", "v1"], ["v2"]]  # added back, then removed again
    assert res.versions_after == ["v2"] and res.stored_versions_after == ["v2"] and res.readable_after == 5
    crd = c.crds[NAME]
    assert REPAIR_ANNOTATION not in crd["metadata"]["annotations"]
    assert [e["reason"] for e in c.events] == ["StorageRepairStarted", "StorageRepairSucceeded"]
    assert "v1" in c.events[0]["message"] and "5 listed" in c.events[1]["message"]


def test_added_version_is_served_not_storage_with_permissive_schema():
    c = broken()
    seen = []

    def spy(method, path, q, body):
        if method == "PATCH" and path.startswith(CRD_PREFIX) and body and b'"spec"' in body:
            seen.append(json.loads(body))
    c.hooks.append(spy)
    repair_crd(c, NAME, opts())
    added = seen[0]["spec"]["versions"][-1]
    assert added["name"] == "v1" and added["served"] is True and added["storage"] is False
    assert added["schema"] == PERMISSIVE_SCHEMA
    assert all(p["metadata"]["resourceVersion"] for p in seen)  # both edits are optimistic-locked
    assert json.loads(seen[0]["metadata"]["annotations"][REPAIR_ANNOTATION])["addedVersions"] == ["v1"]


def test_schema_from_previous_release(tmp_path):
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}
    doc = make_crd(name=NAME, versions=(("v1", True, False), ("v2", True, True)))
    doc["spec"]["versions"][0]["schema"] = schema
    doc["spec"]["versions"][0]["storage"] = True
    path = tmp_path / "prev.yaml"
    path.write_text("---\n" + json.dumps({"kind": "ConfigMap"}) + "\n---\n" + json.dumps(doc) + "\n")
    found, source = previous_crd([str(path)], NAME)
    entry, origin = version_entry("v1", {"v1": found["spec"]["versions"][0]}, source)
    assert entry["schema"] == schema and entry["storage"] is False and entry["served"] is True
    assert str(path) in origin
    assert version_entry("v0", {}, None)[0]["schema"] == PERMISSIVE_SCHEMA


def test_check_mode_writes_nothing_and_says_what_it_would_do():
    c = broken()
    res = repair_crd(c, NAME, opts(check_mode=True))
    assert c.writes() == [] and c.events == []
    assert res.changed and res.missing_versions == ["v1"]
    text = " ".join(res.steps)
    assert "add v1 back" in text and "re-store" in text and "trim" in text and "remove v1" in text
    assert res.object_count is None  # no etcd, LIST fails: unknown, not guessed


def test_check_mode_counts_from_etcd():
    c = broken()
    scan = {"keys": 5, "counts": {GROUP + "/v1": 3, GROUP + "/v2": 2}, "verified": False}
    res = repair_crd(c, NAME, opts(check_mode=True), etcd_scan=lambda crd: scan)
    assert res.object_count == 5 and res.evidence["etcd"] == ["v1"] and c.writes() == []


def test_healthy_crd_is_nothing_to_repair():
    c = broken(stored_old=0)
    res = repair_crd(c, NAME, opts())
    assert not res.broken and not res.changed and c.writes() == [] and c.events == []
    assert "nothing to repair" in res.message and res.object_count == 2


def test_second_run_after_repair_is_a_noop():
    c = broken()
    repair_crd(c, NAME, opts())
    writes = len(c.writes())
    res = repair_crd(c, NAME, opts())
    assert not res.changed and len(c.writes()) == writes


def test_refuses_when_the_version_cannot_be_told():
    c = broken()
    c.hooks.append(lambda m, p, q, b: status(500, "StorageError: corrupt object, Key: /registry/x", "StorageReadError")
                   if m == "GET" and p.startswith("/apis/" + GROUP) else None)
    with pytest.raises(RefusalError) as err:
        repair_crd(c, NAME, opts())
    text = str(err.value)
    assert "test-cluster" in text and NAME in text and "previous_manifests" in text and c.writes() == []


def test_previous_manifest_names_the_version_when_the_error_does_not():
    c = broken()
    doc = make_crd(name=NAME, versions=(("v1", True, False), ("v2", True, True)))
    c.hooks.append(lambda m, p, q, b: status(500, "StorageError: corrupt object", "StorageReadError")
                   if m == "GET" and p.startswith("/apis/" + GROUP) and len(c.spec_writes) == 0 else None)
    res = repair_crd(c, NAME, opts(previous_manifests=(doc,)))
    assert res.added_versions == ["v1"] and res.evidence["previous_manifest"] == ["v1"]
    assert c.stored_versions_on_disk(NAME) == ["v2"]


def test_explicit_versions_checked_against_spec_and_etcd():
    crd = Crd.from_api(make_crd(name=NAME, versions=(("v2", True, True),), stored=("v2",)))
    probe = ListProbe(False, status=500, reason="StorageReadError", message="corrupt object")
    with pytest.raises(BadInputError):
        decide_missing(crd, probe, None, {}, ["v2"], "c")
    with pytest.raises(RefusalError):
        decide_missing(crd, probe, {GROUP + "/v0": 1, GROUP + "/v1": 1}, {}, ["v1"], "c")
    assert decide_missing(crd, probe, None, {}, ["v1"], "c")[0] == ["v1"]


def test_other_list_failures_are_not_a_repair_case():
    crd = Crd.from_api(make_crd(name=NAME, versions=(("v2", True, True),), stored=("v2",)))
    with pytest.raises(RepairError):
        decide_missing(crd, ListProbe(False, status=403, reason="Forbidden", message="forbidden"), None, {}, [], "c")


def test_a_second_missing_version_revealed_after_the_first_is_added():
    c = broken()
    c.objects[NAME][sorted(c.objects[NAME])[0]]["stored"] = "v0"
    res = repair_crd(c, NAME, opts())
    assert sorted(res.added_versions) == ["v0", "v1"] and c.stored_versions_on_disk(NAME) == ["v2"]
    assert c.crds[NAME]["spec"]["versions"] == [{"name": "v2", "served": True, "storage": True}]


def test_interrupted_repair_is_finished_by_a_rerun():
    c = broken()

    def stop_on_first_object_write(method, path, q, body):
        if method == "PATCH" and body == b"{}":
            raise Killed()
    c.hooks.append(stop_on_first_object_write)
    with pytest.raises(Killed):
        repair_crd(c, NAME, opts())
    c.hooks.clear()
    assert [v["name"] for v in c.crds[NAME]["spec"]["versions"]] == ["v2", "v1"]
    res = repair_crd(c, NAME, opts(versions=("v1",)))  # the same explicit versions as the killed run
    assert res.evidence["interrupted_repair"] == ["v1"] and res.added_versions == []
    assert res.removed_versions == ["v1"] and res.versions_after == ["v2"]
    assert c.stored_versions_on_disk(NAME) == ["v2"]


def test_failed_pass_keeps_the_version_and_posts_a_warning_event():
    c = broken()
    c.hooks.append(lambda m, p, q, b: status(422, 'admission webhook "w" denied the request: no', "Invalid")
                   if m == "PATCH" and b == b"{}" else None)
    with pytest.raises(RepairError) as err:
        repair_crd(c, NAME, opts())
    assert "rerun" in str(err.value) and NAME in str(err.value)
    assert [v["name"] for v in c.crds[NAME]["spec"]["versions"]] == ["v2", "v1"]
    assert c.events[-1]["reason"] == "StorageRepairFailed" and c.events[-1]["type"] == "Warning"
    assert err.value.partial_result["added_versions"] == ["v1"]


def test_crd_changed_between_read_and_edit_is_a_conflict():
    c = broken()
    real = c._patch_spec

    def racing(name, patch):
        c.crds[NAME]["metadata"]["resourceVersion"] = c.next_rv()  # somebody else wrote the CRD
        return real(name, patch)
    c._patch_spec = racing
    with pytest.raises(ConflictError):
        repair_crd(c, NAME, opts())
    assert c.spec_writes == []


def test_webhook_conversion_is_warned_about():
    c = broken()
    c.crds[NAME]["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x"}}}
    res = repair_crd(c, NAME, opts(check_mode=True))
    assert any("Webhook conversion" in w and "v1" in w for w in res.warnings)


def test_a_throttled_probe_is_asked_again_before_anything_is_concluded():
    c = broken(stored_old=0)
    answers = [status(429, "rate limited", "TooManyRequests")]
    c.hooks.append(lambda m, p, q, b: answers.pop() if answers and p.startswith("/apis/" + GROUP) else None)
    res = repair_crd(c, NAME, opts())
    assert not res.broken and res.object_count == 2 and answers == []


def test_a_repair_note_of_another_crd_is_not_this_repair():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.repair.diagnosis import (
        repair_in_progress)

    def with_note(uid):
        note = {"addedVersions": ["v1"], "versionsOwners": [], "crdUid": uid}
        return Crd.from_api(make_crd(annotations={REPAIR_ANNOTATION: json.dumps(note)}))

    assert repair_in_progress(with_note("u-crontabs.stable.example.com")) == ["v1"]
    assert repair_in_progress(with_note("u-another-cluster")) == []  # copied with the CRD: not ours to undo

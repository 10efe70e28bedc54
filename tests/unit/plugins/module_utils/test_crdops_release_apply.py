# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A release's CRDs applied as kubernetes.core.k8s applies them (forced server-side apply), the dry-run sent with
dryRun=All, what changed said from the apiserver's answer, refusals with its message, the wait for Established."""
from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import crd_path
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import CrdOpsError, OutcomeError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.apply import (
    apply_one, apply_release, wait_established)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import APPLY_PATCH
from tests.unit.crdops_fakes import resp, status

ESTABLISHED = {"conditions": [{"type": "Established", "status": "True"}]}


def manifest(name, versions=("v1",)):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"group": name.split(".", 1)[1], "versions": [{"name": v, "served": True, "storage": i == 0}
                                                                  for i, v in enumerate(versions)]}}


class Apiserver:
    """CRDs by name; an apply stores the manifest (unless dryRun), bumps resourceVersion when it changes; names in
    ``refuse`` answer 422; ``established`` says whether a stored CRD reports Established."""
    cluster_label = "test-cluster"

    def __init__(self, established=True):
        self.crds, self.refuse, self.requests, self.established, self.rv = {}, {}, [], established, 100

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        name = path.rsplit("/", 1)[-1]
        self.requests.append((method, name, dict(query or []), content_type))
        live = self.crds.get(name)
        if method == "GET":
            return resp(200, live) if live else status(404, 'customresourcedefinitions "%s" not found' % name, "NotFound")
        assert method == "PATCH" and path == crd_path(name) and content_type == APPLY_PATCH
        if name in self.refuse:
            return status(422, self.refuse[name], "Invalid")
        doc = json.loads(body)
        after = copy.deepcopy(live) if live else {"metadata": {"name": name, "resourceVersion": "0"}}
        changed = after.get("spec") != doc["spec"]
        after["spec"] = doc["spec"]
        if changed:
            self.rv += 1
            after["metadata"]["resourceVersion"] = str(self.rv)
        after["status"] = ESTABLISHED if self.established else {}
        if dict(query or []).get("dryRun") != "All":
            self.crds[name] = after
        return resp(200 if live else 201, after)


def test_created_configured_unchanged_from_the_apiservers_answer():
    api = Apiserver()
    assert apply_one(api, manifest("a.x.io"), "mgr").to_dict() == {
        "name": "a.x.io", "action": "created", "changed": True, "changes": ["."], "error": None, "established": None,
        "record": None}
    assert apply_one(api, manifest("a.x.io"), "mgr").action == "unchanged"
    again = apply_one(api, manifest("a.x.io", ("v1", "v2")), "mgr")
    assert (again.action, again.changes) == ("configured", [".spec.versions"])
    assert api.requests[1] == ("PATCH", "a.x.io", {"fieldManager": "mgr", "force": "true"}, APPLY_PATCH)


def test_a_dry_run_is_sent_with_dry_run_all_stores_nothing_and_waits_for_nothing():
    api = Apiserver(established=False)
    got = apply_release(api, [manifest("a.x.io"), manifest("b.x.io")], "mgr", dry_run=True, timeout=0)
    assert [a.action for a in got] == ["created", "created"] and api.crds == {}
    assert all(q.get("dryRun") == "All" for m, _n, q, _c in api.requests if m == "PATCH")


def test_a_refusal_stops_the_apply_naming_the_crd_and_the_apiservers_message_unless_told_to_go_on():
    api = Apiserver()
    api.refuse["b.x.io"] = "spec.versions: Invalid value: must have exactly one version marked as storage version"
    seen = []
    with pytest.raises(CrdOpsError) as exc:
        apply_release(api, [manifest("a.x.io"), manifest("b.x.io"), manifest("c.x.io")], "mgr", record=seen.append)
    assert "CRD b.x.io" in str(exc.value) and "exactly one version marked as storage" in str(exc.value)
    assert "test-cluster" in str(exc.value)
    assert [a.name for a in seen] == ["a.x.io", "b.x.io"] and "c.x.io" not in api.crds
    got = apply_release(api, [manifest("b.x.io"), manifest("c.x.io")], "mgr", dry_run=True, continue_on_error=True)
    assert [(a.name, a.action) for a in got] == [("b.x.io", "refused"), ("c.x.io", "created")]
    assert got[0].error.startswith("spec.versions: Invalid value")


def test_the_wait_for_established_fails_naming_the_crds_not_established():
    api = Apiserver(established=False)
    apply_release(api, [manifest("a.x.io")], "mgr", wait=False)
    now = [0.0]

    def sleep(seconds):
        now[0] += seconds

    with pytest.raises(OutcomeError) as exc:
        wait_established(api, ["a.x.io"], 2, clock=lambda: now[0], sleep=sleep)
    assert str(exc.value).startswith("cluster test-cluster: CRD a.x.io not Established after 2s"), str(exc.value)
    api.crds["a.x.io"]["status"] = ESTABLISHED
    wait_established(api, ["a.x.io"], 2, clock=lambda: now[0], sleep=sleep)   # returns at once

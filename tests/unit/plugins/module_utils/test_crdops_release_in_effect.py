# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Release N in effect (release/in_effect.py): the apply's dry-run answer against the CRD read just before."""
from __future__ import annotations

import copy

from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.in_effect import (
    release_changes, releases_in_effect)
from tests.unit.crdops_fakes import make_crd, resp, status

NAME = "crontabs.stable.example.com"
ESTABLISHED = [{"type": "Established", "status": "True"}]


class Scripted:
    """Answers the GET with ``live`` and the dry-run apply with ``answer``; records every request."""

    cluster_label = "test-cluster"

    def __init__(self, live, answer):
        self.live, self.answer, self.calls = live, answer, []

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        self.calls.append((method, path, list(query or []), content_type))
        if method == "GET":
            return self.live if not isinstance(self.live, dict) else resp(200, self.live)
        return self.answer if not isinstance(self.answer, dict) else resp(200, self.answer)


def live_crd():
    crd = make_crd()
    crd["status"]["conditions"] = list(ESTABLISHED)
    return crd


def doc_of(crd):
    return {k: crd[k] for k in ("apiVersion", "kind", "spec")} | {"metadata": {"name": crd["metadata"]["name"]}}


def owned_by_us_too(crd):
    """What the apiserver answers to a forced apply of what is in effect: a new entry, a new resourceVersion."""
    out = copy.deepcopy(crd)
    out["metadata"]["resourceVersion"] = "11"
    out["metadata"]["managedFields"].append({"manager": "crdops-migration", "operation": "Apply",
                                             "time": "2026-12-02T02:00:00Z", "fieldsV1": {"f:spec": {}}})
    return out


def test_an_apply_that_changes_only_ownership_finds_release_n_in_effect():
    live = live_crd()
    t = Scripted(live, owned_by_us_too(live))
    assert release_changes(t, doc_of(live), "crdops-migration") == []
    (get, patch) = t.calls
    assert get[0] == "GET" and patch[0] == "PATCH" and patch[3] == "application/apply-patch+yaml"
    assert ("dryRun", "All") in patch[2] and ("force", "true") in patch[2]
    assert ("fieldManager", "crdops-migration") in patch[2]


def test_a_storage_flip_or_a_label_is_a_change():
    live = live_crd()
    flipped = owned_by_us_too(live)
    flipped["spec"]["versions"][0]["storage"], flipped["spec"]["versions"][1]["storage"] = True, False
    flipped["metadata"]["generation"] = 3
    assert release_changes(Scripted(live, flipped), doc_of(live), "m") == [".metadata.generation", ".spec.versions"]
    labelled = owned_by_us_too(live)
    labelled["metadata"]["labels"] = {"app": "x"}
    assert release_changes(Scripted(live, labelled), doc_of(live), "m") == [".metadata.labels.app"]


def test_a_crd_not_established_is_applied_and_waited_for():
    live = make_crd()  # no conditions yet
    assert release_changes(Scripted(live, owned_by_us_too(live)), doc_of(live), "m") == ["the CRD is not Established"]


def test_a_refused_dry_run_or_a_crd_gone_is_a_change_the_real_apply_reports():
    live = live_crd()
    refused = release_changes(Scripted(live, status(403, "forbidden: cannot patch")), doc_of(live), "m")
    assert refused == ["the apply of release N (dry-run) was refused: forbidden: cannot patch"]
    gone = release_changes(Scripted(status(404, "not found", "NotFound"), None), doc_of(live), "m")
    assert len(gone) == 1 and gone[0].startswith("could not check: ") and NAME in gone[0], gone


def test_only_the_named_crds_of_the_release_are_checked():
    live = live_crd()
    other = dict(doc_of(live), metadata={"name": "others.example.com"})
    t = Scripted(live, owned_by_us_too(live))
    assert releases_in_effect(t, [doc_of(live), other], [NAME], "m") == {NAME: []}
    assert len(t.calls) == 2


def test_a_manifest_with_keys_of_a_str_subclass_is_sent():
    """ansible-core 2.16 hands a module run in the worker its dict arguments with keys of its unsafe text (a str
    subclass), which orjson refuses; the body is then written by json."""
    class Unsafe(str):
        pass

    live = live_crd()
    doc = {Unsafe(k): v for k, v in doc_of(live).items()}
    t = Scripted(live, owned_by_us_too(live))
    assert release_changes(t, doc, "m") == []

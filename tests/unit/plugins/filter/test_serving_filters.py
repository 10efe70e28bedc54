# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Versions release N stops serving: found against the live CRD, and kept served while their clients are left."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.role_step import crd_upgrade_step

NAME = "certificates.cert-manager.io"


def doc(*versions):
    """A CRD manifest: (name, served, storage) per version."""
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": NAME},
            "spec": {"versions": [{"name": n, "served": s, "storage": st, "schema": {"openAPIV3Schema": {}}}
                                  for n, s, st in versions]}}


LIVE = [{"name": NAME, "versions": [{"name": "v1alpha2", "served": True, "storage": True},
                                    {"name": "v1", "served": True, "storage": False}]}]
# cert-manager v1.6: the legacy version stays listed, unserved, while v1 becomes the storage version
RELEASE_N = doc(("v1alpha2", False, False), ("v1", True, True))


def test_a_version_the_release_lists_unserved_is_one_it_stops_serving():
    assert crd_upgrade_step([RELEASE_N], "unserving", LIVE) == {NAME: ["v1alpha2"]}
    # served in the release, or already unserved live, or dropped from the list (a removal: the N+1 check's), is not
    assert crd_upgrade_step([doc(("v1alpha2", True, False), ("v1", True, True))], "unserving", LIVE) == {}
    unserved_live = [{"name": NAME, "versions": [{"name": "v1alpha2", "served": False}, {"name": "v1", "served": True}]}]
    assert crd_upgrade_step([RELEASE_N], "unserving", unserved_live) == {}
    assert crd_upgrade_step([doc(("v1", True, True))], "unserving", LIVE) == {}
    assert crd_upgrade_step([RELEASE_N], "unserving", []) == {}  # a CRD that does not exist yet serves nothing


def test_release_n_is_applied_still_serving_the_versions_whose_clients_are_left_and_nothing_else_changes():
    other = dict(doc(("v1", True, True)), metadata={"name": "issuers.cert-manager.io"})
    out = crd_upgrade_step([RELEASE_N, other], "keep_served", {NAME: ["v1alpha2"]})
    assert [v["served"] for v in out[0]["spec"]["versions"]] == [True, True]
    assert out[0]["spec"]["versions"][1] == RELEASE_N["spec"]["versions"][1] and out[1] is other
    assert RELEASE_N["spec"]["versions"][0]["served"] is False  # the release's own document is not changed
    assert crd_upgrade_step([RELEASE_N], "keep_served", {}) == [RELEASE_N]


def test_the_kept_versions_are_those_of_the_crds_their_clients_hold_back():
    crds = [{"name": NAME, "removed_versions": ["v1alpha2"], "held_back": True},
            {"name": "issuers.cert-manager.io", "removed_versions": ["v1alpha2"], "held_back": False}]
    assert crd_upgrade_step(crds, "kept_served") == {NAME: ["v1alpha2"]}

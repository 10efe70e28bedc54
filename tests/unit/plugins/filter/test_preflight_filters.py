# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.preflight import (
    crd_upgrade_access_checks, crd_upgrade_rejections, truncate)

CRDS = "customresourcedefinitions"
WIDGETS = {"name": "widgets.example.com", "group": "example.com", "kind": "Widget", "conversion": {"strategy": "None"}}
HOOKED = {"name": "hooks.example.com", "group": "example.com", "kind": "Hook", "conversion": {"strategy": "Webhook"}}


def crd_check(verb, **extra):
    return dict({"group": "apiextensions.k8s.io", "resource": CRDS, "verb": verb}, **extra)


def test_a_read_only_run_asks_to_get_and_list():
    assert crd_upgrade_access_checks([WIDGETS], names=[WIDGETS["name"]]) == [
        crd_check("get"), crd_check("list"), {"group": "example.com", "resource": "widgets", "verb": "list"}]


def test_a_full_run_asks_for_every_verb_it_uses():
    release = [{"metadata": {"name": "widgets.example.com"}, "spec": {"conversion": {"strategy": "Webhook"}}}]
    canary = [{"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "c", "namespace": "ns"}},
              {"apiVersion": "other.io/v1", "kind": "Widget", "metadata": {"name": "not-live"}}]
    checks = crd_upgrade_access_checks([WIDGETS, HOOKED], names=["widgets.example.com", "hooks.example.com", "new.io"],
                                       release=release, migrate=True, trim=True, apply=True, canary=canary,
                                       lease_namespace="ops")
    assert checks == [
        crd_check("get"), crd_check("list"), crd_check("patch"), crd_check("create"),
        crd_check("patch", subresource="status"),
        # webhook conversion in release N (widgets) or live (hooks): the pass probes it with a GET
        {"group": "example.com", "resource": "widgets", "verb": "list"},
        {"group": "example.com", "resource": "widgets", "verb": "patch"},
        {"group": "example.com", "resource": "widgets", "verb": "get"},
        {"group": "example.com", "resource": "hooks", "verb": "list"},
        {"group": "example.com", "resource": "hooks", "verb": "patch"},
        {"group": "example.com", "resource": "hooks", "verb": "get"}] + [
        {"group": "coordination.k8s.io", "resource": "leases", "verb": v, "namespace": "ops"}
        for v in ("get", "create", "update", "delete")] + [
        {"group": "example.com", "resource": "widgets", "verb": v, "namespace": "ns"} for v in ("create", "update", "delete")]


def test_checks_are_not_repeated_and_apply_alone_patches_crds():
    cluster_canary = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "c"}}
    checks = crd_upgrade_access_checks([WIDGETS], names=[WIDGETS["name"]], apply=True,
                                       canary=[cluster_canary, cluster_canary])
    assert checks == [crd_check("get"), crd_check("list"), crd_check("patch"),
                      {"group": "example.com", "resource": "widgets", "verb": "list"},
                      {"group": "example.com", "resource": "widgets", "verb": "create"},
                      {"group": "example.com", "resource": "widgets", "verb": "update"},
                      {"group": "example.com", "resource": "widgets", "verb": "delete"}]


def test_rejections_name_the_object_and_cut_long_messages():
    long = "denied " * 100
    crds = [{"name": "widgets.example.com", "predicted_rejections": [
        {"namespace": "ns-a", "name": "w1", "status": 422, "kind": "Invalid", "message": "spec.size: too big"},
        {"namespace": None, "name": "w2", "status": 403, "message": long}]}, {"name": "other.io"}]
    lines = crd_upgrade_rejections(crds)
    assert lines[0] == "widgets.example.com ns-a/w1: HTTP 422 Invalid: spec.size: too big"
    assert lines[1].startswith("widgets.example.com w2: HTTP 403 : denied denied ")
    assert lines[1].endswith("denied...") and len(lines[1]) < 400 + 40


def test_truncate_is_jinjas():
    assert truncate("a" * 405, 400) == "a" * 405  # within the leeway
    assert truncate("word " * 100, 20) == "word word word..."
    assert truncate("x" * 500, 10) == "xxxxxxx..."

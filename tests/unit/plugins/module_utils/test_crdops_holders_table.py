# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What holds release N+1 back, for the fleet: one row per source across every cluster, sorted so that the
first row unblocks the most clusters, each with what its controller says and the fix."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.holders_table import (
    COLUMNS, FIELD_MANAGER, HEADING, READERS, holders_table, source_of)

WIDGETS = "widgets.example.com"
GADGETS = "gadgets.example.com"
APPS_SAYS = "GitRepository flux-system/repo, path ./apps, revision main@sha1:abc"


def writer(cluster, source=None, crd=WIDGETS, manager="kustomize-controller", kind="declares", objects=8,
           held=True, version="v1alpha1", stays="v1beta1", examples=("apps/flux-00",)):
    """A writer record as crd_client_check check=writers gives it (the lead's contract: source, held, stays)."""
    return {"crd": crd, "manager": manager, "operation": "Apply", "version": version, "subresource": "",
            "kind": kind, "objects": objects, "last_write": None, "examples": list(examples),
            "sources": [] if source is None else ["%s %s" % (source["what"], source["ref"])],
            "source": source, "held": held, "stays": stays, "seen_in": "managedFields", "cluster": cluster}


def flux(ref, says=APPS_SAYS):
    return {"what": "Flux Kustomization", "ref": ref, "says": says}


def requests(cluster, crd=WIDGETS, count=12):
    return {"crd": crd, "seen_in": "metrics", "apiserver": "https://10.0.0.1:6443", "version": "v1alpha1",
            "requests": count, "by_verb": {"LIST": count}, "watches": 1, "cluster": cluster}


def cluster(name, records, held=(WIDGETS,), status="held back"):
    return {"cluster": name, "status": status, "broken_clients": list(records),
            "held_back": [{"crd": crd, "clients": ["..."], "fix": "..."} for crd in held]}


def test_one_row_per_source_across_every_cluster_with_what_its_controller_says():
    fleet = [cluster("prod-1", [writer("prod-1", flux("flux-system/apps"))]),
             cluster("prod-2", [writer("prod-2", flux("flux-system/apps"), objects=4, examples=["apps/flux-01"]),
                                writer("prod-2", flux("flux-system/apps"), crd=GADGETS, objects=2)],
                     held=(WIDGETS, GADGETS))]
    (row,) = holders_table(fleet)["rows"]
    assert (row["what"], row["ref"], row["source"]) == (
        "Flux Kustomization", "flux-system/apps", "Flux Kustomization flux-system/apps")
    assert row["says"] == [APPS_SAYS]
    assert row["clusters"] == ["prod-1", "prod-2"] and row["last_holder_on"] == ["prod-1", "prod-2"]
    assert row["crds"] == [{"crd": WIDGETS, "versions": ["v1alpha1"], "stays": ["v1beta1"]},
                           {"crd": GADGETS, "versions": ["v1alpha1"], "stays": ["v1beta1"]}]
    assert row["objects"] == 14
    assert row["examples"] == ["prod-1: apps/flux-00", "prod-2: apps/flux-01", "prod-2: apps/flux-00"]
    assert row["fix"].startswith("change apiVersion to v1beta1 in the path its source says, and let it reconcile")
    assert row["cells"] == [
        "1", "Flux Kustomization flux-system/apps", APPS_SAYS, "2: prod-1, prod-2; last holder on 2: prod-1, prod-2",
        "widgets.example.com v1alpha1 (stays v1beta1); gadgets.example.com v1alpha1 (stays v1beta1)",
        "14 (e.g. prod-1: apps/flux-00, prod-2: apps/flux-01, prod-2: apps/flux-00)", row["fix"]]
    assert len(row["cells"]) == len(COLUMNS)


def test_the_row_that_alone_frees_the_most_clusters_comes_first_then_clusters_then_objects():
    apps, legacy, infra = flux("flux-system/apps"), flux("flux-system/legacy"), flux("flux-system/infra")
    fleet = [
        # apps is on three clusters but never alone; legacy is alone on two; infra alone on one, with more objects
        cluster("a", [writer("a", apps), writer("a", legacy, objects=1)]),
        cluster("b", [writer("b", apps), writer("b", infra, objects=900)]),
        cluster("c", [writer("c", apps), writer("c", legacy, objects=1)]),
        cluster("d", [writer("d", legacy, objects=1)]),
        cluster("e", [writer("e", legacy, objects=1)]),
        cluster("f", [writer("f", infra, objects=900)]),
    ]
    rows = holders_table(fleet)["rows"]
    assert [(r["ref"], r["last_holder_on"], len(r["clusters"])) for r in rows] == [
        ("flux-system/legacy", ["d", "e"], 4), ("flux-system/infra", ["f"], 2), ("flux-system/apps", [], 3)]
    assert [r["cells"][0] for r in rows] == ["1", "2", "3"]
    # equal on both cluster counts: the one with more objects first
    tie = holders_table([cluster("a", [writer("a", apps, objects=3), writer("a", legacy, objects=30)])])["rows"]
    assert [r["ref"] for r in tie] == ["flux-system/legacy", "flux-system/apps"]


def test_a_crd_held_back_without_a_record_to_explain_it_leaves_no_row_the_last_holder():
    fleet = [cluster("a", [writer("a", flux("flux-system/apps"))], held=(WIDGETS, GADGETS))]
    (row,) = holders_table(fleet)["rows"]
    assert row["clusters"] == ["a"] and row["last_holder_on"] == []


def test_a_failed_cluster_is_not_freed_by_a_row_alone():
    fleet = [cluster("a", [writer("a", flux("flux-system/apps"))], status="failed"),
             cluster("b", [writer("b", flux("flux-system/apps"))])]
    (row,) = holders_table(fleet)["rows"]
    assert row["clusters"] == ["a", "b"] and row["last_holder_on"] == ["b"]


def test_credentials_in_what_a_controller_says_never_reach_the_report():
    says = "GitRepository flux-system/repo (https://bot:s3cr3t@git.example.com/org/repo.git), path ./apps"
    (row,) = holders_table([cluster("a", [writer("a", flux("flux-system/apps", says=says))])])["rows"]
    assert row["says"] == ["GitRepository flux-system/repo (https://<redacted>@git.example.com/org/repo.git), path ./apps"]
    assert "s3cr3t" not in repr(row)


def test_accepted_clients_hold_nothing_back_and_are_listed_apart():
    fleet = [cluster("a", [writer("a", flux("flux-system/apps"), held=False),
                           writer("a", flux("flux-system/legacy"))])]
    table = holders_table(fleet)
    assert [r["ref"] for r in table["rows"]] == ["flux-system/legacy"]
    assert table["rows"][0]["last_holder_on"] == ["a"]
    assert [r["ref"] for r in table["accepted"]] == ["flux-system/apps"]


def test_a_writer_whose_objects_name_no_source_is_its_field_manager():
    record = writer("a", None, manager="widget-operator", kind="writes")
    assert source_of(record) == (FIELD_MANAGER, "widget-operator", None)
    (row,) = holders_table([cluster("a", [record])])["rows"]
    assert row["source"] == "field manager widget-operator"
    assert row["cells"][2] == "no source: its objects name none"
    assert row["fix"] == ("the controller or operator writing as widget-operator must move to v1beta1 (upgrade it), "
                          "or be accepted (crd_upgrade_accept_broken_clients: [widget-operator])")


def test_readers_counted_by_the_request_counters_are_one_row_held_while_their_crd_is_held():
    fleet = [cluster("a", [requests("a")]), cluster("b", [requests("b", count=3)]),
             # the CRD is not held back on c (readers accepted): its requests hold nothing back there
             cluster("c", [requests("c", count=50)], held=(), status="ok")]
    table = holders_table(fleet)
    (row,) = table["rows"]
    assert (row["what"], row["ref"], row["clusters"]) == (READERS, "requests", ["a", "b"])
    assert (row["requests"], row["watches"], row["objects"]) == (15, 2, 0)
    assert row["cells"][5] == "15 requests in the window, 2 watches open" and row["source"] == READERS
    assert row["crds"] == [{"crd": WIDGETS, "versions": ["v1alpha1"], "stays": []}]
    assert row["fix"].startswith("find the reader by the request counters")
    assert row["fix"].endswith("or accept the requests (crd_upgrade_accept_broken_clients: [requests])")
    assert [r["clusters"] for r in table["accepted"]] == [["c"]]
    # the version that stays comes from a writer record of the same CRD on the cluster
    with_writer = holders_table([cluster("a", [requests("a"), writer("a", None, manager="op", stays="v2")])])
    readers = next(r for r in with_writer["rows"] if r["what"] == READERS)
    assert readers["crds"][0]["stays"] == ["v2"] and "move it to v2" in readers["fix"]


def test_each_kind_of_source_gets_its_own_fix():
    helm = {"what": "Helm release", "ref": "shop/widgets", "says": "chart widgets-1.2.0, revision 4"}
    unread = {"what": "Helm release", "ref": "shop/gizmo",
              "says": "not checked: ConfigMaps of shop forbidden; grant list on configmaps"}
    argo = {"what": "Argo CD Application", "ref": "widgets-prod", "says": None}
    fleet = [cluster("a", [writer("a", helm, kind="declares (Helm release)"),
                           writer("a", unread, kind="not checked (Helm release)", objects=0, examples=()),
                           writer("a", argo, manager="argocd-controller")])]
    fixes = dict((r["ref"], r["fix"]) for r in holders_table(fleet)["rows"])
    assert fixes["shop/widgets"].startswith("move the chart's templates to v1beta1 and upgrade the release")
    assert "grant" not in fixes["shop/widgets"]
    assert fixes["shop/gizmo"].startswith("grant the run read of the release's storage")
    assert "crd_upgrade_accept_broken_clients: [shop/gizmo]" in fixes["shop/gizmo"]
    assert "Replace=true or a forced sync" in fixes["widgets-prod"]
    objects = dict((r["ref"], r["cells"][5]) for r in holders_table(fleet)["rows"])
    assert objects["shop/gizmo"] == "unknown: the release's storage was not read"
    assert objects["shop/widgets"] == "8 (e.g. a: apps/flux-00)"
    says = dict((r["ref"], r["cells"][2]) for r in holders_table(fleet)["rows"])
    assert says == {"shop/widgets": "chart widgets-1.2.0, revision 4", "shop/gizmo": unread["says"],
                    "widgets-prod": "not asked"}


def test_a_record_of_an_older_release_is_placed_by_its_one_source_or_its_manager():
    old = writer("a", None)
    del old["source"], old["held"], old["stays"]
    one = dict(old, sources=["Flux Kustomization flux-system/apps"])
    two = dict(old, sources=["Flux Kustomization flux-system/apps", "Flux Kustomization flux-system/legacy"])
    assert source_of(one)[:2] == ("Flux Kustomization", "flux-system/apps")
    assert source_of(two)[:2] == (FIELD_MANAGER, "kustomize-controller")
    helm = dict(old, sources=["Helm release shop/widgets (revision 4)"])
    argo = dict(old, sources=["Argo CD Application (instance label) widgets-prod"])
    assert source_of(helm) == ("Helm release", "shop/widgets", "revision 4")
    assert source_of(argo) == ("Argo CD Application (instance label)", "widgets-prod", None)
    # no "held": held while its CRD is held back on its cluster
    assert holders_table([cluster("a", [one])])["rows"][0]["ref"] == "flux-system/apps"
    assert holders_table([cluster("a", [one], held=(), status="ok")])["rows"] == []


def test_a_cell_names_ten_clusters_and_counts_the_rest_while_the_json_lists_them_all():
    fleet = [cluster("c%02d" % i, [writer("c%02d" % i, flux("flux-system/apps"))]) for i in range(12)]
    (row,) = holders_table(fleet)["rows"]
    assert len(row["clusters"]) == 12
    assert row["cells"][3].startswith("12: c00, c01, c02, c03, c04, c05, c06, c07, c08, c09 and 2 more; ")


def test_no_client_no_row_and_the_table_says_its_heading_and_columns():
    table = holders_table([{"cluster": "a", "status": "ok"},
                           {"cluster": "b", "status": "failed", "broken_clients": None, "held_back": None}])
    assert table["rows"] == [] and table["accepted"] == []
    assert table["heading"] == HEADING == "What holds release N+1 back"
    assert table["columns"] == list(COLUMNS)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who still uses a version the next release removes: managedFields times against the apiserver's clock, and
the growth of the request counters per apiserver."""
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.last_applied import LAST_APPLIED
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import ApiResponse
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.writers import (
    WritersOptions, find_writers, parse_metrics, traffic_of, MetricsRead)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.client_evidence import NOT_CHECKED_HELM
from tests.unit.crdops_fakes import make_crd, resp

GROUP = "stable.example.com"
NAME = "crontabs." + GROUP
# the apiserver's clock is 15:00:00; the controller's clock (time.time()) is whatever the test machine says
SERVER_DATE = "Tue, 01 Dec 2026 15:00:00 GMT"


def crd(versions=(("v1", True, False), ("v2", True, True))):
    return Crd.from_api(make_crd(NAME, versions=versions, stored=("v2",)))


def entry(manager, version, time, operation="Apply"):
    return {"manager": manager, "operation": operation, "apiVersion": "%s/%s" % (GROUP, version), "time": time,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}


def metrics(lines):
    return "\n".join(["# HELP apiserver_request_total Counter", "# TYPE apiserver_request_total counter"] + [
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="%s",resource="%s",'
        'scope="resource",subresource="",verb="%s",version="%s"} %s' % line for line in lines])


class Server:
    """One apiserver: a Date header, metadata pages, /metrics answers in turn."""

    cluster_label = "test-cluster"
    base_url = "https://10.0.0.1:6443"

    def __init__(self, objects, metrics_answers=(), leases=1, kustomizations=None):
        self.objects = objects
        self.kustomizations = kustomizations or {}  # "ns/name" -> API object, or an HTTP status to answer
        self.metrics_answers = list(metrics_answers)
        self.leases = leases
        self.calls = []

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        self.calls.append((method, path, dict(query or [])))
        if path == "/version":
            return resp(200, {"gitVersion": "v1.37.2"}, headers={"Date": SERVER_DATE})
        if path == "/metrics":
            answer = self.metrics_answers.pop(0)
            if isinstance(answer, int):
                return resp(answer, {"kind": "Status", "message": "forbidden"})
            return ApiResponse(200, {}, answer.encode())
        if path.endswith("/leases"):
            items = [{"metadata": {"name": "kube-apiserver-%d" % i}, "spec": {"renewTime": "2026-12-01T14:59:55.000000Z"}}
                     for i in range(self.leases)]
            return resp(200, {"items": items}, headers={"Date": SERVER_DATE})
        if path.endswith("/endpointslices"):
            return resp(200, {"items": [{"ports": [{"name": "https", "port": 6443}],
                                         "endpoints": [{"addresses": ["10.0.0.1"]}]}]})
        if "/kustomizations/" in path:
            return self.kustomization(path)
        assert method == "GET" and path == "/apis/%s/v2/crontabs" % GROUP, path
        return resp(200, {"items": [{"metadata": m} for m in self.objects], "metadata": {}})

    def kustomization(self, path):
        _apis, _group, version, _ns, namespace, _res, name = path.strip("/").split("/")
        found = self.kustomizations.get("%s/%s" % (namespace, name), 404)
        if isinstance(found, int):
            return resp(found, {"kind": "Status", "message": "answered %d" % found})
        return resp(200, found) if version == "v1" else resp(404, {"kind": "Status"})

    def for_endpoint(self, url, new_connection_per_request=False):
        assert url == "https://10.0.0.1:6443"
        return self


def obj(name, *entries):
    return {"name": name, "namespace": "a", "managedFields": list(entries)}


OBJECTS = [
    obj("w-1", entry("argocd", "v1", "2026-12-01T14:59:58Z"), entry("flux", "v2", "2026-12-01T14:59:59Z")),
    obj("w-2", entry("argocd", "v1", "2026-12-01T14:58:00Z")),
    obj("w-3", entry("argocd", "v1", "2026-12-01T14:10:00Z"),
        entry("kubectl-edit", "v1", "2026-12-01T14:59:00Z", "Update"),
        entry("kubectl-create", "v1", "2026-12-01T14:20:00Z", "Update")),
]


def test_appliers_are_named_at_any_age_and_writers_from_entry_times_on_the_apiservers_clock():
    # since 14:55 by the apiserver's clock: argocd's Apply entries say its source declares v1 whatever their age
    # (w-3's is older than since); kubectl-edit wrote at v1 since; kubectl-create's older Update is a leftover
    options = WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0)
    out = find_writers(Server(OBJECTS), [crd()], options)
    c = out.crds[0]
    assert [(w.manager, w.operation, w.version, w.kind, w.objects) for w in c.writers] == [
        ("argocd", "Apply", "v1", "declares", 3), ("kubectl-edit", "Update", "v1", "writes", 1)]
    assert c.writers[0].to_dict()["last_write"] == "2026-12-01T14:59:58Z"
    assert c.writers[0].examples == ["a/w-1", "a/w-2", "a/w-3"]
    assert c.older_entries == 1 and c.listed == 3 and not out.ok and out.held_back == [NAME]
    assert out.to_dict("prod")["server_time"] == "2026-12-01T15:00:00Z" and out.metrics == "not measured: metrics_window is 0"
    assert out.to_dict("prod")["readers_checked"] is False
    text = out.refusal("prod")
    for word in ("cluster prod", "held back for 1 CRDs", "CRD " + NAME,
                 "applier argocd (declares at v1) on 3 objects, last write 2026-12-01T14:59:58Z",
                 "manager kubectl-edit (Update at v1)", "crd_upgrade_accept_broken_clients", "fix: move these clients to v2"):
        assert word in text, (word, text)
    records = out.broken_clients("prod")
    assert records[0] == {"cluster": "prod", "crd": NAME, "seen_in": "managedFields", "manager": "argocd",
                          "operation": "Apply", "version": "v1", "subresource": "", "kind": "declares", "objects": 3,
                          "last_write": "2026-12-01T14:59:58Z", "examples": ["a/w-1", "a/w-2", "a/w-3"], "sources": [],
                          "source": None, "held": True, "stays": "v2"}


def test_the_last_applied_annotation_and_the_objects_sources_name_the_client_side_applier():
    last_applied = json.dumps({"apiVersion": GROUP + "/v1", "kind": "CronTab", "metadata": {"name": "c-1"}})
    owner = dict(entry("kubectl-client-side-apply", "v1", "2026-12-01T13:00:00Z", "Update"),
                 fieldsV1={"f:metadata": {"f:annotations": {"f:" + LAST_APPLIED: {}}}})
    objects = [
        {"name": "c-1", "namespace": "a", "managedFields": [owner],
         "annotations": {LAST_APPLIED: last_applied, "argocd.argoproj.io/tracking-id": "shop:stable/CronTab:a/c-1"}},
        {"name": "f-1", "namespace": "a", "managedFields": [entry("kustomize-controller", "v1", "2026-12-01T09:00:00Z")],
         "labels": {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
    ]
    options = WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0)
    out = find_writers(Server(objects), [crd()], options)
    (c,) = out.crds
    assert [(w.manager, w.kind, [str(s) for s in w.sources]) for w in c.writers] == [
        ("kubectl-client-side-apply", "declares (client-side apply)", ["Argo CD Application shop"]),
        ("kustomize-controller", "declares", ["Flux Kustomization flux-system/apps (inventory not asked: not found "
                                              "at v1 or v1beta2: the Kustomization is gone, or Flux's "
                                              "kustomize.toolkit.fluxcd.io is not installed)"])]
    assert c.older_entries == 1  # the annotation owner's own Update entry is a leftover of that applier
    assert "fix: move these sources to v2" in out.refusal("prod")


def test_accepted_clients_no_longer_hold_the_crd_back():
    options = dict(since="2026-12-01T14:55:00Z", metrics_window=0)
    held = find_writers(Server(OBJECTS), [crd()], WritersOptions({NAME: ["v1"]}, accept=["argocd"], **options))
    assert held.held_back == [NAME] and "argocd" not in held.refusal("prod") and "kubectl-edit" in held.refusal("prod")
    both = find_writers(Server(OBJECTS), [crd()], WritersOptions({NAME: ["v1"]}, accept=["argocd", "kubectl-edit"],
                                                                 **options))
    assert both.held_back == [] and not both.ok and both.to_dict("prod")["refusal"] is None
    assert find_writers(Server(OBJECTS), [crd()], WritersOptions({NAME: ["v1"]}, accept=True, **options)).held_back == []
    with pytest.raises(BadInputError):
        WritersOptions({NAME: ["v1"]}, accept=[""]).validate()


def test_lookback_counts_back_from_the_apiservers_clock_not_the_controllers():
    # without `since`: an hour before the apiserver's 15:00 -> 14:00, so the 14:10 entry is a writer too
    out = find_writers(Server(OBJECTS), [crd()], WritersOptions({NAME: ["v1"]}, metrics_window=0))
    assert out.to_dict("prod")["since"] == "2026-12-01T14:00:00Z"
    assert [(w.manager, w.objects) for w in out.crds[0].writers] == [
        ("argocd", 3), ("kubectl-edit", 1), ("kubectl-create", 1)]
    assert out.crds[0].older_entries == 0


def test_versions_that_stay_and_crds_not_named_are_not_checked():
    out = find_writers(Server(OBJECTS), [crd()], WritersOptions({NAME: ["v0"]}, metrics_window=0))
    assert out.crds == [] and out.ok
    out = find_writers(Server(OBJECTS), [crd()], WritersOptions({"other." + GROUP: ["v1"]}, metrics_window=0))
    assert out.crds == [] and out.ok


def test_request_growth_per_apiserver_names_readers_that_managed_fields_never_shows():
    before = metrics([(GROUP, "crontabs", "LIST", "v1", "4"), (GROUP, "crontabs", "GET", "v1", "10"),
                      (GROUP, "crontabs", "GET", "v2", "7"), ("other.io", "crontabs", "GET", "v1", "3")])
    after = metrics([(GROUP, "crontabs", "LIST", "v1", "4"), (GROUP, "crontabs", "GET", "v1", "16"),
                     (GROUP, "crontabs", "GET", "v2", "90"), ("other.io", "crontabs", "GET", "v1", "9")])
    slept = []
    server = Server([obj("w-1", entry("argocd", "v2", "2026-12-01T14:59:58Z"))], [before, after])
    out = find_writers(server, [crd()], WritersOptions({NAME: ["v1"]}, metrics_window=5), connect=server.for_endpoint,
                       sleep=slept.append, clock=iter([0.0, 1.5]).__next__)
    c = out.crds[0]
    assert c.writers == [] and len(c.traffic) == 1
    t = c.traffic[0]
    # v2 (stays) and another group's v1 are not counted; 6 GETs at v1 are
    assert (t.apiserver, t.measured, t.requests, t.by_verb) == ("https://10.0.0.1:6443", True, {"v1": 6},
                                                                {"v1": {"GET": 6}})
    assert slept == [3.5]  # the window is waited out after the listing
    assert not out.ok and "6 requests at v1 served by https://10.0.0.1:6443" in out.refusal("prod")
    assert out.metrics == "measured on https://10.0.0.1:6443 over 5 s"
    # the listing went between the two reads of /metrics, at the storage version
    order = [p for _m, p, _q in server.calls if p in ("/metrics", "/apis/%s/v2/crontabs" % GROUP)]
    assert order == ["/metrics", "/apis/%s/v2/crontabs" % GROUP, "/metrics"]


def test_forbidden_metrics_is_not_measured_and_said_so():
    server = Server([], [403])
    out = find_writers(server, [crd()], WritersOptions({NAME: ["v1"]}, metrics_window=2), connect=server.for_endpoint,
                       sleep=lambda s: None)
    assert out.ok and out.crds[0].traffic[0].measured is False
    assert out.metrics.startswith("not measured: /metrics forbidden (HTTP 403)") and "nonResourceURLs" in out.metrics


def test_counters_that_go_back_mean_a_restart_not_a_negative_count():
    before = MetricsRead(parse_metrics(metrics([(GROUP, "crontabs", "GET", "v1", "10")]), "apiserver_request_total",
                                       [GROUP]), {})
    after = MetricsRead(parse_metrics(metrics([(GROUP, "crontabs", "GET", "v1", "2")]), "apiserver_request_total",
                                      [GROUP]), {})
    t = traffic_of("https://a", before, after, crd(), ["v1"])
    assert t.measured is False and "restarted" in (t.note or "")


def test_more_apiservers_alive_than_reachable_is_said():
    server = Server([], [metrics([]), metrics([])], leases=3)
    out = find_writers(server, [crd()], WritersOptions({NAME: ["v1"]}, metrics_window=1), connect=server.for_endpoint,
                       sleep=lambda s: None)
    assert "3 apiservers alive, 1 measured directly" in out.metrics


@pytest.mark.parametrize("options, word", [
    (WritersOptions({NAME: "v1"}), "removed_versions[%s]" % NAME),
    (WritersOptions({NAME: ["v1"]}, since="yesterday"), "since must be an RFC 3339 time"),
    (WritersOptions({NAME: ["v1"]}, metrics_window=-1), "metrics_window must be >= 0"),
])
def test_bad_options_fail_before_any_request(options, word):
    server = Server([])
    with pytest.raises(BadInputError) as exc:
        find_writers(server, [crd()], options)
    assert word in str(exc.value) and server.calls == []


# -- each source by its own word ------------------------------------------------------------------------------
FLUX_LABELS = "kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace"


def flux_obj(name, kustomization, version="v1"):
    """An object Flux applied at ``version`` (kustomize-controller's Apply entry) with the labels it sets."""
    return {"name": name, "namespace": "a", "labels": {FLUX_LABELS[0]: kustomization, FLUX_LABELS[1]: "flux-system"},
            "managedFields": [entry("kustomize-controller", version, "2026-12-01T09:00:00Z")]}


def kustomization(name, declared, path="./apps"):
    """A Kustomization as kustomize-controller leaves it: its inventory says each object's declared version."""
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"path": path, "sourceRef": {"kind": "GitRepository", "name": "repo"}},
            "status": {"lastAppliedRevision": "main@sha1:0123abc", "inventory": {"entries": [
                {"id": "a_%s_%s_Crontab" % (obj_name, GROUP), "v": version} for obj_name, version in declared]}}}


TWO_SOURCES = [flux_obj("app-1", "apps"), flux_obj("app-2", "apps"), flux_obj("old-1", "legacy")]
MOVED_AND_NOT = {"flux-system/apps": kustomization("apps", [("app-1", "v2"), ("app-2", "v2")]),
                 "flux-system/legacy": kustomization("legacy", [("old-1", "v1")], path="./legacy")}


def test_a_kustomization_whose_inventory_says_the_version_that_stays_holds_nothing_back():
    # Flux sends nothing when only the apiVersion changed, so its entries of apps stay at v1; apps' inventory says v2
    options = WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0)
    out = find_writers(Server(TWO_SOURCES, kustomizations=MOVED_AND_NOT), [crd()], options)
    (c,) = out.crds
    assert [(w.manager, w.objects, w.refs) for w in c.writers] == [("kustomize-controller", 1, ["flux-system/legacy"])]
    assert c.moved_entries == 2 and out.held_back == [NAME]
    assert [str(s) for s in c.writers[0].sources] == [
        "Flux Kustomization flux-system/legacy (GitRepository flux-system/repo, path ./legacy, revision main@sha1:0123abc)"]
    record = out.broken_clients("prod")[0]
    assert record["source"] == {"what": "Flux Kustomization", "ref": "flux-system/legacy",
                                "says": "GitRepository flux-system/repo, path ./legacy, revision main@sha1:0123abc"}
    assert out.to_dict("prod")["crds"][0]["moved_entries"] == 2
    assert out.to_dict("prod")["flux_words"] == "Flux Kustomizations asked: 2"
    # once legacy says v2 too, nothing holds the CRD back and nothing needs accepting
    both = dict(MOVED_AND_NOT, **{"flux-system/legacy": kustomization("legacy", [("old-1", "v2")])})
    out = find_writers(Server(TWO_SOURCES, kustomizations=both), [crd()], options)
    assert out.ok and out.held_back == [] and out.crds[0].moved_entries == 3


@pytest.mark.parametrize("answer, words", [
    (404, "not found at v1 or v1beta2"), (403, "forbidden (HTTP 403); grant get on kustomizations"),
    ({"status": {"inventory": {"entries": "x"}}}, "status.inventory.entries is not a list"),
    ({"status": {}}, "no status.inventory"),
])
def test_a_kustomization_not_asked_leaves_the_evidence_standing_and_says_why(answer, words):
    options = WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0)
    out = find_writers(Server(TWO_SOURCES, kustomizations={"flux-system/apps": answer}), [crd()], options)
    (c,) = out.crds
    assert [(w.refs, w.objects) for w in c.writers] == [(["flux-system/apps"], 2), (["flux-system/legacy"], 1)]
    assert c.moved_entries == 0 and out.held_back == [NAME]
    assert "inventory not asked: " in str(c.writers[0].sources[0]) and words in str(c.writers[0].sources[0])
    assert "not asked: flux-system/apps (" in out.flux_sentence()


def test_accepting_a_source_accepts_exactly_the_objects_that_name_it():
    options = dict(since="2026-12-01T14:55:00Z", metrics_window=0)
    unmoved = {}  # no inventory read: both sources' entries stand

    def run(accept):
        return find_writers(Server(TWO_SOURCES, kustomizations=unmoved), [crd()],
                            WritersOptions({NAME: ["v1"]}, accept=accept, **options))
    apps_only = run(["flux-system/apps"])
    assert apps_only.held_back == [NAME]
    assert "flux-system/legacy" in apps_only.refusal("prod") and "flux-system/apps" not in apps_only.refusal("prod")
    assert [r["held"] for r in apps_only.broken_clients("prod")] == [False, True]
    # the manager's name covers only its objects that name no source
    manager = run(["kustomize-controller"])
    assert manager.held_back == [NAME] and manager.unmatched_accepts() == ["kustomize-controller"]
    assert run(["flux-system/apps", "flux-system/legacy"]).held_back == []
    typo = run(["flux-system/apps", "flux-system/legasy"])
    assert typo.unmatched_accepts() == ["flux-system/legasy"] and typo.held_back == [NAME]


def test_any_number_of_sources_can_be_named_one_by_one():
    objects = [flux_obj("o-%d" % i, "src-%d" % i) for i in range(8)]
    options = dict(since="2026-12-01T14:55:00Z", metrics_window=0)
    out = find_writers(Server(objects), [crd()], WritersOptions({NAME: ["v1"]}, accept=["flux-system/src-7"], **options))
    assert len(out.crds[0].writers) == 8 and len(out.crds[0].clients(out.accept)) == 7
    every = ["flux-system/src-%d" % i for i in range(8)]
    assert find_writers(Server(objects), [crd()], WritersOptions({NAME: ["v1"]}, accept=every, **options)).held_back == []


def test_inventory_ids_are_written_as_cli_utils_writes_them():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.flux_inventory import inventory_id
    assert inventory_id("a", "w-1", "example.com", "Widget") == "a_w-1_example.com_Widget"
    assert inventory_id("", "system:admin", "rbac.authorization.k8s.io", "ClusterRole") == \
        "_system__admin_rbac.authorization.k8s.io_ClusterRole"


class BehindBalancer(Server):
    """Three apiservers alive behind a load balancer; none of them answers when asked by its own address."""

    def for_endpoint(self, url, new_connection_per_request=False):
        class Unreachable:
            def request(self, *args, **kwargs):
                return resp(503, {"kind": "Status", "message": "no route"})
        return Unreachable()


def test_no_window_is_waited_out_when_no_apiserver_can_be_read_one_by_one():
    slept = []
    server = BehindBalancer([], leases=3)
    out = find_writers(server, [crd()], WritersOptions({NAME: ["v1"]}, metrics_window=30),
                       connect=server.for_endpoint, sleep=slept.append)
    assert slept == [] and out.window_s == 0.0 and not out.readers_checked()
    assert out.metrics.startswith("not measured: the apiservers cannot be reached one by one")
    assert not [c for c in server.calls if c[1] == "/metrics"]


class HelmForbidden(Server):
    """The apiserver as the shipped ClusterRole sees it: no list on Secrets or ConfigMaps anywhere."""

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        if path.endswith(("/secrets", "/configmaps")):
            self.calls.append((method, path, dict(query or [])))
            return resp(403, {"kind": "Status", "message": "forbidden", "reason": "Forbidden", "code": 403})
        return super().request(method, path, query, body, content_type, accept)


def helm_object(name, release="widgets", namespace="shop"):
    # Helm 3 (or Helm 4 --server-side=false) wrote it with an Update entry, which the re-store relabelled
    return {"name": name, "namespace": namespace, "managedFields": [entry("helm", "v2", "2026-12-01T10:00:00Z", "Update")],
            "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}}


def test_a_helm_release_whose_storage_cannot_be_read_holds_the_crd_back_naming_the_permission():
    objects = [helm_object("w-%d" % i) for i in range(3)]
    options = WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0, helm_releases=True)
    server = HelmForbidden(objects)
    out = find_writers(server, [crd()], options)
    (c,) = out.crds
    assert c.helm_named == {"shop/widgets": ["shop/w-0", "shop/w-1", "shop/w-2"]}
    [w] = c.writers
    assert (w.manager, w.kind, w.operation, w.version, w.objects, w.refs) == (
        "shop/widgets", NOT_CHECKED_HELM, "release storage", "v1", 3, ["shop/widgets"])
    assert out.held_back == [NAME] and out.helm.not_checked.keys() == {"shop/widgets"}
    text = out.refusal("prod")
    assert "Helm release shop/widgets (not checked: listing Secrets and ConfigMaps in namespace shop is forbidden; " \
           "grant list on secrets in namespace shop" in text, text
    words = out.to_dict("prod")["helm_words"]
    assert "Helm release shop/widgets not checked: listing Secrets and ConfigMaps" in words, words
    # looked up in its own namespace, by its name, in both of Helm's drivers
    assert [(p, q.get("labelSelector")) for _m, p, q in server.calls if "/namespaces/" in p] == [
        ("/api/v1/namespaces/shop/secrets", "owner=helm,name=widgets"),
        ("/api/v1/namespaces/shop/configmaps", "owner=helm,name=widgets")]
    accepted = find_writers(HelmForbidden(objects), [crd()], WritersOptions(
        {NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0, helm_releases=True, accept=["shop/widgets"]))
    assert accepted.held_back == [] and not accepted.ok


def test_the_listing_is_never_at_a_version_being_removed_so_it_is_never_counted_as_a_client():
    # before release N the storage version may be the one release N stops serving: the objects are listed at another
    # served version, so this run's own LIST does not grow the counters of the version it checks
    class StoredAtTheOldVersion(Server):
        def request(self, method, path, query=None, body=None, content_type=None, accept=None):
            if path == "/apis/%s/v1/crontabs" % GROUP:
                raise AssertionError("listed at v1, the version being checked")
            return super().request(method, path, query, body, content_type, accept)

    old_storage = Crd.from_api(make_crd(NAME, versions=(("v1", True, True), ("v2", True, False)), stored=("v1",)))
    out = find_writers(StoredAtTheOldVersion(OBJECTS), [old_storage],
                       WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z", metrics_window=0))
    assert out.crds[0].listed == 3


def test_objects_listable_only_at_the_version_checked_are_listed_after_the_window():
    # before release N the live CRD may serve only the version release N stops serving: listing it inside the window
    # would count this run's LIST as a reader there
    only_v1 = Crd.from_api(make_crd(NAME, versions=(("v1", True, True),), stored=("v1",)))

    class OnlyV1(Server):
        def request(self, method, path, query=None, body=None, content_type=None, accept=None):
            if path == "/apis/%s/v1/crontabs" % GROUP:
                self.calls.append((method, path, dict(query or [])))
                return resp(200, {"items": [{"metadata": m} for m in self.objects], "metadata": {}})
            return super().request(method, path, query, body, content_type, accept)

    server = OnlyV1(OBJECTS, [metrics([]), metrics([])])
    out = find_writers(server, [only_v1], WritersOptions({NAME: ["v1"]}, since="2026-12-01T14:55:00Z",
                                                         metrics_window=5), connect=server.for_endpoint,
                       sleep=lambda s: None)
    paths = [c[1] for c in server.calls if c[1] in ("/metrics", "/apis/%s/v1/crontabs" % GROUP)]
    assert paths == ["/metrics", "/metrics", "/apis/%s/v1/crontabs" % GROUP], paths
    assert out.crds[0].listed == 3 and out.crds[0].fix().startswith("move these clients to the version that stays")

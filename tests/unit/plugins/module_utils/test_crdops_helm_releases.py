# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Helm releases whose stored manifest declares a removed version (helm/helm#7361): the scan picks the revision
`helm upgrade` reads, and the rewrite changes one line per document under the Secret's resourceVersion."""
from __future__ import annotations

import base64
import gzip
import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import (
    ApiError, ConflictError, CrdOpsError, RefusalError)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.helm_releases import (
    HelmScan, decode_payload, go_json_string, look_up_release, look_up_releases, manifest_span, plan_rewrite,
    rewrite_release, scan_helm_releases)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.helm_move import move_helm_releases
from tests.unit.crdops_fakes import make_crd, resp, status

GROUP = "stable.example.com"
CRD = "crontabs." + GROUP
CRDS = {CRD: (GROUP, "CronTab", ["v1alpha1"])}
STORAGE = {CRD: "v1"}
# data.release of Secret sh.helm.release.v1.app.v1 as helm v4.3.2 (tests/clients/build_helm.sh) stored it for
# `helm install app` of a chart with two CronTabs at v1alpha1 and a ConfigMap (tests/clients/helm.py write_chart)
HELM_V4_PAYLOAD = (
    "SDRzSUFBQUFBQUFDLzhTVmJXL2JOaERIdjRwd2UxR2drQnhSc2wyYjcxSXY4VHhuRzVJNlZ1UnBLRTRVTFRIaDB5ektEeXZ5M1FmSm05TUE2Yk"
    "lOd3dyeGhYalVIWC8zSisvMENUUXFEaFRRV3ZCQjZMVUIrZ25XWWxPN2p3VzMwaHg0QVJTaU1Cb0dKQXJDZUJHT2FIOUE0MEV2Q3FOQmZ4U1BS"
    "aXZ3UWVJL2RDaDR6VGJDT21FMFVKanAycUdVSGpQS1N1NDQrRkE3ZEUwTkZFNVJIMzFnRlc1Y1M2aTR3d0lkdHUvUFV0anlUWDJNR2ZaSUx3UW"
    "YwSXJseWJpTndBZDNzSDg0U01Hd1EzajBRUnIyQUZRM1V2cmd1TElTSGErQi9uemE0R1E4QzhPQWJZeDJtQWRvYldBMDd4MVF5VGF0amduU3Uv"
    "ZDJxWllIRnNsdGZtOUtGdDlVcWRyTEs3WHNwd25aNWRQYkpvM0c3aXBPOTJteTMrSDBZajlSenVicWVqaTcrUEdRUjRQYk5Kbk44MlFacHNsTl"
    "ZVd3ZoaE54WHVicTBxMFdwa3p2M3UrdWtuR3p1cmEvc2VueS9xZlNsTE5wNTdmbzV1SmN6OFdJekNhbW5JdnpYMmNUbzF0L1RFaTFpbTZIcytu"
    "M2hNVlM1SEU1QngrVUtaem9jbnpwM01KeFRNYmhlREJhd2FQL2tocmttUnB1Wjc2R0duYzNjYjc3WDlUb2grUmRQQjUvU1kwb1lFYXZSYW5RZG"
    "5vdzlZb2N4ZjNGSENQWnJMNDE1WFUwYmxaSzZrVnl1WnNvSW92cDVVTjZkMU1kVXhwVWVkTGlYdTdZaE56bjEvYXp0WG80K3k3OVcvaURhTndu"
    "TGY0dlBteFJOdTB0UDE3N21sVmM0ZlBaVTdnd0RFblFqVVVZMG02MGxid1c4aW5DYTV0SFVaL0U1RjJySFNqVVlzMXJCeFNDSU1qME45NEgwMn"
    "dZcHg1YWUvYTZvcGwrS20zcWJVbW1INFF1cURmcFB2NEJiYWIvYkJNMDA1N1hIbFVYTzJBcTB5ZnpBL1cybWM3MFh6TzhYUEhQRVdxSHVlUTl2"
    "c2UyaS9XWVVXZGJndEpXK01TMk1YcUIrUmZKak9hWnJpMW5uYjNkOGtNNzhkNjhQUnQ0YjQvUG0zWkpLQ3c1OWZLbVB1Um0venIveXpYNm4vTz"
    "duZm0zL0o4M2IrSjNoVlZiWk1mcVFoVmcxOHV0UEh4VTNGV20vY3ZVTmNMajd3RUFBUC8vMUExWXFjUUdBQUE9"
)
SECRET_VALUE = "hunter2-do-not-print"  # a value in the release's config and manifest: never in any result


def doc(name, version="v1alpha1", kind="CronTab", namespace=None, extra=""):
    ns = "  namespace: %s\n" % namespace if namespace else ""
    head = "# Source: app/templates/%s.yaml\napiVersion: %s/%s\nkind: %s\nmetadata:\n  name: %s\n%s" % (
        name, GROUP, version, kind, name, ns)
    return head + "spec:\n  cronSpec: '*/5 * * * *'\n  note: \"<b>&amp; %s\"\n%s" % (SECRET_VALUE, extra)


def manifest(*docs):
    return "".join("---\n" + d for d in docs)


def go_json(obj):
    """encoding/json.Marshal's output: no spaces, UTF-8 as is, <, >, & and U+2028/9 escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for char, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                      ("\u2029", "\\u2029")):
        text = text.replace(char, esc)
    return text.encode("utf-8")


def release_json(name, namespace, revision, state, text):
    """Fields in Helm v4's struct order (pkg/release/v1/release.go), as json.Marshal writes them."""
    return go_json({
        "name": name,
        "info": {"first_deployed": "2026-12-01T10:00:00.123456789Z", "last_deployed": "2026-12-01T10:00:00Z",
                 "description": "Install complete", "status": state, "notes": "a < b"},
        "chart": {"metadata": {"name": "app", "version": "0.1.0", "apiVersion": "v2"},
                  "templates": [{"name": "templates/crontab.yaml", "data": "YXBpVmVyc2lvbjo="}]},
        "config": {"password": SECRET_VALUE, "ratio": 1.5e-07, "big": 12345678901234567890},
        "manifest": text, "hooks": [{"name": "pre", "manifest": "apiVersion: %s/v1alpha1\n" % GROUP}],
        "version": revision, "namespace": namespace, "apply_method": "ssa"})


def helm_encode(raw, compress=True, driver="Secret"):
    """Helm's encodeRelease (gzip at BestCompression, base64), then the API's base64 of Secret data."""
    payload = gzip.compress(raw, compresslevel=9, mtime=0) if compress else raw
    helm_text = base64.b64encode(payload)
    return (base64.b64encode(helm_text) if driver == "Secret" else helm_text).decode()


def helm_decode(data, driver="Secret"):
    helm_text = base64.b64decode(data) if driver == "Secret" else data
    return gzip.decompress(base64.b64decode(helm_text))


RESOURCE = {"Secret": "secrets", "ConfigMap": "configmaps"}


class FakeApi:
    """Secrets and ConfigMaps of one apiserver: owner=helm LIST (all namespaces with limit/continue, or one
    namespace by label), GET, POST (409 when it exists) and PUT with the resourceVersion lock, dryRun=All, and
    403 for the (verb, resource) pairs in ``forbid`` (verbs: list-all, list, get, create, update)."""

    cluster_label = "test-cluster"

    def __init__(self):
        self.objects = {}  # (resource, namespace, name) -> object
        self.calls = []
        self.put_bodies = []
        self.rv = 100
        self.list_answer = None  # an HTTP status the all-namespaces LIST of Secrets answers instead
        self.expire_continue = False  # the first continue answers 410 with an inconsistent token
        self.forbid = set()
        self.crds = {}  # name -> CRD, for move_helm_releases

    @property
    def secrets(self):
        return dict(((ns, name), o) for (res, ns, name), o in self.objects.items() if res == "secrets")

    def add(self, name, namespace, revision, state, text, *, raw=None, compress=True, kind=None, driver="Secret"):
        self.rv += 1
        obj = {
            "apiVersion": "v1", "kind": driver,
            "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (name, revision), "namespace": namespace,
                         "resourceVersion": str(self.rv),
                         "labels": {"name": name, "owner": "helm", "status": state, "version": str(revision),
                                    "createdAt": "1796119200"}},
            "data": {"release": helm_encode(raw or release_json(name, namespace, revision, state, text), compress,
                                            driver)}}
        if driver == "Secret":
            obj["type"] = kind or "helm.sh/release.v1"
        self.objects[(RESOURCE[driver], namespace, obj["metadata"]["name"])] = obj
        return obj

    def get_obj(self, namespace, name, driver="Secret"):
        return self.objects.get((RESOURCE[driver], namespace, name))

    def release(self, namespace, name, revision, driver="Secret"):
        """(labels, release JSON) of one revision."""
        obj = self.get_obj(namespace, "sh.helm.release.v1.%s.v%d" % (name, revision), driver)
        return obj["metadata"]["labels"], json.loads(helm_decode(obj["data"]["release"], driver))

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        q = dict(query or [])
        self.calls.append((method, path, q))
        if path.startswith("/apis/apiextensions.k8s.io/"):
            crd = self.crds.get(path.rsplit("/", 1)[1])
            return resp(200, crd) if crd else status(404, "not found", "NotFound")
        parts = path.strip("/").split("/")  # api v1 [namespaces ns] resource [name]
        if len(parts) == 3:
            return self._list_all(parts[2], q)
        ns, res = parts[3], parts[4]
        if len(parts) == 5 and method == "GET":
            return self._list_ns(res, ns, q)
        verb = {"GET": "get", "POST": "create", "PUT": "update"}[method]
        if (verb, res) in self.forbid:
            return status(403, '%s is forbidden: cannot %s resource "%s"' % (res, verb, res), "Forbidden")
        if method == "POST":
            return self._create(res, ns, json.loads(body), q)
        obj = self.objects.get((res, ns, parts[5]))
        if obj is None:
            return status(404, '%s "%s" not found' % (res, parts[5]), "NotFound")
        if method == "GET":
            return resp(200, json.loads(json.dumps(obj)))
        return self._update(res, ns, parts[5], obj, json.loads(body), q, content_type)

    def _create(self, res, ns, sent, q):
        key = (res, ns, sent["metadata"]["name"])
        if key in self.objects:
            return status(409, "already exists", "AlreadyExists")
        if q.get("dryRun") != "All":
            self.rv += 1
            sent["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[key] = sent
        return resp(201, sent)

    def _update(self, res, ns, name, obj, sent, q, content_type):
        assert content_type == "application/json"
        if q.get("dryRun") != "All":
            self.put_bodies.append(sent)
        if sent["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            return status(409, "the object has been modified", "Conflict")
        if q.get("dryRun") != "All":
            self.rv += 1
            sent["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[(res, ns, name)] = sent
        return resp(200, sent)

    def _list_ns(self, res, ns, q):
        if ("list", res) in self.forbid:
            return status(403, "%s is forbidden" % res, "Forbidden")
        want = dict(kv.split("=") for kv in q["labelSelector"].split(","))
        items = [o for (r, n, _name), o in sorted(self.objects.items()) if r == res and n == ns
                 and all(o["metadata"]["labels"].get(k) == v for k, v in want.items())]
        return resp(200, {"items": json.loads(json.dumps(items))})

    def _list_all(self, res, q):
        if ("list-all", res) in self.forbid or (res == "secrets" and self.list_answer):
            return status(self.list_answer or 403, "%s is forbidden" % res, "Forbidden")
        assert q["labelSelector"] == "owner=helm"
        items = [o for (r, _n, _name), o in sorted(self.objects.items()) if r == res]
        start = int(q.get("continue") or 0)
        if start and self.expire_continue:
            self.expire_continue = False
            return status(410, "continue expired", "Expired", continue_token=str(start))
        end = start + int(q["limit"])
        meta = {"continue": str(end)} if end < len(items) else {}
        return resp(200, {"items": items[start:end], "metadata": meta})

    def writes(self, dry_run=False):
        return [c for c in self.calls if c[0] in ("PUT", "POST") and (c[2].get("dryRun") == "All") == dry_run]

    def puts(self):
        return [c for c in self.calls if c[0] == "PUT"]


# ---------------------------------------------------------------------------------------------- the payload


def test_a_payload_encoded_like_helm_decodes_to_the_release_and_its_manifest():
    text = manifest(doc("a"))
    raw = release_json("app", "team", 3, "deployed", text)
    decoded = decode_payload(helm_encode(raw))
    assert decoded == raw
    start, end, value = manifest_span(decoded.decode())
    assert value == text
    assert decoded.decode()[start:end] == go_json_string(text)  # Go's escaping: the splice keeps other bytes


def test_a_payload_stored_before_compression_is_read_as_plain_json():
    raw = release_json("app", "team", 1, "deployed", manifest(doc("a")))
    assert decode_payload(helm_encode(raw, compress=False)) == raw


def test_a_payload_written_by_helm_v4_decodes_and_is_rewritten_as_a_new_revision():
    raw = decode_payload(HELM_V4_PAYLOAD)
    start, end, text = manifest_span(raw.decode())
    assert raw.decode()[start:end] == go_json_string(text)  # Go's own escaping of the manifest, reproduced
    assert text.count("apiVersion: %s/v1alpha1\n" % GROUP) == 2 and json.loads(raw)["version"] == 1
    api = FakeApi()
    api.add("app", "team-a", 1, "deployed", "", raw=raw)
    [rel] = scan_helm_releases(api, CRDS).releases
    assert sorted(o.name for o in rel.objects) == ["app-one", "app-two"]
    done = rewrite_release(api, rel, STORAGE)
    assert (done.revision, done.secret, done.status) == (2, "sh.helm.release.v1.app.v2", "deployed")
    labels, new = api.release("team-a", "app", 2)
    old_labels, old = api.release("team-a", "app", 1)
    want = text.replace("apiVersion: %s/v1alpha1\n" % GROUP, "apiVersion: %s/v1\n" % GROUP)
    assert new["manifest"] == want and new["version"] == 2 and new["info"]["status"] == "deployed"
    assert "moved CronTab app-one, app-two from %s/v1alpha1 to v1" % GROUP in new["info"]["description"]
    assert old["manifest"] == text and old["info"]["status"] == "superseded" and old_labels["status"] == "superseded"
    original = json.loads(raw)
    for key in set(original) - {"manifest", "version", "info"}:
        assert new[key] == original[key] == old[key], key  # chart, values, hooks: as Helm stored them
    assert (labels["status"], labels["version"], labels["owner"], labels["name"]) == ("deployed", "2", "helm", "app")


def test_go_json_string_escapes_as_go_does():
    assert go_json_string('a<b>&"c"\\\n\t\b\f\x01\u2028\u00e9') == \
        '"a\\u003cb\\u003e\\u0026\\"c\\"\\\\\\n\\t\\b\\f\\u0001\\u2028\u00e9"'


# ---------------------------------------------------------------------------------------------- the scan


def test_the_latest_deployed_revision_is_read_not_superseded_or_failed_ones():
    api = FakeApi()
    api.add("app", "team", 1, "superseded", manifest(doc("old-one"), doc("old-two")))
    api.add("app", "team", 2, "deployed", manifest(doc("kept", version="v1"), doc("current")))
    api.add("app", "team", 3, "failed", manifest(doc("failed-one")))
    scan = scan_helm_releases(api, CRDS)
    assert scan.checked and scan.note is None and scan.scanned == 1
    [rel] = scan.releases
    assert (rel.label, rel.revision, rel.secret, rel.status) == ("team/app", 2, "sh.helm.release.v1.app.v2", "deployed")
    assert [(o.name, o.api_version, o.crd, o.version) for o in rel.objects] == [
        ("current", GROUP + "/v1alpha1", CRD, "v1alpha1")]


def test_without_a_deployed_revision_the_latest_failed_one_is_read_and_uninstalled_releases_are_not():
    api = FakeApi()
    api.add("broken", "team", 1, "failed", manifest(doc("a")))
    api.add("broken", "team", 2, "failed", manifest(doc("b")))
    api.add("gone", "team", 1, "uninstalled", manifest(doc("c")))
    scan = scan_helm_releases(api, CRDS)
    assert [(r.name, r.revision, [o.name for o in r.objects]) for r in scan.releases] == [("broken", 2, ["b"])]


def test_documents_at_removed_versions_are_found_and_others_kept():
    api = FakeApi()
    text = manifest(doc("old", namespace="other"), doc("new", version="v1"), doc("similar", kind="CronJob"),
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  x: %s/v1alpha1\n" % GROUP)
    api.add("app", "team", 1, "deployed", text)
    api.add("other", "team", 1, "deployed", manifest(doc("fine", version="v1")))
    scan = scan_helm_releases(api, CRDS)
    assert scan.scanned == 2
    [rel] = scan.releases
    assert [o.to_dict() for o in rel.objects] == [{"kind": "CronTab", "namespace": "other", "name": "old",
                                                   "apiVersion": GROUP + "/v1alpha1", "crd": CRD,
                                                   "version": "v1alpha1"}]
    assert scan.for_crd(CRD)[0].objects == rel.objects and scan.for_crd("other.example.com") == []


def test_results_never_carry_secret_contents():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    api.add("bad", "team", 1, "deployed", "", raw=b"{not json " + SECRET_VALUE.encode())
    scan = scan_helm_releases(api, CRDS)
    text = json.dumps(scan.to_dict())
    assert SECRET_VALUE not in text and "cronSpec" not in text
    assert scan.unreadable == ["team/sh.helm.release.v1.bad.v1"] and "could not be decoded" in scan.note
    plan = plan_rewrite(api, scan.releases[0], STORAGE)
    assert SECRET_VALUE not in json.dumps(plan.to_dict()) + repr(plan)


@pytest.mark.parametrize("code", [403, 401])
def test_a_forbidden_list_is_not_checked_with_a_note_not_an_error(code):
    api = FakeApi()
    api.list_answer = code
    scan = scan_helm_releases(api, CRDS)
    assert isinstance(scan, HelmScan) and not scan.checked and scan.releases == []
    assert "not checked" in scan.note and "HTTP %d" % code in scan.note and "docs/rbac.md" in scan.note


def test_other_list_errors_raise_naming_the_cluster():
    api = FakeApi()
    api.list_answer = 500
    with pytest.raises(ApiError, match="cluster test-cluster"):
        scan_helm_releases(api, CRDS)


def test_the_list_is_paged_and_an_expired_continue_token_resumes():
    api = FakeApi()
    for i in range(5):
        api.add("app%d" % i, "ns%d" % i, 1, "deployed", manifest(doc("o%d" % i)))
    api.expire_continue = True
    scan = scan_helm_releases(api, CRDS, page_size=2)
    assert sorted(r.name for r in scan.releases) == ["app%d" % i for i in range(5)]
    lists = [q for m, p, q in api.calls if p == "/api/v1/secrets"]
    assert all(q["limit"] == "2" for q in lists) and [q.get("continue") for q in lists] == [None, "2", "2", "4"]


def test_secrets_that_are_not_helm_releases_are_ignored_and_no_removed_version_lists_nothing():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")), kind="Opaque")
    assert scan_helm_releases(api, CRDS).releases == []
    calls = len(api.calls)
    assert scan_helm_releases(api, {CRD: (GROUP, "CronTab", [])}).checked and len(api.calls) == calls


# ---------------------------------------------------------------------------------------------- the rewrite


def test_the_rewrite_is_revision_n_plus_1_with_only_the_apiversion_lines_changed_and_n_superseded():
    api = FakeApi()
    text = manifest(doc("a", extra="  # apiVersion: %s/v1alpha1 in a comment\n" % GROUP),
                    doc("b", version="v1"), doc("c"))
    before = api.add("app", "team", 4, "deployed", text)
    before["metadata"]["labels"]["team"] = "payments"  # helm install --labels: kept on every revision
    [rel] = scan_helm_releases(api, CRDS).releases
    done = rewrite_release(api, rel, STORAGE)
    new_obj = api.get_obj("team", "sh.helm.release.v1.app.v5")
    assert done.objects == [] and (done.revision, done.resource_version) == (5, new_obj["metadata"]["resourceVersion"])
    assert new_obj["type"] == "helm.sh/release.v1"
    labels = new_obj["metadata"]["labels"]
    assert {k: labels[k] for k in ("name", "owner", "status", "version", "team")} == {
        "name": "app", "owner": "helm", "status": "deployed", "version": "5", "team": "payments"}
    _labels, new = api.release("team", "app", 5)
    want = text.replace("apiVersion: %s/v1alpha1\n" % GROUP, "apiVersion: %s/v1\n" % GROUP)
    assert new["manifest"] == want and "# apiVersion: %s/v1alpha1 in" % GROUP in want
    old_labels, old = api.release("team", "app", 4)
    assert old_labels["status"] == old["info"]["status"] == "superseded" and old["manifest"] == text
    assert old_labels["team"] == "payments" and "modifiedAt" in old_labels
    # the next scan reads revision 5, deployed, which declares nothing removed
    assert scan_helm_releases(api, CRDS).releases == []


def test_quotes_comments_and_crlf_line_ends_survive_the_rewrite():
    api = FakeApi()
    text = ("---\r\napiVersion: \"%s/v1alpha1\"  # pinned\r\nkind: CronTab\r\nmetadata:\r\n  name: q\r\n" % GROUP)
    api.add("app", "team", 1, "deployed", text)
    [rel] = scan_helm_releases(api, CRDS).releases
    rewrite_release(api, rel, STORAGE)
    assert api.release("team", "app", 2)[1]["manifest"] == text.replace("/v1alpha1\"", "/v1\"")


def test_both_writes_are_dry_run_first_then_n_is_superseded_before_n_plus_1_is_created():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    [rel] = scan_helm_releases(api, CRDS).releases
    rewrite_release(api, rel, STORAGE)
    writes = [(m, q.get("dryRun")) for m, p, q in api.calls if m in ("PUT", "POST")]
    # between the last two no revision is deployed, and helm upgrade reads the latest, superseded one (its old,
    # still served manifest); never two deployed revisions
    assert writes == [("POST", "All"), ("PUT", "All"), ("PUT", None), ("POST", None)]


def test_a_later_failed_revision_numbers_the_new_one_and_keeps_its_status():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    api.add("app", "team", 2, "failed", manifest(doc("a"), doc("b")))
    [rel] = scan_helm_releases(api, CRDS).releases
    assert rel.revision == 1
    assert rewrite_release(api, rel, STORAGE).revision == 3
    assert [api.release("team", "app", r)[0]["status"] for r in (1, 2, 3)] == ["superseded", "failed", "deployed"]


def test_without_a_deployed_revision_the_latest_is_moved_and_nothing_is_superseded():
    api = FakeApi()
    api.add("app", "team", 1, "superseded", manifest(doc("a")))
    api.add("app", "team", 2, "failed", manifest(doc("a")))
    [rel] = scan_helm_releases(api, CRDS).releases
    rewrite_release(api, rel, STORAGE)
    assert api.puts() == []
    assert [api.release("team", "app", r)[0]["status"] for r in (1, 2, 3)] == ["superseded", "failed", "deployed"]


def test_a_release_in_configmaps_is_read_and_rewritten_in_configmaps_with_their_one_base64_layer():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")), driver="ConfigMap")
    scan = scan_helm_releases(api, CRDS)
    [rel] = scan.releases
    assert scan.configmaps_checked and rel.driver == "ConfigMap" and rel.secret == "sh.helm.release.v1.app.v1"
    rewrite_release(api, rel, STORAGE)
    new_obj = api.get_obj("team", "sh.helm.release.v1.app.v2", "ConfigMap")
    assert new_obj["kind"] == "ConfigMap" and "type" not in new_obj and api.secrets == {}
    stored = new_obj["data"]["release"]
    assert decode_payload(stored, "ConfigMap") == helm_decode(stored, "ConfigMap")
    assert api.release("team", "app", 2, "ConfigMap")[1]["manifest"] == manifest(doc("a", version="v1"))
    assert api.release("team", "app", 1, "ConfigMap")[0]["status"] == "superseded"


def test_a_forbidden_create_refuses_before_anything_is_written():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    [rel] = scan_helm_releases(api, CRDS).releases
    api.forbid.add(("create", "secrets"))
    with pytest.raises(CrdOpsError, match="forbidden"):
        rewrite_release(api, rel, STORAGE)
    assert api.writes() == [] and api.release("team", "app", 1)[0]["status"] == "deployed"


def test_a_create_that_fails_after_the_supersede_puts_revision_n_back_as_it_was():
    api = FakeApi()
    before = api.add("app", "team", 1, "deployed", manifest(doc("a")))
    [rel] = scan_helm_releases(api, CRDS).releases
    real = api.request

    def racing(method, path, **kw):  # Helm stores revision 2 between our dry-run and our create
        if method == "POST" and dict(kw.get("query") or []).get("dryRun") != "All":
            api.add("app", "team", 2, "pending-upgrade", manifest(doc("a")))
        return real(method, path, **kw)

    api.request = racing
    with pytest.raises(ConflictError, match="exists already"):
        rewrite_release(api, rel, STORAGE)
    after = api.get_obj("team", rel.secret)
    assert after["metadata"]["labels"]["status"] == "deployed" and after["data"] == before["data"]


def test_a_document_without_its_own_apiversion_line_is_refused_before_any_write():
    api = FakeApi()
    flow = '{"apiVersion": "%s/v1alpha1", "kind": "CronTab", "metadata": {"name": "flow"}}\n' % GROUP
    api.add("app", "team", 1, "deployed", manifest(flow))
    [rel] = scan_helm_releases(api, CRDS).releases
    with pytest.raises(RefusalError, match="helm-mapkubeapis"):
        rewrite_release(api, rel, STORAGE)
    assert api.puts() == []


def test_a_secret_changed_since_the_scan_is_refused_and_the_put_is_locked():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    [rel] = scan_helm_releases(api, CRDS).releases
    api.secrets[("team", rel.secret)]["metadata"]["resourceVersion"] = "999"
    with pytest.raises(ConflictError, match="changed since the scan.*run again"):
        rewrite_release(api, rel, STORAGE)
    assert api.writes() == [] and api.writes(dry_run=True) == []

    [rel] = scan_helm_releases(api, CRDS).releases
    real = api.request

    def racing(method, path, **kw):  # Helm writes the Secret between our dry-run and our PUT
        if method == "PUT" and dict(kw.get("query") or []).get("dryRun") != "All":
            api.secrets[("team", rel.secret)]["metadata"]["resourceVersion"] = "1000"
        return real(method, path, **kw)

    api.request = racing
    with pytest.raises(ConflictError, match="run again"):
        rewrite_release(api, rel, STORAGE)
    assert [body["metadata"]["resourceVersion"] for body in api.put_bodies] == ["999"]
    assert api.get_obj("team", "sh.helm.release.v1.app.v2") is None  # no new revision after a lost supersede


def test_a_pending_latest_revision_blocks_the_rewrite():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    api.add("app", "team", 2, "pending-upgrade", manifest(doc("a")))
    [rel] = scan_helm_releases(api, CRDS).releases
    assert rel.revision == 1 and "revision 2 is pending-upgrade" in rel.blocked
    with pytest.raises(RefusalError, match="pending-upgrade"):
        rewrite_release(api, rel, STORAGE)
    assert api.puts() == []


def test_plan_rewrite_writes_nothing_and_a_missing_storage_version_is_refused():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a"), doc("b")))
    [rel] = scan_helm_releases(api, CRDS).releases
    plan = plan_rewrite(api, rel, STORAGE)
    assert [c["to_apiVersion"] for c in plan.to_dict()["changes"]] == [GROUP + "/v1"] * 2 and api.puts() == []
    with pytest.raises(RefusalError, match="no storage version"):
        plan_rewrite(api, rel, {})


# ---------------------------------------------------------------------------------------------- one release


def test_a_release_named_by_objects_is_read_in_its_namespace_when_the_lists_of_all_namespaces_are_forbidden():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a")), driver="ConfigMap")
    api.forbid |= {("list-all", "secrets"), ("list-all", "configmaps")}
    scan = scan_helm_releases(api, CRDS)
    assert not scan.checked and not scan.configmaps_checked and scan.releases == []
    look_up_releases(api, scan, ["team/app"], CRDS)
    [rel] = scan.releases
    assert (rel.label, rel.driver, scan.looked_up, scan.not_checked) == ("team/app", "ConfigMap", ["team/app"], {})
    lists = [(p, q["labelSelector"]) for m, p, q in api.calls if p.startswith("/api/v1/namespaces/")]
    assert lists == [("/api/v1/namespaces/team/secrets", "owner=helm,name=app"),
                     ("/api/v1/namespaces/team/configmaps", "owner=helm,name=app")]


def test_a_release_the_lists_showed_is_not_read_again():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a", version="v1")))
    scan = look_up_releases(api, scan_helm_releases(api, CRDS), ["team/app"], CRDS)
    assert scan.looked_up == [] and not [c for c in api.calls if c[1].startswith("/api/v1/namespaces/")]


def test_a_release_that_cannot_be_read_is_not_checked_naming_the_permission():
    api = FakeApi()
    api.forbid |= {("list", "secrets"), ("list", "configmaps")}
    release, why = look_up_release(api, "team/app", CRDS)
    assert release is None and "grant list on secrets in namespace team" in why and "configmaps" in why
    api.forbid = {("list", "configmaps")}
    why = look_up_release(api, "team/app", CRDS)[1]
    assert "listing ConfigMaps there is forbidden; grant list on configmaps in namespace team" in why
    api.forbid = set()
    why = look_up_release(api, "team/app", CRDS)[1]
    assert "no release Secret or ConfigMap found in namespace team" in why and "HELM_DRIVER=sql" in why
    scan = look_up_releases(api, HelmScan(checked=True, note=None), ["team/app", "?/x"], CRDS)
    assert sorted(scan.not_checked) == ["?/x", "team/app"] and scan.releases == []


def test_a_release_read_in_its_namespace_that_declares_nothing_removed_is_checked():
    api = FakeApi()
    api.add("app", "team", 1, "deployed", manifest(doc("a", version="v1")))
    api.forbid.add(("list-all", "secrets"))
    scan = look_up_releases(api, scan_helm_releases(api, CRDS), ["team/app"], CRDS)
    assert scan.not_checked == {} and scan.releases == [] and scan.scanned == 1


def crontab_crd(*versions):
    crd = make_crd(CRD, versions=[(v, True, v == "v1") for v in versions], stored=("v1",))
    crd["spec"]["names"]["kind"] = "CronTab"
    return crd


def test_move_reads_the_named_releases_in_their_namespace_and_one_it_cannot_read_holds_the_crd_back():
    api = FakeApi()
    api.crds[CRD] = crontab_crd("v1alpha1", "v1")
    api.add("app", "team", 1, "deployed", manifest(doc("a")), driver="ConfigMap")
    api.forbid |= {("list-all", "secrets"), ("list-all", "configmaps")}
    moves = move_helm_releases(api, [crontab_crd("v1")], check_mode=False, named=["team/app", "other/gone"])
    assert [(r["release"], r["driver"], r["previous_revision"], r["revision"]) for r in moves.rewritten] == [
        ("team/app", "ConfigMap", 1, 2)]
    assert api.release("team", "app", 2, "ConfigMap")[0]["status"] == "deployed"
    [failed] = moves.failed
    assert (failed["release"], failed["crds"]) == ("other/gone", [CRD])
    assert failed["why"].startswith("not read: no release Secret or ConfigMap found in namespace other")
    [held] = moves.held_back()
    assert (held["crd"], held["removed_versions"]) == (CRD, ["v1alpha1"])
    assert held["clients"] == ["Helm release other/gone not rewritten as a new revision: " + failed["why"]]
    [words] = moves.words()
    assert "A rollback to revision 1 or earlier still declares %s/v1alpha1 and fails" % GROUP in words


def test_move_in_check_mode_writes_nothing_and_a_pending_release_fails():
    api = FakeApi()
    api.crds[CRD] = crontab_crd("v1alpha1", "v1")
    api.add("app", "team", 1, "deployed", manifest(doc("a")))
    api.add("busy", "team", 1, "deployed", manifest(doc("b")))
    api.add("busy", "team", 2, "pending-upgrade", manifest(doc("b")))
    moves = move_helm_releases(api, [crontab_crd("v1")], check_mode=True)
    assert [(r["release"], r["revision"]) for r in moves.rewritten] == [("team/app", 2)]
    assert api.writes() == [] and api.writes(dry_run=True) == []
    assert [f["release"] for f in moves.failed] == ["team/busy"] and "pending-upgrade" in moves.failed[0]["why"]

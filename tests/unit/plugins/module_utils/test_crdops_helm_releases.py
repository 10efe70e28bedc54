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
    ApiError, ConflictError, RefusalError)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.helm_releases import (
    HelmScan, decode_payload, go_json_string, manifest_span, plan_rewrite, rewrite_release, scan_helm_releases)
from tests.unit.crdops_fakes import resp, status

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


def helm_encode(raw, compress=True):
    """Helm's encodeRelease (gzip at BestCompression, base64), then the API's base64 of Secret data."""
    payload = gzip.compress(raw, compresslevel=9, mtime=0) if compress else raw
    return base64.b64encode(base64.b64encode(payload)).decode()


def helm_decode(data):
    return gzip.decompress(base64.b64decode(base64.b64decode(data)))


class FakeApi:
    """Secrets of one apiserver: owner=helm LIST with limit/continue, GET, PUT with the resourceVersion lock."""

    cluster_label = "test-cluster"

    def __init__(self):
        self.secrets = {}  # (namespace, name) -> Secret
        self.calls = []
        self.put_bodies = []
        self.rv = 100
        self.list_answer = None  # an HTTP status the all-namespaces LIST answers instead
        self.expire_continue = False  # the first continue answers 410 with an inconsistent token

    def add(self, name, namespace, revision, state, text, *, raw=None, compress=True, kind=None):
        self.rv += 1
        secret = {
            "apiVersion": "v1", "kind": "Secret", "type": kind or "helm.sh/release.v1",
            "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (name, revision), "namespace": namespace,
                         "resourceVersion": str(self.rv),
                         "labels": {"name": name, "owner": "helm", "status": state, "version": str(revision),
                                    "createdAt": "1796119200"}},
            "data": {"release": helm_encode(raw or release_json(name, namespace, revision, state, text), compress)}}
        self.secrets[(namespace, secret["metadata"]["name"])] = secret
        return secret

    def request(self, method, path, *, query=None, body=None, content_type=None, accept=None):
        q = dict(query or [])
        self.calls.append((method, path, q))
        parts = path.strip("/").split("/")  # api v1 [namespaces ns] secrets [name]
        if path == "/api/v1/secrets":
            return self._list_all(q)
        ns = parts[3]
        if len(parts) == 5:
            items = [s for (n, _name), s in sorted(self.secrets.items()) if n == ns]
            return resp(200, {"items": [{"metadata": s["metadata"]} for s in items]})
        secret = self.secrets.get((ns, parts[5]))
        if secret is None:
            return status(404, 'secrets "%s" not found' % parts[5], "NotFound")
        if method == "GET":
            return resp(200, json.loads(json.dumps(secret)))
        sent = json.loads(body)
        self.put_bodies.append(sent)
        assert method == "PUT" and content_type == "application/json"
        if sent["metadata"]["resourceVersion"] != secret["metadata"]["resourceVersion"]:
            return status(409, "the object has been modified", "Conflict")
        self.rv += 1
        sent["metadata"]["resourceVersion"] = str(self.rv)
        self.secrets[(ns, parts[5])] = sent
        return resp(200, sent)

    def _list_all(self, q):
        if self.list_answer:
            return status(self.list_answer, "secrets is forbidden", "Forbidden")
        assert q["labelSelector"] == "owner=helm"
        items = [s for _key, s in sorted(self.secrets.items())]
        start = int(q.get("continue") or 0)
        if start and self.expire_continue:
            self.expire_continue = False
            return status(410, "continue expired", "Expired", continue_token=str(start))
        end = start + int(q["limit"])
        meta = {"continue": str(end)} if end < len(items) else {}
        return resp(200, {"items": items[start:end], "metadata": meta})

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


def test_a_payload_written_by_helm_v4_decodes_and_is_rewritten_in_its_manifest_only():
    raw = decode_payload(HELM_V4_PAYLOAD)
    start, end, text = manifest_span(raw.decode())
    assert raw.decode()[start:end] == go_json_string(text)  # Go's own escaping of the manifest, reproduced
    assert text.count("apiVersion: %s/v1alpha1\n" % GROUP) == 2 and json.loads(raw)["version"] == 1
    api = FakeApi()
    api.add("app", "team-a", 1, "deployed", "", raw=raw)
    [rel] = scan_helm_releases(api, CRDS).releases
    assert sorted(o.name for o in rel.objects) == ["app-one", "app-two"]
    rewrite_release(api, rel, STORAGE)
    new_raw = helm_decode(api.secrets[("team-a", rel.secret)]["data"]["release"])
    want = text.replace("apiVersion: %s/v1alpha1\n" % GROUP, "apiVersion: %s/v1\n" % GROUP)
    assert new_raw == raw[:start] + go_json(want) + raw[end:]


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


def test_the_rewrite_changes_only_the_apiversion_lines_and_keeps_revision_labels_and_other_bytes():
    api = FakeApi()
    text = manifest(doc("a", extra="  # apiVersion: %s/v1alpha1 in a comment\n" % GROUP),
                    doc("b", version="v1"), doc("c"))
    before = api.add("app", "team", 4, "deployed", text)
    [rel] = scan_helm_releases(api, CRDS).releases
    done = rewrite_release(api, rel, STORAGE)
    after = api.secrets[("team", rel.secret)]
    assert done.objects == [] and done.resource_version == after["metadata"]["resourceVersion"] != rel.resource_version
    assert (done.revision, done.secret) == (4, rel.secret)
    assert after["metadata"]["labels"] == before["metadata"]["labels"] and after["type"] == before["type"]
    old_raw, new_raw = helm_decode(before["data"]["release"]), helm_decode(after["data"]["release"])
    want = text.replace("apiVersion: %s/v1alpha1\n" % GROUP, "apiVersion: %s/v1\n" % GROUP)
    assert json.loads(new_raw)["manifest"] == want and "# apiVersion: %s/v1alpha1 in" % GROUP in want
    assert new_raw == old_raw.replace(go_json(text)[1:-1], go_json(want)[1:-1])  # all else byte for byte
    assert scan_helm_releases(api, CRDS).releases == []


def test_quotes_comments_and_crlf_line_ends_survive_the_rewrite():
    api = FakeApi()
    text = ("---\r\napiVersion: \"%s/v1alpha1\"  # pinned\r\nkind: CronTab\r\nmetadata:\r\n  name: q\r\n" % GROUP)
    api.add("app", "team", 1, "deployed", text)
    [rel] = scan_helm_releases(api, CRDS).releases
    rewrite_release(api, rel, STORAGE)
    new = json.loads(helm_decode(api.secrets[("team", rel.secret)]["data"]["release"]))["manifest"]
    assert new == text.replace("/v1alpha1\"", "/v1\"")


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
    assert api.puts() == []

    [rel] = scan_helm_releases(api, CRDS).releases
    real = api.request

    def racing(method, path, **kw):  # Helm writes the Secret between our read and our PUT
        if method == "PUT":
            api.secrets[("team", rel.secret)]["metadata"]["resourceVersion"] = "1000"
        return real(method, path, **kw)

    api.request = racing
    with pytest.raises(ConflictError, match="run again"):
        rewrite_release(api, rel, STORAGE)
    assert [body["metadata"]["resourceVersion"] for body in api.put_bodies] == ["999"]


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

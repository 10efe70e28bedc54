# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report's words: failures first with a cause in one line and a next step, a line per cluster."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.fleet import crd_upgrade_report_merge, crd_upgrade_result_lines
from ansible_collections.crdops.migration.plugins.module_utils._crdops.report import fleet_report


def result(name, status, **kw):
    out = {"cluster": name, "status": status, "failed_phase": None, "error": None, "duration_s": 2.0, "crds": [],
           "totals": {"objects": 0, "rewritten": 0, "unchanged": 0, "failed": 0}}
    out.update(kw)
    return out


# as a real run recorded them (crd_upgrade_result.error, after the role's rescue took its wrappers off)
UNREACHABLE = ("[cluster far-ctx (current context of /tmp/run/unreach.yaml)] GET "
               "/apis/apiextensions.k8s.io/v1/customresourcedefinitions: cluster unreachable, no answer within "
               "connect_timeout 10s (8 attempts): NewConnectionError: HTTPSConnection(host='127.0.0.1', port=1): Failed "
               "to establish a new connection: [Errno 111] Connection refused")
UNRESOLVED = ("[cluster prod-2] GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions: cluster unreachable, no "
              "answer within connect_timeout 10s (3 attempts): NameResolutionError: <urllib3.connection.HTTPSConnection "
              "object at 0x7f>: Failed to resolve 'api.prod-2.invalid' ([Errno -2] Name or service not known)")


def test_a_cluster_that_cannot_be_reached_says_why_in_one_short_line_with_the_file_in_the_details():
    cases = {
        UNREACHABLE: "apiserver 127.0.0.1:1 unreachable: Connection refused (no answer within connect_timeout 10s)",
        UNRESOLVED: "apiserver api.prod-2.invalid unreachable: Name or service not known (no answer within "
                    "connect_timeout 10s)",
        "[cluster kubeconfig /srv/awx/tmp/kc.yaml (current context)] cannot load kubeconfig: no such file":
            "cannot load kubeconfig: no such file",
        "[cluster prod-9] cannot load kubeconfig /home/ops/.kube/fleet.yaml: it has no context 'prod-9' (kubectl "
        "config get-contexts lists them)":
            "cannot load kubeconfig: it has no context 'prod-9' (kubectl config get-contexts lists them)",
        # the CRD a module names stays; the cluster is the report's row
    }
    for error, line in cases.items():
        report = fleet_report.build([result("c1", "failed", failed_phase="init", error=error)],
                                    {"title": "t", "generated": "g"})
        (failure,) = report["failures"]
        assert failure["cause"] == line
        assert failure["next_step"]["see"] == "docs/troubleshooting.md: Connection and authentication"
        assert report["clusters"][0]["line"] == "phase init: " + line
        assert report["clusters"][0]["error"] == error   # the details keep the whole error, the file included
    # the CRD a module names stays; the cluster is the report's row
    assert fleet_report.cause("[cluster prod-9, CRD w.x.io] GET CRD failed: permission denied (HTTP 403)") == (
        "[CRD w.x.io] GET CRD failed: permission denied (HTTP 403)")
    assert fleet_report.next_step("init", UNREACHABLE)["step"].startswith("check the server URL of this host's context")
    assert fleet_report.next_step("init", "cannot load kubeconfig: no such file")["step"].startswith(
        "fix this host's kubeconfig or context")


def test_failures_first_with_cause_and_next_step_from_troubleshooting():
    error = ("cluster c2: phase preflight failed: admission would reject the re-store on cluster c2: widgets.x.io "
             "ns/w-1: HTTP 400 admission: denied the request: change freeze\n(more)")
    report = fleet_report.build([result("c1", "ok"), result("c2", "failed", failed_phase="preflight", error=error),
                                 result("c3", "not run")], {"title": "t", "generated": "g", "run": {"id": "r"}})
    (failure,) = report["failures"]
    assert failure["cause"] == ("admission would reject the re-store on cluster c2: widgets.x.io ns/w-1: HTTP 400 "
                                "admission: denied the request: change freeze (more)")
    assert failure["next_step"]["see"] == "docs/troubleshooting.md: Check-mode preflight (`predicted_rejections`)"
    assert report["run"]["outcome"] == "failed: 1 of 3 clusters failed"
    assert report["headline"] == ("3 clusters: 1 done, 0 release N+1 held back, 1 failed, 1 waiting; 0 objects, "
                                  "0 re-stored, 0 failed")
    # "release" is not the pass Lease
    assert fleet_report.next_step("upgrade", "release N+1 not in effect on cluster c: w still has v1")["step"].startswith(
        "stop whatever re-applies the old CRD")
    unknown = fleet_report.next_step("trim", "something new")
    assert unknown["see"] == "docs/troubleshooting.md: Role `crd_upgrade` (by task file), trim"


def test_every_next_step_names_a_section_of_troubleshooting():
    import pathlib
    doc = (pathlib.Path(__file__).resolve().parents[4] / "docs" / "troubleshooting.md").read_text()
    headings = {line.lstrip("#").strip() for line in doc.splitlines() if line.startswith("#")}
    sections = {section for _pattern, _step, section in fleet_report._STEPS}
    missing = [s for s in sections if not any(h.startswith(s) for h in headings)]
    assert missing == [], missing


def test_outcome_of_a_run_without_result_and_of_an_incomplete_run():
    assert fleet_report.build([], {})["run"]["outcome"].startswith("no result")
    assert fleet_report.build([result("a", "ok"), result("b", "not run")], {})["run"]["outcome"] == (
        "incomplete: 1 of 2 clusters did not run")


def test_console_end_lines_one_per_crd_that_changed():
    changed = {"name": "w.x.io", "storage_before": "v1", "storage_version": "v2", "stored_before": ["v1"],
               "stored_after": ["v2"], "listed": 4, "rewritten": 4, "unchanged": 0, "gone": 0, "failed": 0,
               "upgraded": True, "removed_versions": ["v1"],
               "etcd": {"key_count": 4, "at_want": 4, "want": "x.io/v2", "ok": True}}
    same = {"name": "g.x.io", "storage_before": "v2", "storage_version": "v2", "stored_before": ["v2"],
            "stored_after": ["v2"], "rewritten": 0}
    lines = crd_upgrade_result_lines(result("c1", "ok", crds=[changed, same], totals={"objects": 4, "rewritten": 4}))
    assert lines == ["c1: ok - 1 CRD(s) changed, 4 objects re-stored of 4, 2.0 s",
                     "  w.x.io: storage v1 -> v2; re-stored 4 of 4 (unchanged 0, gone 0, failed 0); storedVersions "
                     "v1 -> v2; removed v1; etcd 4 of 4 keys at x.io/v2"]


def test_what_other_clients_saw_ends_the_crds_line_and_is_worded_for_the_templates():
    others = {"target": "default/crdops-pass-w.x.io", "budget": 2.0, "baseline": "ok", "baseline_carried": False,
              "idle": {"p50_ms": 4.0, "p99_ms": 9.5, "samples": 31}, "during": {"p50_ms": 6.1, "p99_ms": 15.2,
                                                                                "samples": 400},
              "multiple": 1.6, "held": True, "errors": 0, "objects_per_s": 120.5}
    crd = {"name": "w.x.io", "listed": 4, "rewritten": 4, "unchanged": 0, "gone": 0, "failed": 0,
           "others_saw": others}
    (line,) = crd_upgrade_result_lines(result("c1", "ok", crds=[crd]))[1:]
    assert line == ("  w.x.io: re-stored 4 of 4 (unchanged 0, gone 0, failed 0); other clients' GET p99 9.5 -> 15.2 ms "
                    "(x1.60, budget x2.0 held)")
    enriched = fleet_report.enrich(result("c1", "ok", crds=[crd, {"name": "g.x.io"}]))
    assert enriched["crds"][0]["others_saw_words"] == line.split("; ")[-1]
    assert enriched["crds"][1]["others_saw_words"] == ""  # a report from an older release has none


def test_merge_keeps_the_newest_report_of_each_slice():
    old = {"slice": "1", "title": "t", "clusters": [result("a", "failed", error="x")]}
    new = {"slice": "1", "title": "t", "clusters": [result("a", "ok")]}
    other = {"slice": "2", "title": "t", "clusters": [result("b", "ok")]}
    merged = crd_upgrade_report_merge([old, other, new], generated="g")
    assert [c["status"] for c in merged["clusters"]] == ["ok", "ok"] and merged["slices"] == ["1", "2"]


def test_clients_seen_writing_at_a_removed_version_block_its_removal_in_the_plan():
    plan = {"steps": ["storage v1 -> v2"], "blocked": [], "to_restore": 0, "estimate_s": 0.0}
    client = {"cluster": "c1", "crd": "w.x.io", "seen_in": "managedFields", "manager": "argocd", "operation": "Apply",
              "version": "v1", "objects": 12, "last_write": "2026-12-01T15:04:05Z"}
    traffic = {"cluster": "c1", "crd": "w.x.io", "seen_in": "metrics", "version": "v1", "apiserver": "https://a:6443",
               "requests": 40}
    c = fleet_report.enrich(result("c1", "planned", crds=[{"name": "w.x.io", "plan": plan}, {"name": "g.x.io"}],
                                   broken_clients=[client, traffic]))
    w, g = c["crds"]
    assert w["writers"] == ["seen using a removed version: argocd (Apply) wrote at v1 on 12 objects, last write "
                            "2026-12-01T15:04:05Z",
                            "seen using a removed version: 40 requests at v1 on apiserver https://a:6443"]
    assert g["writers"] == []
    assert w["plan"]["blocked"][0] == {"version": "v1", "why": "a client still uses it: argocd (Apply) wrote at v1 "
                                                               "on 12 objects, last write 2026-12-01T15:04:05Z"}
    assert "blocked removals: w.x.io v1: a client still uses it" in c["line"]
    assert plan["blocked"] == []   # the cluster's own result is left as it was


def test_a_cluster_held_back_is_its_own_state_naming_the_client_its_source_and_the_fix():
    applier = {"cluster": "c1", "crd": "w.x.io", "seen_in": "managedFields", "manager": "kustomize-controller",
               "operation": "Apply", "kind": "declares", "version": "v1", "objects": 30, "last_write": None,
               "sources": ["Flux Kustomization flux-system/apps"]}
    held = [{"crd": "w.x.io", "removed_versions": ["v1"], "clients": ["applier kustomize-controller ..."],
             "fix": "move these sources to v2 (its manifests' apiVersion), let it apply, then run again"}]
    c = result("c1", "held back", crds=[{"name": "w.x.io", "trimmed": True}], broken_clients=[applier],
               held_back=held)
    report = fleet_report.build([c, result("c2", "ok")], {"title": "t"})
    (w,) = report["clusters"][0]["crds"]
    assert w["writers"] == ["holds release N+1 back: kustomize-controller (Apply) declares v1 on 30 objects, last write "
                            "unknown; source Flux Kustomization flux-system/apps"]
    assert w["held_back_fix"] == "move these sources to v2 (its manifests' apiVersion), let it apply, then run again"
    assert "release N+1 held back for w.x.io" in report["clusters"][0]["line"]
    assert (report["summary"]["held_back"], report["summary"]["ok"], report["summary"]["failed"]) == (1, 1, 0)
    assert report["run"]["outcome"].startswith("complete, release N+1 held back on 1 of 2 clusters")


def test_readers_not_checked_where_a_version_was_removed_is_said_in_the_line():
    removed = [{"name": "w.x.io", "upgraded": True, "removed_versions": ["v1"]}]
    unseen = fleet_report.enrich(result("c1", "ok", crds=removed, readers_checked=False))
    assert unseen["line"].endswith("; readers of removed versions not checked")
    seen = fleet_report.enrich(result("c1", "ok", crds=removed, readers_checked=True))
    nothing_removed = fleet_report.enrich(result("c1", "ok", crds=[{"name": "w.x.io"}], readers_checked=False))
    assert "readers" not in seen["line"] and "readers" not in nothing_removed["line"]


def test_helm_releases_not_checked_where_a_version_was_removed_are_said_in_the_line_and_the_pages():
    removed = [{"name": "w.x.io", "upgraded": True, "removed_versions": ["v1"]}]
    words = "Helm releases: 0 read; not checked: listing Secrets is forbidden (HTTP 403); grant list on secrets"
    unseen = fleet_report.enrich(result("c1", "ok", crds=removed, readers_checked=True, helm_releases=words))
    assert unseen["line"].endswith("; " + words)
    read = fleet_report.enrich(result("c1", "ok", crds=removed, readers_checked=True,
                                      helm_releases="Helm releases: 3 read"))
    assert "Helm" not in read["line"]
    report = fleet_report.build([result("c1", "ok", crds=removed, readers_checked=True, helm_releases=words)],
                                {"title": "t"})
    for page in ("report.md.j2", "report.html.j2"):
        assert "listing Secrets is forbidden" in _render(page, report), page


def _render(template, report):
    """A report template as the role's `template` task renders it (jinja2 with the Ansible filter it uses)."""
    import pathlib

    import jinja2
    folder = pathlib.Path(__file__).resolve().parents[4] / "roles" / "crd_upgrade" / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), trim_blocks=True)
    env.filters["dict2items"] = lambda d: [{"key": k, "value": v} for k, v in d.items()]
    return env.get_template(template).render(_crd_upgrade_report=report)


CONVERSION = {"path": "spec.conversion", "pointer": "/spec/conversion", "owners": ["kubectl-create (Update)"],
              "injected": ["spec.conversion.webhook.clientConfig.caBundle"], "declared_by": "release N",
              "not_declared_by": "release N+1"}
CONVERSION_WORDS = ("spec.conversion (declared by release N, not by release N+1; owned by kubectl-create (Update); "
                    "with spec.conversion.webhook.clientConfig.caBundle, which no release declared)")


def test_fields_removed_from_the_live_crds_in_every_format_of_the_details():
    done = result("c1", "ok", crds=[{"name": "certificates.cert-manager.io", "upgraded": True,
                                     "crd_fields_removed": [CONVERSION]},
                                    {"name": "issuers.cert-manager.io", "crd_fields_removed": ["spec.conversion"]},
                                    {"name": "g.x.io"}])
    report = fleet_report.build([done], {"title": "t", "generated": "g", "run": {"id": "r"}})
    cert, issuer, g = report["clusters"][0]["crds"]
    # JSON: each field with its releases, owners, injected fields and the words the other formats print
    assert cert["crd_fields_removed"] == [{
        "path": "spec.conversion", "declared_by": "release N", "not_declared_by": "release N+1",
        "owners": ["kubectl-create (Update)"], "injected": ["spec.conversion.webhook.clientConfig.caBundle"],
        "words": CONVERSION_WORDS}]
    assert issuer["crd_fields_removed"][0]["words"] == "spec.conversion"   # a report of an older release: the path
    assert g["crd_fields_removed"] == []
    md = _render("report.md.j2", report)
    assert "Fields removed from the live CRDs (following the releases):" in md
    assert f"- certificates.cert-manager.io: removed {CONVERSION_WORDS}\n" in md
    assert "- issuers.cert-manager.io: removed spec.conversion\n" in md and "g.x.io: removed" not in md
    html = _render("report.html.j2", report)
    assert "<li>certificates.cert-manager.io: removed spec.conversion (declared by release N, not by release N+1; " \
           "owned by kubectl-create (Update); with spec.conversion.webhook.clientConfig.caBundle, which no release " \
           "declared)</li>" in html
    assert html.count("<li>") == 2 and html.count('<ul class="fields">') == 1 and html.count("</ul>") == 1
    # the console's end line of the cluster names them too; a CRD whose only change is a removed field changed
    assert crd_upgrade_result_lines(done)[1] == "  certificates.cert-manager.io: fields removed from the CRD: spec.conversion"
    assert fleet_report.crd_changed({"name": "x", "crd_fields_removed": [CONVERSION]})


def test_a_plan_lists_the_fields_following_the_releases_would_remove():
    plan = {"steps": ["would remove " + CONVERSION_WORDS], "action": "would remove " + CONVERSION_WORDS,
            "blocked": [], "to_restore": 0, "estimate_s": 0.0, "removes_fields": [CONVERSION]}
    planned = result("c1", "planned", check_mode=True, crds=[{"name": "certificates.cert-manager.io", "plan": plan}])
    report = fleet_report.build([planned], {"title": "t", "generated": "g", "run": {"id": "r"}})
    (crd,) = report["clusters"][0]["crds"]
    assert crd["plan"]["removes_fields"][0]["words"] == CONVERSION_WORDS and crd["crd_fields_removed"] == []
    assert report["clusters"][0]["line"].startswith("1 CRD(s) change (certificates.cert-manager.io)")
    md = _render("report.md.j2", report)
    assert "Fields following the releases would remove from the live CRDs:" in md
    assert f"- certificates.cert-manager.io: would remove {CONVERSION_WORDS}\n" in md
    html = _render("report.html.j2", report)
    assert f"<li>certificates.cert-manager.io: would remove {CONVERSION_WORDS}</li>" in html


def test_a_cluster_with_nothing_to_do_says_so_and_what_was_checked():
    why = "1 CRD(s) at their storage version alone with a proven record, release N+1 in effect, 5 objects read"
    crd = {"name": "w.example.com", "objects": 5, "rewritten": None, "stored_before": ["v1beta1"],
           "stored_after": ["v1beta1"]}
    done = {"cluster": "c1", "status": "ok", "nothing_to_do": why, "crds": [crd], "duration_s": 1.0}
    assert crd_upgrade_result_lines(done) == ["c1: ok - nothing to do: " + why]
    assert fleet_report.build([done], {})["clusters"][0]["line"] == "nothing to do: " + why
    # a cluster that had something to do keeps its usual line
    assert "nothing to do" not in crd_upgrade_result_lines(dict(done, nothing_to_do=None))[0]


APPS_SAYS = "GitRepository flux-system/repo, path ./apps, revision main@sha1:abc"


def _client(cluster, ref, objects, held=True, says=None):
    """A writer record with the source its controller reports (crd_client_check check=writers)."""
    return {"cluster": cluster, "crd": "w.x.io", "seen_in": "managedFields", "manager": "kustomize-controller",
            "operation": "Apply", "kind": "declares", "version": "v1", "objects": objects, "last_write": None,
            "examples": ["apps/w-0"], "sources": ["Flux Kustomization " + ref], "held": held, "stays": "v2",
            "source": {"what": "Flux Kustomization", "ref": ref,
                       "says": says if ref != "flux-system/apps" else APPS_SAYS}}


def _held_fleet(status="held back"):
    held = [{"crd": "w.x.io", "removed_versions": ["v1"], "clients": ["..."], "fix": "move these sources"}]
    both = result("c1", status, crds=[{"name": "w.x.io"}], held_back=held,
                  broken_clients=[_client("c1", "flux-system/apps", 30), _client("c1", "flux-system/legacy", 5),
                                  _client("c1", "flux-system/tried", 2, held=False)])
    legacy = result("c2", status, crds=[{"name": "w.x.io"}], held_back=held,
                    broken_clients=[_client("c2", "flux-system/legacy", 5)])
    return [both, legacy, result("c3", "ok" if status == "held back" else status)]


def test_the_fleet_report_has_one_table_of_what_holds_release_n_plus_1_back_in_json_markdown_and_html():
    report = fleet_report.build(_held_fleet(), {"title": "t", "generated": "g", "run": {"id": "r"}})
    table = report["holders"]
    # JSON: one row per source, the one that alone frees a cluster (legacy frees c2) first; accepted apart
    assert [(r["source"], r["clusters"], r["last_holder_on"]) for r in table["rows"]] == [
        ("Flux Kustomization flux-system/legacy", ["c1", "c2"], ["c2"]),
        ("Flux Kustomization flux-system/apps", ["c1"], [])]
    assert [r["source"] for r in table["accepted"]] == ["Flux Kustomization flux-system/tried"]
    legacy = table["rows"][0]
    assert legacy["cells"][:6] == ["1", "Flux Kustomization flux-system/legacy", "not asked",
                                   "2: c1, c2; last holder on 1: c2", "w.x.io v1 (stays v2)",
                                   "10 (e.g. c1: apps/w-0, c2: apps/w-0)"]
    md = _render("report.md.j2", report)
    assert "## What holds release N+1 back (2)\n" in md
    assert "| # | source | what its controller says | clusters | CRDs and versions | objects | fix |\n" \
           "|---|---|---|---|---|---|---|\n| 1 | Flux Kustomization flux-system/legacy | not asked | 2: c1, c2; " in md
    assert "| 2 | Flux Kustomization flux-system/apps | %s | 1: c1 |" % APPS_SAYS in md
    assert md.index("## What holds release N+1 back") < md.index("## Clusters (3)")
    assert ("- Flux Kustomization flux-system/tried on c1: w.x.io v1 (stays v2) (accepted: breaks when release N+1 "
            "is applied)\n") in md
    html = _render("report.html.j2", report)
    assert '<h2 id="holders">What holds release N+1 back (2)</h2>' in html
    assert "<th>#</th><th>source</th><th>what its controller says</th><th>clusters</th><th>CRDs and versions</th>" \
           "<th>objects</th><th>fix</th>" in html
    assert html.count('<tr class="holder"><td>') == 2
    assert "<td>2</td><td>Flux Kustomization flux-system/apps</td><td>%s</td>" % APPS_SAYS in html
    assert "<li>Flux Kustomization flux-system/tried on c1: w.x.io v1 (stays v2) (accepted: " in html


def test_the_check_mode_plan_and_the_console_show_the_same_table():
    report = fleet_report.build(_held_fleet("planned"), {"title": "t", "generated": "g", "check_mode": True})
    refs = [r["ref"] for r in report["holders"]["rows"]]
    assert report["check_mode"] and refs == ["flux-system/legacy", "flux-system/apps"]
    assert "## What holds release N+1 back (2)" in _render("report.md.j2", report)
    summary = _render_summary(report)
    assert ("HOLDS release N+1 BACK #1 Flux Kustomization flux-system/legacy on c1, c2 (last holder on 1): w.x.io v1 "
            "(stays v2); fix: change apiVersion to v2 in the path its source says, and let it reconcile") in summary
    assert "HOLDS release N+1 BACK #2 Flux Kustomization flux-system/apps on c1: " in summary


def test_nothing_held_back_no_table_and_an_older_report_without_one_renders():
    report = fleet_report.build([result("c1", "ok")], {"title": "t", "generated": "g"})
    assert report["holders"]["rows"] == [] and report["holders"]["accepted"] == []
    older = dict(report)
    del older["holders"]   # a report of an older release, read back by a merge or a test
    for rendered in (_render("report.md.j2", report), _render("report.html.j2", report),
                     _render("report.md.j2", older), _render("report.html.j2", older), _render_summary(older)):
        assert "What holds release N+1 back" not in rendered and "HOLDS" not in rendered


def _render_summary(report):
    import os
    import pathlib

    import jinja2
    folder = pathlib.Path(__file__).resolve().parents[4] / "roles" / "crd_upgrade" / "templates"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), trim_blocks=True)
    env.filters["dirname"] = os.path.dirname
    return env.get_template("summary.txt.j2").render(_crd_upgrade_report=report, _crd_upgrade_report_path="/r/x",
                                                     _crd_upgrade_report_file="fleet-report",
                                                     crd_upgrade_report_dir="/r")

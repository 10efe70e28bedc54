"""fleet_upgrade.yml run as AWX runs it: through ansible-runner, with survey answers and credential injections.

ansible-runner is not a requirement of the collection (AWX and ansible-navigator bring it); these tests are
skipped without it.
"""
from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.controlplane.cluster import admin_kube
from tests.controlplane.etcd_reader import scan_storage
from tests.integration import awx, reliability
from tests.integration.seed import crd_at, seed_old_objects
from tests.integration.test_security import service_account_token, shipped_rules

pytest.importorskip("ansible_runner")

REPO = Path(__file__).resolve().parents[2]
RECORD_ANNOTATION = "migration.crdops.io/storage-migration"   # plugins/module_utils/_crdops/record/record.py


def releases(tmp_path: Path, s, name: str = "rel") -> dict:
    """Release N (flips storage to v1beta1) and release N+1 (drops v1alpha1) as manifest files; host vars."""
    release_n, release_next = tmp_path / f"{name}-n", tmp_path / f"{name}-next"
    release_n.mkdir()
    release_next.mkdir()
    (release_n / "crd.yaml").write_text(yaml.safe_dump(crd_at(s, "v1beta1")))
    (release_next / "crd.yaml").write_text(yaml.safe_dump(crd_at(s, "v1beta1", served=("v1beta1",))))
    return {"crd_upgrade_release_manifests": [str(release_n / "*.yaml")],
            "crd_upgrade_target_manifests": [str(release_next / "*.yaml")],
            "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}


def project_releases(project: Path, s, name: str) -> dict:
    """Release N and N+1 kept in the AWX project (docs/awx.md, section 0); host vars with relative globs,
    which resolve against the project folder, the job's working directory."""
    for release, doc in ((f"{name}-n", crd_at(s, "v1beta1")), (f"{name}-next", crd_at(s, "v1beta1", served=("v1beta1",)))):
        (project / "releases" / release / "crds").mkdir(parents=True)
        (project / "releases" / release / "crds" / "crds.yaml").write_text(yaml.safe_dump(doc))
    return {"crd_upgrade_release_manifests": [f"releases/{name}-n/crds/*.yaml"],
            "crd_upgrade_target_manifests": [f"releases/{name}-next/crds/*.yaml"], "crd_upgrade_settle_seconds": 1,
            # short windows: each wave would otherwise wait out the default drain (65 s) and writers window (30 s)
            "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}


def host_vars(**extra) -> dict:
    return dict(ansible_connection="local", ansible_python_interpreter=sys.executable, **extra)


def documented_survey() -> dict[str, str]:
    """The survey table of docs/awx.md: variable -> answer type."""
    text = (REPO / "docs" / "awx.md").read_text()
    section = text.split("Survey (answers become extra vars", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`(crd_upgrade_\w+)`", cells[1]) if len(cells) > 2 else None
        if match:
            rows[match.group(1)] = cells[2]
    return rows


# Answers as AWX puts them in env/extravars: text and multiple choice answers are strings, integer answers ints.
SURVEY_ANSWERS = {
    "crd_upgrade_waves": '[1, "10%", "100%"]',
    "crd_upgrade_max_fail_percentage": 0,
    "crd_upgrade_trim": "true",
    "crd_upgrade_upgrade": "true",
    "crd_upgrade_workers": 4,
    "crd_upgrade_pace": "gentle",
}


def test_the_documented_survey_names_variables_the_playbook_reads():
    survey = documented_survey()
    assert set(survey) == set(SURVEY_ANSWERS) | {"crd_upgrade_crd_names"}, survey
    spec = yaml.safe_load((REPO / "roles" / "crd_upgrade" / "meta" / "argument_specs.yml").read_text())
    known = set(spec["argument_specs"]["main"]["options"])
    playbook = (REPO / "playbooks" / "fleet_upgrade.yml").read_text()
    for variable in survey:
        assert variable in known or f"{variable} |" in playbook, f"docs/awx.md survey names {variable}: nobody reads it"


def test_bearer_token_credential_and_survey_one_cluster(cluster, kube, group, tmp_path, monkeypatch):
    awx.clean_process_env(monkeypatch)
    s = seed_old_objects(kube, group, 60, flip=False)
    token = service_account_token(kube, f"awx-{group.split('.')[0]}", shipped_rules(group))
    # the built-in bearer-token credential points every host at one server: a one-cluster inventory
    inventory = {"all": {"children": {"clusters": {"hosts": {"prod-eu-1": host_vars(**releases(tmp_path, s))}}}}}
    extravars = dict(SURVEY_ANSWERS, crd_upgrade_crd_names=s.crd_name)   # a text answer: one string
    pdd = awx.PrivateDataDir(tmp_path / "pdd", inventory, extravars)
    # what the "OpenShift or Kubernetes API Bearer Token" credential injects (awx-plugins, injectors.py
    # kubernetes_bearer_token): host, token, VERIFY_SSL as a string, the CA written to a private file
    pdd.envvars.update(K8S_AUTH_HOST=cluster.server, K8S_AUTH_API_KEY=token, K8S_AUTH_VERIFY_SSL="True",
                       K8S_AUTH_SSL_CA_CERT=pdd.credential_file(cluster.pki.ca_cert.read_text()))

    r = awx.run(pdd, "fleet_upgrade.yml")
    out = awx.stdout(r)
    assert r.status == "successful" and r.rc == 0, out[-5000:]

    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): 60}
    crd = kube.get_crd(s.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    assert crd["status"]["storedVersions"] == ["v1beta1"]

    stats = awx.stats_artifacts(r)
    assert stats["crd_upgrade_summary"] == {"clusters": 1, "ok": 1, "held_back": 0, "planned": 0, "failed": 0, "not_run": 0,
                                            "objects": 60, "rewritten": 60, "failed_objects": 0, "nothing_to_do": 0,
                                            "to_restore": 0}, stats
    assert stats["crd_upgrade_failed_clusters"] == [] and stats["crd_upgrade_not_run_clusters"] == []
    # the report lands in the job's working directory (AWX: the project dir), not in the collection
    report_dir = pdd.root / "project" / "crdops-report"
    run_dir = (report_dir / "latest").resolve()   # this run's folder
    report = json.loads((run_dir / "fleet-report.json").read_text())
    assert [c["cluster"] for c in report["clusters"]] == ["prod-eu-1"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", report["generated"]), report["generated"]
    assert f"report: {run_dir}/fleet-report.md (.json, .html); latest: {report_dir}/latest - crd_upgrade_report_dir " \
           "./crdops-report resolved against the working directory of the run" in out, out[-3000:]
    # every artifact AWX reads back (events, stdout, status, rc); `command` is ansible-runner's record of the
    # environment it was given, the credential's own input like env/envvars, and AWX never shows it
    artifacts = "".join(p.read_text(errors="replace") for p in (pdd.root / "artifacts").rglob("*")
                        if p.is_file() and p.name != "command")
    assert token not in out and token not in artifacts and token not in json.dumps(report)


def test_custom_kubeconfig_credential_two_clusters_waves_as_text(fleet3, tmp_path, monkeypatch):
    awx.clean_process_env(monkeypatch)
    clusters = fleet3.clusters[:2]
    seeds = [seed_old_objects(admin_kube(c), f"kc{i}.crdops.test", 30 + i, flip=False) for i, c in enumerate(clusters)]
    project = tmp_path / "pdd" / "project"
    hosts = {c.name: host_vars(context=c.context, crd_upgrade_crd_names=[s.crd_name],
                               **project_releases(project, s, c.name))
             for c, s in zip(clusters, seeds)}
    inventory = {"all": {"children": {"clusters": {"hosts": hosts}}}}
    extravars = {"crd_upgrade_waves": "1, 100%", "crd_upgrade_max_fail_percentage": "0",
                 "crd_upgrade_upgrade": "false"}
    pdd = awx.PrivateDataDir(tmp_path / "pdd", inventory, extravars)
    # a custom credential type whose injector writes the kubeconfig to a file and sets K8S_AUTH_KUBECONFIG
    pdd.envvars["K8S_AUTH_KUBECONFIG"] = pdd.credential_file(fleet3.kubeconfig.read_text())

    r = awx.run(pdd, "fleet_upgrade.yml")
    out = awx.stdout(r)
    assert r.status == "successful", out[-5000:]
    # two waves: [cluster-a] then [cluster-b]
    starts = [e["event_data"].get("host") for e in r.events
              if e.get("event") == "runner_on_start" and e["event_data"].get("task") == "Upgrade this cluster"]
    assert starts == ["cluster-a", "cluster-b"], starts
    for c, s in zip(clusters, seeds):
        assert scan_storage(c.etcd_url, s.group, s.plural).counts == {s.new(): s_count(s, seeds)}
    summary = awx.stats_artifacts(r)["crd_upgrade_summary"]
    assert (summary["clusters"], summary["ok"], summary["rewritten"]) == (2, 2, 61), summary
    # the project's playbook imported the collection's; release N, kept in the project, was applied
    for c, s in zip(clusters, seeds):
        crd = admin_kube(c).get_crd(s.crd_name)
        assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == ["v1beta1"]


def s_count(s, seeds) -> int:
    return 30 + seeds.index(s)


def test_cancel_through_ansible_runner_stops_the_writes(cluster, kube, group, tmp_path, monkeypatch):
    """The cancel reaches the re-store, which runs in ansible-playbook's worker (the action plugin of
    crd_storage_migrate, not an async job in a session of its own): the writes stop and stay stopped."""
    awx.clean_process_env(monkeypatch)
    # the writes must stop within `settle` seconds of the cancel (the re-store checks its stop flag between writes)
    total, qps, settle = 1500, 25, 8
    s = seed_old_objects(kube, group, total)
    inventory = {"all": {"children": {"clusters": {"hosts": {"slow": host_vars(
        crd_upgrade_auth={"kubeconfig": str(cluster.kubeconfig), "context": cluster.contexts()[0]},
        crd_upgrade_crd_names=[s.crd_name], crd_upgrade_release_manifests=[], crd_upgrade_target_manifests=[],
        crd_upgrade_max_qps=qps, crd_upgrade_workers=2, crd_upgrade_progress_interval=1)}}}}}
    pdd = awx.PrivateDataDir(tmp_path / "pdd", inventory, {"crd_upgrade_waves": "1"})

    def cancel() -> bool:   # AWX's worker asks this between events; the cancel button makes it True
        return scan_storage(cluster.etcd_url, group, s.plural).counts.get(s.new(), 0) >= 50

    r = awx.run(pdd, "fleet_upgrade.yml", cancel_callback=cancel)
    canceled_at = time.monotonic()
    assert r.status == "canceled", (r.status, awx.stdout(r)[-3000:])
    # within seconds (plus one write's time) the writes stop, and stay stopped
    time.sleep(settle + 4)
    stopped = scan_storage(cluster.etcd_url, group, s.plural).counts.get(s.new(), 0)
    time.sleep(6)
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts.get(s.new(), 0) == stopped, "objects were still rewritten after the cancel"
    assert 50 <= stopped < total - qps * 10 and final.total == total, (stopped, time.monotonic() - canceled_at)
    # an interrupted pass leaves no migration record: nothing downstream (trim, N+1) takes it as done
    assert RECORD_ANNOTATION not in kube.get_crd(s.crd_name)["metadata"].get("annotations", {})
    reliability.record("AWX cancel (ansible-runner cancel_callback) during the background re-store",
                       f"job canceled at >= 50 of {total} objects; the re-store stopped "
                       f"at {stopped}; no write in the 6 s after", total, final.total, False)


def test_three_slices_in_parallel_then_one_merged_report(fleet3, tmp_path, monkeypatch):
    """AWX job slicing = one ansible-playbook run per part of the inventory (--limit partitions here)."""
    awx.clean_process_env(monkeypatch)
    seeds = [seed_old_objects(admin_kube(c), f"sl{i}.crdops.test", 20 + i, flip=False)
             for i, c in enumerate(fleet3.clusters)]
    hosts = {c.name: host_vars(context=c.context, crd_upgrade_crd_names=[s.crd_name], **releases(tmp_path, s, c.name))
             for c, s in zip(fleet3.clusters, seeds)}
    inventory = {"all": {"children": {"clusters": {"hosts": hosts}}}}
    kubeconfig = fleet3.kubeconfig.read_text()
    shared = tmp_path / "shared-reports"
    runs, threads = {}, []
    for n, c in enumerate(fleet3.clusters, start=1):
        pdd = awx.PrivateDataDir(tmp_path / f"slice{n}", inventory,
                                 {"crd_upgrade_waves": '[1, "100%"]', "crd_upgrade_upgrade": "false",
                                  "crd_upgrade_report_dir": str(shared), "crd_upgrade_report_slice": str(n)})
        pdd.envvars["K8S_AUTH_KUBECONFIG"] = pdd.credential_file(kubeconfig)

        def go(pdd=pdd, n=n, host=c.name):
            runs[n] = awx.run(pdd, "fleet_upgrade.yml", limit=host)
        threads.append(threading.Thread(target=go))
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert sorted(runs) == [1, 2, 3]
    for r in runs.values():
        assert r.status == "successful", awx.stdout(r)[-3000:]
    for c, s in zip(fleet3.clusters, seeds):
        assert scan_storage(c.etcd_url, s.group, s.plural).counts == {s.new(): 20 + seeds.index(s)}

    # one report per slice, each on its own host only
    for n, c in enumerate(fleet3.clusters, start=1):
        (path,) = shared.glob(f"*-slice-{n}/fleet-report-{n}.json")   # the slice's own run folder
        part = json.loads(path.read_text())
        assert [x["cluster"] for x in part["clusters"]] == [c.name] and part["slice"] == str(n)
    assert not list(shared.glob("*/fleet-report.json"))

    # the report step, from the files
    merge = awx.PrivateDataDir(tmp_path / "merge-files", {"all": {"hosts": {}}}, {"crd_upgrade_report_dir": str(shared)})
    r = awx.run(merge, "fleet_report_merge.yml")
    assert r.status == "successful", awx.stdout(r)[-3000:]
    merged = json.loads((shared / "latest" / "fleet-report.json").read_text())
    assert (shared / "latest").resolve().name.endswith("-merged")
    expect = {"clusters": 3, "ok": 3, "held_back": 0, "planned": 0, "failed": 0, "not_run": 0, "objects": 63,
              "rewritten": 63,
              "failed_objects": 0, "nothing_to_do": 0, "to_restore": 0}
    assert merged["summary"] == expect and merged["slices"] == ["1", "2", "3"]
    assert [c["cluster"] for c in merged["clusters"]] == ["cluster-a", "cluster-b", "cluster-c"]
    assert awx.stats_artifacts(r)["crd_upgrade_summary"] == expect

    # the report step as an AWX workflow node: the slices' artifacts combined with dict.update (AWX
    # WorkflowJob._combined_artifacts) become its extra vars; no file is shared between slices
    combined = {}
    for n in sorted(runs):
        combined.update(awx.stats_artifacts(runs[n]))
    assert sorted(k for k in combined if k.startswith("crd_upgrade_report__")) == [
        "crd_upgrade_report__1", "crd_upgrade_report__2", "crd_upgrade_report__3"]
    node = awx.PrivateDataDir(tmp_path / "merge-stats", {"all": {"hosts": {}}}, combined)
    r = awx.run(node, "fleet_report_merge.yml")
    assert r.status == "successful", awx.stdout(r)[-3000:]
    from_stats = json.loads((node.root / "project" / "crdops-report" / "latest" / "fleet-report.json").read_text())
    assert from_stats["summary"] == expect and from_stats["clusters"] == merged["clusters"]

    from tests.integration.chromium import layout
    rows = layout(shared / "latest" / "fleet-report.html", {"rows": "table.clusters tr td:first-child"})["rows"]
    assert [row["text"] for row in rows] == ["cluster-a", "cluster-b", "cluster-c"], rows

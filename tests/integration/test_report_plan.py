"""The plan and the fleet report an on-call engineer decides from, on a real apiserver + etcd.

Three inventory hosts on the session's cluster: `dirty` (a CRD stored at v1alpha1 that release N flips to
v1beta1 and release N+1 drops v1alpha1 from), `clean` (a CRD with nothing to do) and `broken` (a context the
kubeconfig does not have: a real connection failure). Three runs of the playbooks, in order, share them:
the audit (check mode), an upgrade that fails its argument validation, and the upgrade. Then the report of
100 clusters is built from the three real per-cluster results of the upgrade, replicated with varied names,
counts and outcomes, and merged by the collection's own playbook.
"""
from __future__ import annotations

import copy
import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.integration.chromium import VIEWPORT, layout, screenshot
from tests.integration.modrun import REPO, ansible_playbook
from tests.integration.seed import crd_at, seed_old_objects

OBJECTS = 6
# folders named as the role names its run folders, older than this module's runs; and names it did not make
OLD_RUNS = ["20000101T000000.000Z", "20000101T000001.000Z-check-slice-x"]
FOREIGN = ["notes", "20000101T000000.000Z.bak"]
# CRDOPS_REPORT_SCREENS=<dir>: keep the first screens of the 3- and 100-cluster reports there (PNG, 1280x800)
SCREENS = os.environ.get("CRDOPS_REPORT_SCREENS")


def _inventory(tmp: Path, cluster, dirty, clean) -> Path:
    release_n, release_next = tmp / "release-n", tmp / "release-next"
    release_n.mkdir()
    release_next.mkdir()
    # release N declares a short name that release N+1 drops; the live CRD has it from the installed release
    n = crd_at(dirty, "v1beta1")
    n["spec"]["names"]["shortNames"] = [short_name(dirty)]
    (release_n / "crd.yaml").write_text(yaml.safe_dump(n))
    (release_next / "crd.yaml").write_text(yaml.safe_dump(crd_at(dirty, "v1beta1", served=("v1beta1",))))
    base = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_lease_wait": 5,
            # the plan names the test's own client from managedFields; the request counters add nothing here
            "crd_upgrade_writers_window": 0}
    hosts = {
        "dirty": dict(base, crd_upgrade_release_manifests=[str(release_n / "*.yaml")],
                      crd_upgrade_target_manifests=[str(release_next / "*.yaml")],
                      crd_upgrade_crd_names=[dirty.crd_name], crd_upgrade_etcd_url=cluster.etcd_url),
        "clean": dict(base, crd_upgrade_crd_names=[clean.crd_name]),
        "broken": dict(base, crd_upgrade_context="no-such-context", crd_upgrade_crd_names=[clean.crd_name]),
    }
    path = tmp / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": hosts}}}}))
    return path


def short_name(seeded) -> str:
    return f"w{seeded.group.split('.')[0]}"


def _names_accepted(kube, seeded) -> dict:
    """The CRD once the apiserver's naming controller accepted the short name (its status write comes after)."""
    deadline = time.monotonic() + 30
    while True:
        crd = kube.get_crd(seeded.crd_name)
        if short_name(seeded) in ((crd.get("status") or {}).get("acceptedNames") or {}).get("shortNames", []):
            return crd
        assert time.monotonic() < deadline, crd.get("status")
        time.sleep(0.1)


def _play(inventory: Path, playbook: str, cwd: Path, *extra: str):
    return ansible_playbook("-i", str(inventory), str(REPO / "playbooks" / playbook), *extra, cwd=cwd)


def _report(folder: Path) -> dict:
    return json.loads((folder / "fleet-report.json").read_text())


@pytest.fixture(scope="module")
def fleet(cluster, kube, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report-plan")
    group = f"rp{os.getpid()}.crdops.test"
    dirty = seed_old_objects(kube, group, OBJECTS, flip=False)
    clean = seed_old_objects(kube, group, 2, plural="gadgets", kind="Gadget", flip=False)
    inventory = _inventory(tmp, cluster, dirty, clean)
    # the installed release's short name, set by the tool that installed it (a co-owner the role's apply keeps)
    kube.request("PATCH", kube.crd_path(dirty.crd_name), {"spec": {"names": {"shortNames": [short_name(dirty)]}}},
                 "application/merge-patch+json", query={"fieldManager": "kubectl-create"})
    runs = {"crd_before_audit": _names_accepted(kube, dirty)}
    # run folders of earlier runs, and the user's own entries that crd_upgrade_report_keep must never touch
    root = tmp / "crdops-report"
    for name in OLD_RUNS + FOREIGN:
        (root / name).mkdir(parents=True)
        (root / name / "fleet-report.json").write_text("{}")
    # 1. the plan (check mode); the default report dir, relative: the working directory's crdops-report.
    # Keeping 1 run folder: a check run deletes nothing and says what would go
    runs["audit"] = _play(inventory, "fleet_audit.yml", tmp, "-e", "crd_upgrade_report_keep=1")
    runs["after_audit"] = sorted(p.name for p in root.iterdir())
    runs["audit_folder"] = (tmp / "crdops-report" / "latest").resolve()
    runs["audit_files"] = {p.name: p.read_bytes() for p in runs["audit_folder"].iterdir()}
    runs["crd_after_audit"] = kube.get_crd(dirty.crd_name)
    # 2. a run whose role input fails its check, before any cluster did anything; one whose waves are not valid
    # (ansible-core stops the play before its first task)
    runs["invalid"] = _play(inventory, "fleet_upgrade.yml", tmp, "-e", "crd_upgrade_workers=many",
                            "-e", "crd_upgrade_report_keep=-1")
    runs["invalid_folder"] = (tmp / "crdops-report" / "latest").resolve()
    runs["stopped"] = _play(inventory, "fleet_upgrade.yml", tmp, "-e", "crd_upgrade_waves=abc")
    runs["stopped_folder"] = (tmp / "crdops-report" / "latest").resolve()
    # 3. the upgrade, one wave, the broken cluster may fail without stopping the others
    runs["before_upgrade"] = sorted(p.name for p in root.iterdir())
    runs["upgrade"] = _play(inventory, "fleet_upgrade.yml", tmp, "-e", json.dumps(
        {"crd_upgrade_waves": [3], "crd_upgrade_max_fail_percentage": 100, "crd_upgrade_report_keep": 4}))
    runs["upgrade_folder"] = (tmp / "crdops-report" / "latest").resolve()
    return dict(runs, tmp=tmp, dirty=dirty, clean=clean, etcd_url=cluster.etcd_url, kube=kube,
                kubeconfig=str(cluster.kubeconfig))


def _by_name(report: dict) -> dict:
    return {c["cluster"]: c for c in report["clusters"]}


def test_check_mode_report_is_a_plan_to_approve(fleet):
    proc, dirty = fleet["audit"], fleet["dirty"]
    assert proc.returncode != 0 and "no-such-context" in proc.stdout, proc.stdout[-3000:]   # broken fails
    report = _report(fleet["audit_folder"])
    assert report["check_mode"] and fleet["audit_folder"].name.endswith("-check")
    clusters = _by_name(report)
    (crd,) = clusters["dirty"]["crds"]
    plan = crd["plan"]
    # the flip release N will make, not today's storage; what the trim will leave; nothing claimed as done
    assert (crd["storage_before"], crd["storage_version"], crd["stored_before"], crd["stored_after"]) == (
        "v1alpha1", "v1beta1", ["v1alpha1"], ["v1beta1"])
    assert (plan["to_restore"], plan["removes"], crd["trimmed"], crd["rewritten"]) == (OBJECTS, ["v1alpha1"], False, None)
    # v1alpha1 still in storedVersions is the normal path (the steps say the trim clears it), not a blocker; the
    # test's own client wrote the objects at v1alpha1 minutes ago: a client seen writing at a removed version is
    # (named from managedFields, and maybe from the apiservers' request counters too)
    seen = plan["blocked"]
    assert seen and {b["version"] for b in seen} == {"v1alpha1"} and len(crd["writers"]) == len(seen), plan["blocked"]
    assert any(b["why"].startswith("a client still uses it: ") and f"on {OBJECTS} objects" in b["why"] for b in seen)
    assert plan["estimate_s"] is not None and plan["estimate_basis"].startswith("dry-run sample "), plan
    # the plan's table of what would hold release N+1 back: that client, by its field manager (its objects name no
    # source), the last holder on dirty, with its fix; in the JSON, the Markdown, the HTML and on the console
    holders = [r for r in report["holders"]["rows"] if r["what"] == "field manager"]
    assert [(r["clusters"], r["last_holder_on"], r["objects"]) for r in holders] == [(["dirty"], ["dirty"], OBJECTS)], \
        report["holders"]
    assert holders[0]["crds"] == [{"crd": dirty.crd_name, "versions": ["v1alpha1"], "stays": holders[0]["crds"][0]["stays"]}]
    assert holders[0]["fix"].startswith(f"the controller or operator writing as {holders[0]['ref']} must move to ")
    # the etcd scan is judged against v1beta1: 6 keys still at v1alpha1 are not "all at storage version"
    assert crd["etcd"] == {"key_count": OBJECTS, "counts": {dirty.old(): OBJECTS}, "want": dirty.new(), "at_want": 0,
                           "ok": False}
    assert clusters["dirty"]["line"].startswith(f"1 CRD(s) change ({dirty.crd_name}), {OBJECTS} objects to re-store, ~")
    assert clusters["clean"]["line"] == "nothing to do" and clusters["clean"]["plan"]["nothing_to_do"]
    assert report["summary"]["nothing_to_do"] == 1 and report["summary"]["to_restore"] == OBJECTS
    md = (fleet["audit_folder"] / "fleet-report.md").read_text()
    assert f"etcd 0/{OBJECTS} keys at {dirty.new()} (not all)" in md and "all at storage version" not in md
    assert "| clean | nothing to do | nothing to do |" in md
    assert f"| {holders[0]['cells'][0]} | field manager {holders[0]['ref']} | " in md
    assert md.index("## What holds release N+1 back (") < md.index("## Clusters (3)")
    assert '<h2 id="holders">What holds release N+1 back (' in (fleet["audit_folder"] / "fleet-report.html").read_text()
    assert f"HOLDS release N+1 BACK {holders[0]['line']}" in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    # the console: the plan per cluster up front, and nothing was written (etcd unchanged)
    assert f"PLAN dirty: 1 CRD(s) change ({dirty.crd_name}), {OBJECTS} objects to re-store" in proc.stdout
    # following release N+1 would remove the short name release N declares and N+1 does not: in the plan (console,
    # JSON, Markdown, HTML), read from the live CRD and a dry-run; the CRD is as it was, nothing was written
    words = "spec.names.shortNames (declared by release N, not by release N+1; owned by kubectl-create (Update))"
    assert plan["removes_fields"] == [{"path": "spec.names.shortNames", "declared_by": "release N",
                                       "not_declared_by": "release N+1", "owners": ["kubectl-create (Update)"],
                                       "injected": [], "words": words}], plan
    assert plan["steps"][-1] == f"would remove {words}" and crd["crd_fields_removed"] == []
    assert re.search(rf"  {re.escape(dirty.crd_name)}: storage v1alpha1 -> v1beta1; [^\n]*; would remove "
                     rf"{re.escape(words)}", proc.stdout), proc.stdout[-6000:]
    assert f"- {dirty.crd_name}: would remove {words}\n" in md
    html = (fleet["audit_folder"] / "fleet-report.html").read_text()
    assert f"<li>{dirty.crd_name}: would remove {words}</li>" in html
    before, after = fleet["crd_before_audit"], fleet["crd_after_audit"]
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"] == before["spec"] and after["spec"]["names"]["shortNames"] == [short_name(dirty)]
    assert "PLAN clean: nothing to do" in proc.stdout


def test_reports_never_overwrite_each_other(fleet):
    root = fleet["tmp"] / "crdops-report"
    audit, invalid, upgrade = fleet["audit_folder"], fleet["invalid_folder"], fleet["upgrade_folder"]
    stopped = fleet["stopped_folder"]
    assert len({audit, invalid, stopped, upgrade}) == 4 and all(
        p.parent == root for p in (audit, invalid, stopped, upgrade))
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-check", audit.name) and re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z", upgrade.name)
    # the plan is still there, byte for byte, after two more runs
    assert {p.name: p.read_bytes() for p in audit.iterdir()} == fleet["audit_files"]
    # a run that failed its argument check: its own folder, latest then, says so per cluster
    assert fleet["invalid"].returncode != 0 and "crd_upgrade_workers" in fleet["invalid"].stdout
    failed = _report(invalid)
    assert failed["run"]["outcome"].startswith("failed: "), failed["run"]   # the first wave failed, the rest did not run
    assert failed["failures"] and all("crd_upgrade_workers" in f["cause"] and f["phase"] == "init"
                                      for f in failed["failures"]), failed
    # a run stopped before any cluster recorded a result: its folder says it recorded none
    assert fleet["stopped"].returncode != 0 and "abc" in fleet["stopped"].stdout + fleet["stopped"].stderr
    nothing = _report(stopped)
    assert nothing["clusters"] == [] and nothing["run"]["outcome"].startswith("no result"), nothing["run"]
    assert "no result" in (stopped / "fleet-report.md").read_text()
    assert (root / "latest").resolve() == upgrade
    # crd_upgrade_report_keep: the check run (keep 1) and the run whose keep is -1 deleted nothing; the upgrade
    # (keep 4) deleted the run folders beyond the newest 4 and nothing else
    assert fleet["after_audit"] == sorted(OLD_RUNS + FOREIGN + ["latest", audit.name])
    assert f"would delete 2 run folder(s) older than the newest 1 in {root}: {', '.join(OLD_RUNS)}" in \
        " ".join(fleet["audit"].stdout.split()), fleet["audit"].stdout[-3000:]
    assert fleet["before_upgrade"] == sorted(OLD_RUNS + FOREIGN + ["latest", audit.name, invalid.name, stopped.name])
    assert sorted(p.name for p in root.iterdir()) == sorted(
        FOREIGN + ["latest", audit.name, invalid.name, stopped.name, upgrade.name])
    assert "deleted 2 run folder(s) older than the newest 4" in fleet["upgrade"].stdout, fleet["upgrade"].stdout[-3000:]
    assert "crd_upgrade_report_keep: '-1' is not a number of run folders to keep" in fleet["invalid"].stdout
    done = _report(upgrade)
    assert done["run"]["outcome"] == "failed: 1 of 3 clusters failed" and not done["check_mode"]


def test_upgrade_report_and_console_say_what_was_done(fleet):
    proc, dirty = fleet["upgrade"], fleet["dirty"]
    assert proc.returncode != 0, proc.stdout[-3000:]   # broken failed; the others ran to the end
    assert scan_storage(fleet["etcd_url"], dirty.group, dirty.plural).counts == {dirty.new(): OBJECTS}
    clusters = _by_name(_report(fleet["upgrade_folder"]))
    assert clusters["dirty"]["status"] == "ok" and clusters["clean"]["status"] == "ok"
    assert _report(fleet["upgrade_folder"])["holders"]["rows"] == []   # nothing holds release N+1 back any more
    (crd,) = clusters["dirty"]["crds"]
    assert (crd["rewritten"], crd["stored_after"], crd["upgraded"], crd["proof"]["record_valid"]) == (
        OBJECTS, ["v1beta1"], True, True)
    assert crd["etcd"]["at_want"] == OBJECTS and crd["etcd"]["ok"]
    assert crd["managed_fields"]["dropped"] == 0 and crd["client_check"]["ok"]
    broken = clusters["broken"]
    assert (broken["status"], broken["failed_phase"]) == ("failed", "init")
    assert broken["next_step"]["step"].startswith("fix this host's kubeconfig or context"), broken
    # the cause in one short line; the details keep the whole error, the kubeconfig file named once
    assert broken["cause"] == ("cannot load kubeconfig: it has no context 'no-such-context' (kubectl config "
                               "get-contexts lists them)"), broken
    assert broken["error"] == f"[cluster no-such-context] cannot load kubeconfig {fleet['kubeconfig']}: it has no " \
                              "context 'no-such-context' (kubectl config get-contexts lists them)", broken
    # the end of each cluster on the console: one line per CRD that changed
    assert (f"{dirty.crd_name}: storage v1alpha1 -> v1beta1; re-stored {OBJECTS} of {OBJECTS} (unchanged 0, gone 0, "
            f"failed 0); storedVersions v1alpha1 -> v1beta1; removed v1alpha1; fields removed from the CRD: "
            f"spec.names.shortNames; etcd {OBJECTS} of {OBJECTS} keys at "
            f"{dirty.new()}") in proc.stdout, proc.stdout[-4000:]
    assert "clean: ok - 0 CRD(s) changed" in proc.stdout
    # the field following release N+1 removed from the live CRD (the role's apply left it: kubectl-create co-owned
    # it), per cluster and CRD in every format of the report's details
    words = "spec.names.shortNames (declared by release N, not by release N+1; owned by kubectl-create (Update))"
    assert crd["crd_fields_removed"] == [{"path": "spec.names.shortNames", "declared_by": "release N",
                                          "not_declared_by": "release N+1", "owners": ["kubectl-create (Update)"],
                                          "injected": [], "words": words}], crd["crd_fields_removed"]
    assert f"- {dirty.crd_name}: removed {words}\n" in (fleet["upgrade_folder"] / "fleet-report.md").read_text()
    assert f"<li>{dirty.crd_name}: removed {words}</li>" in (fleet["upgrade_folder"] / "fleet-report.html").read_text()
    assert "shortNames" not in fleet["kube"].get_crd(dirty.crd_name)["spec"]["names"]


def _first_screen(html: Path) -> dict:
    boxes = layout(html, {"headline": "#headline", "tiles": "#summary .tile", "failures": "table.failures tr.failed",
                          "clusters": "table.clusters tr"})
    return boxes


def test_three_cluster_report_first_screen_in_chromium(fleet):
    html = fleet["upgrade_folder"] / "fleet-report.html"
    boxes = _first_screen(html)
    height = VIEWPORT[1]
    assert [t["text"] for t in boxes["tiles"]] == ["2 done", "0 release N+1 held back", "1 failed", "0 waiting"]
    (failure,) = boxes["failures"]
    assert failure["text"].startswith("broken init") and "fix this host's kubeconfig" in failure["text"]
    assert failure["bottom"] <= height and boxes["headline"][0]["bottom"] <= height
    # failures first, then one line per cluster, all on the first screen
    lines = [b["text"] for b in boxes["clusters"][1:]]
    rows = [line.split(" ", 3)[:3] for line in lines]   # the others in inventory order (not fixed by Ansible)
    assert rows[0] == ["broken", "failed", "phase"] and sorted(rows[1:]) == [["clean", "ok", "0"], ["dirty", "ok", "1"]], lines
    assert all(b["bottom"] <= height for b in boxes["clusters"])
    if SCREENS:
        screenshot(html, Path(SCREENS) / "fleet-report-3-clusters.png")


def _hundred(real: list[dict]) -> list[dict]:
    """100 per-cluster results from the 3 real ones: names, counts and durations varied; every 20th fails as the
    real broken cluster did, every 9th never ran (a wave that did not start)."""
    by_status = {c["cluster"]: c for c in real}
    out = []
    for i in range(100):
        region = ("eu", "us", "ap", "sa")[i % 4]
        name = f"prod-{region}-{i:03d}"
        if i % 20 == 7:
            c = copy.deepcopy(by_status["broken"])
            c["error"] = c["error"].replace("broken", name)
        elif i % 9 == 4:
            c = {"cluster": name, "status": "not run", "phases_done": [], "failed_phase": None, "error": None,
                 "crds": [], "duration_s": None, "totals": {"objects": 0, "rewritten": 0, "unchanged": 0, "failed": 0}}
        else:
            c = copy.deepcopy(by_status["dirty" if i % 3 else "clean"])
            scale = 1 + i % 7
            for d in c["crds"]:
                for key in ("objects", "listed", "rewritten"):
                    d[key] = (d[key] or 0) * scale if d.get(key) is not None else None
            c["totals"] = {k: (v or 0) * scale for k, v in c["totals"].items()}
            c["duration_s"] = round((c["duration_s"] or 1) * scale, 1)
        c.update(cluster=name, context=name)
        out.append(c)
    return out


def test_hundred_cluster_report_reads_from_its_first_screen(fleet, tmp_path):
    real = _report(fleet["upgrade_folder"])["clusters"]
    clusters = _hundred(real)
    failed = [c["cluster"] for c in clusters if c["status"] == "failed"]
    waiting = [c for c in clusters if c["status"] == "not run"]
    reports = tmp_path / "crdops-report" / "20261201T000000.000Z-slice-1"
    reports.mkdir(parents=True)
    (reports / "fleet-report-1.json").write_text(json.dumps(
        {"title": "Fleet", "generated": "2026-12-01T05:00:00+00:00", "slice": "1", "clusters": clusters}))
    proc = ansible_playbook("crdops.migration.fleet_report_merge", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    folder = (tmp_path / "crdops-report" / "latest").resolve()
    assert folder.name.endswith("-merged")
    report = _report(folder)
    assert report["summary"]["clusters"] == 100 and len(report["failures"]) == len(failed) == 5
    html = folder / "fleet-report.html"
    boxes = _first_screen(html)
    height = VIEWPORT[1]
    assert [t["text"] for t in boxes["tiles"]] == [f"{100 - 5 - len(waiting)} done", "0 release N+1 held back", "5 failed",
                                                   f"{len(waiting)} waiting"]
    assert [b["text"].split(" ")[0] for b in boxes["failures"]] == failed
    assert all(b["bottom"] <= height for b in boxes["failures"] + boxes["tiles"] + boxes["headline"])
    # then one line per cluster (failed first), 100 rows; the details follow below
    rows = boxes["clusters"][1:]
    assert len(rows) == 100 and [r["text"].split(" ")[0] for r in rows[:5]] == failed
    assert all(b["bottom"] - b["top"] < 40 for b in rows)   # one line each
    md = (folder / "fleet-report.md").read_text()
    for name in failed:   # the same facts in the Markdown and the JSON
        assert f"| {name} | init |" in md
    if SCREENS:
        screenshot(html, Path(SCREENS) / "fleet-report-100-clusters.png")

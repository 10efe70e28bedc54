"""The fleet report's HTML as a browser renders it (headless Chromium), from a merge of slice reports."""
from __future__ import annotations

import json
import re

from tests.integration.chromium import dump_dom, layout
from tests.integration.modrun import REPO, ansible_playbook


def cluster(name, status, crds=(), error=None, phase=None):
    return {"cluster": name, "context": name, "status": status, "phases_done": [], "failed_phase": phase,
            "error": error, "duration_s": 3.5 if crds else None, "crds": list(crds),
            "totals": {"objects": sum(c["objects"] for c in crds), "rewritten": sum(c["rewritten"] for c in crds),
                       "unchanged": 0, "failed": sum(c["failed"] for c in crds)}}


def crd(name, objects, rewritten, failed=0, first_failure=None):
    return {"name": name, "stored_before": ["v1alpha1", "v1beta1"], "stored_after": ["v1beta1"],
            "storage_version": "v1beta1", "objects": objects, "rewritten": rewritten, "unchanged": 0,
            "failed": failed, "gone": 0, "duration_s": 1.5, "first_failure": first_failure, "trimmed": True, "upgraded": False,
            "skipped": None, "etcd": None}


def test_merged_report_renders_in_chromium(tmp_path):
    slices = {
        "1": [cluster("prod-eu-1", "ok", [crd("widgets.example.com", 120, 120)])],
        "2": [cluster("prod-us-1", "failed", [crd("widgets.example.com", 10, 7, 3, "<script>alert(1)</script> 409")],
                      error="[cluster prod-us-1] boom", phase="restore")],
        "3": [cluster("prod-ap-1", "not run")],
    }
    reports = tmp_path / "crdops-report"
    reports.mkdir()
    for n, clusters in slices.items():
        (reports / f"fleet-report-{n}.json").write_text(json.dumps(
            {"title": "Fleet", "generated": "2026-12-01T05:00:00+00:00", "slice": n, "check_mode": False,
             "clusters": clusters}))
    # the playbook from the collection by name, the default (relative) report dir: it is the working directory's
    proc = ansible_playbook("crdops.migration.fleet_report_merge", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    run = (reports / "latest").resolve()
    assert run.parent == reports and run.name.endswith("-merged")
    assert f"report: {run}/fleet-report.md (.json, .html); latest: {reports}/latest - crd_upgrade_report_dir " \
           "./crdops-report resolved against the working directory of the run" in proc.stdout, proc.stdout[-2000:]
    assert not (REPO / "playbooks" / "crdops-report").exists()

    wanted = {"failures": "table.failures tr.failed td", "clusters": "table.clusters tr", "crds": "table.crds tr"}
    boxes = layout(run / "fleet-report.html", wanted)
    assert [b["text"] for b in boxes["failures"]][:2] == ["prod-us-1", "restore"], boxes["failures"]
    assert [b["text"] for b in boxes["clusters"]] == [
        "cluster status what happened",
        "prod-us-1 failed phase restore: boom",   # the cause line names the cluster once, in its own column
        "prod-ap-1 not run waiting: its wave never started, or the run stopped first",
        "prod-eu-1 ok 1 CRD(s) changed, 120 objects re-stored of 120, 3.5 s"], boxes["clusters"]
    assert "10 7 re-stored, 0 unchanged, 0 gone, 3 failed in 1.5 s <script>alert(1)</script> 409" in \
        [b["text"] for b in boxes["crds"]][-1]
    dom = dump_dom(run / "fleet-report.html")
    assert "<script>alert" not in dom   # the error text is escaped, never markup
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom))
    assert "3 clusters: 1 done, 0 release N+1 held back, 1 failed, 1 waiting; 130 objects, 127 re-stored, 3 failed" \
        in text, text
    assert re.search(r"report generated \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\.", text), text

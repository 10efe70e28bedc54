"""A malformed survey answer for the play keywords fails the job before any cluster is touched, naming it."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.integration.modrun import REPO, ansible_playbook


@pytest.mark.parametrize("extra, message", [
    ("crd_upgrade_waves=abc", "crd_upgrade_waves: 'abc' is not a batch size"),
    ('{"crd_upgrade_waves": "[1, \\"150%\\"]"}', "crd_upgrade_waves: '150%' out of range"),
    ("crd_upgrade_max_fail_percentage=150", "crd_upgrade_percent: '150' is over 100"),
    ("crd_upgrade_max_fail_percentage=ten", "crd_upgrade_percent: 'ten' is not a percentage"),
])
def test_bad_wave_answers_stop_before_any_task(tmp_path, extra, message):
    # an unreachable cluster: any task that ran would fail differently
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {"c1": {
        "ansible_connection": "local", "crd_upgrade_auth": {"host": "https://127.0.0.1:1"}}}}}}}))
    proc = ansible_playbook("-i", str(tmp_path / "inv.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra, cwd=tmp_path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and message in out, out[-3000:]
    # only the run's report folder was opened (on the controller, so that no older report looks current): no
    # task of the upgrade play ran, and the report says no result was recorded
    tasks = [line for line in out.splitlines() if line.startswith("TASK [")]
    assert tasks and all("report" in line.lower() for line in tasks), tasks
    assert "Upgrade this cluster" not in out
    reports = list((tmp_path / "crdops-report" / "latest").glob("fleet-report.json"))
    assert len(reports) == 1, reports
    report = json.loads(reports[0].read_text())
    assert report["clusters"] == [] and report["run"]["outcome"].startswith("no result"), report

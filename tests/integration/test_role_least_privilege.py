"""The whole role, run by a ServiceAccount bound to the shipped least-privilege ClusterRole."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import crd_at, seed_old_objects
from tests.integration.test_security import service_account_token, shipped_rules

REPO = Path(__file__).resolve().parents[2]


def test_fleet_upgrade_with_the_shipped_clusterrole(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, 80, flip=False)
    token = service_account_token(kube, f"role-{group.split('.')[0]}", shipped_rules(group))
    release_n, release_next = tmp_path / "release-n", tmp_path / "release-next"
    release_n.mkdir()
    release_next.mkdir()
    (release_n / "crd.yaml").write_text(yaml.safe_dump(crd_at(s, "v1beta1")))
    (release_next / "crd.yaml").write_text(yaml.safe_dump(crd_at(s, "v1beta1", served=("v1beta1",))))
    report_dir = tmp_path / "report"
    inventory = {"all": {"children": {"clusters": {"hosts": {"least-privilege": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "crd_upgrade_auth": {"host": cluster.server, "api_key": token, "ca_cert": str(cluster.pki.ca_cert)},
        "crd_upgrade_release_manifests": [str(release_n / "*.yaml")],
        "crd_upgrade_target_manifests": [str(release_next / "*.yaml")],
        "crd_upgrade_crd_names": [s.crd_name],
        "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(report_dir)})
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra_vars)
    assert proc.returncode == 0, proc.stdout[-5000:]
    # the ServiceAccount may read the identity Leases: one apiserver alive, so the kubeconfig URL counts
    assert "mode single: 1 apiserver(s) alive" in proc.stdout, proc.stdout[-5000:]
    # and may post Events: the trim left one on the CRD
    events = kube.get("/api/v1/namespaces/default/events",
                      fieldSelector=f"involvedObject.name={s.crd_name},reason=StoredVersionsTrimmed")["items"]
    assert len(events) == 1 and events[0]["involvedObject"]["kind"] == "CustomResourceDefinition"

    crd = kube.get_crd(s.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    assert crd["status"]["storedVersions"] == ["v1beta1"]
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): 80}
    report = json.loads(next((report_dir / "latest").glob("*.json")).read_text())
    text = json.dumps(report) + proc.stdout
    assert token not in text
    assert "least-privilege" in json.dumps(report)
    reliability.record("least privilege: the whole role as a ServiceAccount bound to docs/rbac/clusterrole.yaml",
                       "preflight access review, flip, barrier, re-store, verify, trim and upgrade all passed; "
                       "the token appears nowhere in the output or the report", 80, final.total, True)

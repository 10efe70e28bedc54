"""Release N+1 goes through a server-side dry-run of every CRD before any of them is applied."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.integration.modrun import ansible_playbook
from tests.integration.seed import crd_at, seed_old_objects

REPO = Path(__file__).resolve().parents[2]


def test_a_refused_release_is_not_half_applied(cluster, kube, group, tmp_path):
    widgets = seed_old_objects(kube, group, 20, flip=False)
    gadgets = seed_old_objects(kube, group, 20, plural="gadgets", kind="Gadget", flip=False)
    release_n, release_next = tmp_path / "release-n", tmp_path / "release-next"
    release_n.mkdir()
    release_next.mkdir()
    for s in (widgets, gadgets):
        (release_n / f"{s.plural}.yaml").write_text(yaml.safe_dump(crd_at(s, "v1beta1")))
    (release_next / "widgets.yaml").write_text(yaml.safe_dump(crd_at(widgets, "v1beta1", served=("v1beta1",))))
    broken = crd_at(gadgets, "v1beta1", served=("v1beta1",))
    broken["spec"]["versions"].append(dict(broken["spec"]["versions"][0], name="v1", storage=True))  # 2 storage
    (release_next / "gadgets.yaml").write_text(yaml.safe_dump(broken))

    inventory = {"all": {"children": {"clusters": {"hosts": {"dry-run-cluster": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
        "crd_upgrade_release_manifests": [str(release_n / "*.yaml")],
        "crd_upgrade_target_manifests": [str(release_next / "*.yaml")],
        "crd_upgrade_crd_names": [widgets.crd_name, gadgets.crd_name],
        "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "r")})
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra_vars)
    assert proc.returncode != 0
    assert "refused by the apiserver (dry-run)" in proc.stdout, proc.stdout[-4000:]
    assert gadgets.crd_name in proc.stdout
    # the valid CRD of the same release was not applied either: both still serve v1alpha1
    for s in (widgets, gadgets):
        crd = kube.get_crd(s.crd_name)
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"], s.crd_name
        # the earlier phases did their part: migrated and trimmed
        assert crd["status"]["storedVersions"] == ["v1beta1"]
    report = json.loads(next((tmp_path / "r" / "latest").glob("*.json")).read_text())
    assert "upgrade" in json.dumps(report)

"""Bad input to the fleet playbook: one clear error, said once, naming the variable or file and the fix, and
nothing written to the cluster."""
from __future__ import annotations

import re
import sys

import yaml

from tests.controlplane.etcd_reader import current_revision, keys_written_since, scan_storage
from tests.integration.modrun import REPO, ansible_playbook
from tests.integration.seed import seed_old_objects

TYPOS = ("unknown variables crd_upgrade_pase (did you mean crd_upgrade_pace?), crd_upgrade_upgrad (did you mean "
         "crd_upgrade_upgrade?): correct or remove them; every variable: ansible-doc -t role crdops.migration.crd_upgrade")


def fatal_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("fatal: [")]


def test_bad_input_is_one_error_said_once_and_nothing_is_written(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, 12, flip=False)
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_crd_names": [s.crd_name], "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0,
            # a switch that defaults to true, misspelled: ignored, it would leave the default in force
            "crd_upgrade_upgrad": False, "crd_upgrade_release_manifests": ["releases/n/crds/*.yaml"]}
    expect = [TYPOS,
              "value of crd_upgrade_barrier_fallback must be one of: fail, settle, got: wait - see ansible-doc -t "
              "role crdops.migration.crd_upgrade",
              f"crd_upgrade_release_manifests: releases/n/crds/*.yaml matches no file in {tmp_path}/releases/n/crds, "
              f"which does not exist; a relative path resolves against the working directory of the run, {tmp_path}"]
    (tmp_path / "inv.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {"c1": host}}}}}))
    before = current_revision(cluster.etcd_url)

    proc = ansible_playbook("-i", str(tmp_path / "inv.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", "crd_upgrade_pase=max", "-e", "crd_upgrade_barrier_fallback=wait", cwd=tmp_path,
                            timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    fatal = fatal_lines(proc.stdout)
    # the task that found it says it, with the cluster; the role's last task names the phase, not the error again
    assert len(fatal) == 2, fatal
    assert fatal[0].endswith('"msg": "cluster c1: %s"}' % "; ".join(expect).replace('"', '\\"')), fatal[0]
    assert re.search(r""""msg": "cluster c1: phase init failed - the error is shown above, at task 'Initialise \| """,
                     fatal[1]), fatal[1]
    for message in expect:
        assert "".join(fatal[1:]).count(message) == 0
    assert "Finalization of task args" not in out and "argument_spec_data" not in out
    assert len(out) < 12000, len(out)   # not an argument spec
    # nothing written: the objects, the CRD
    assert [k for k in keys_written_since(cluster.etcd_url, before) if group in k] == []
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.old(): 12}
    assert [v["name"] for v in kube.get_crd(s.crd_name)["spec"]["versions"]] == ["v1alpha1"]

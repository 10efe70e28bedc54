"""The built artifact works: galaxy build, install into an empty path, run a playbook from that copy."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.integration.modrun import ansible_env
from tests.integration.seed import seed_old_objects

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(argv: list[str], env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The collection as `ansible-galaxy collection build` packs it, installed into an empty path."""
    root = tmp_path_factory.mktemp("installed")
    _run([str(BIN / "ansible-galaxy"), "collection", "build", str(REPO), "--output-path", str(root / "dist")])
    tarball = next((root / "dist").glob("crdops-migration-*.tar.gz"))
    installed = root / "installed"
    _run([str(BIN / "ansible-galaxy"), "collection", "install", "--no-deps", "--force", "-p", str(installed), str(tarball)])
    assert (installed / "ansible_collections" / "crdops" / "migration" / "MANIFEST.json").exists()
    return installed


def test_playbook_runs_from_the_installed_tarball(cluster, kube, group, tmp_path, installed):
    s = seed_old_objects(kube, group, 60)

    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Migrate with the installed collection", "hosts": "localhost", "gather_facts": False,
        "module_defaults": {"group/crdops.migration.crdops": {"kubeconfig": str(cluster.kubeconfig),
                                                              "context": cluster.contexts()[0]}},
        "tasks": [
            {"name": "Plan", "crdops.migration.crd_storage_info": {"names": [s.crd_name]}, "register": "plan"},
            {"name": "Re-store", "crdops.migration.crd_storage_migrate": {"names": [s.crd_name]}, "register": "run"},
            {"name": "Trim", "crdops.migration.crd_stored_versions_trim": {"names": [s.crd_name]}},
            {"name": "Show", "ansible.builtin.debug": {
                "msg": "{{ {'plan': plan.crds[0].needs_migration, 'rewritten': run.crds[0].rewritten} | to_json }}"}},
        ]}]))
    # only the installed copy (and the collections that ship with the `ansible` package) are on the path
    env = dict(ansible_env(str(installed)), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    proc = _run([str(BIN / "ansible-playbook"), str(playbook), "-v"], env=env, cwd=tmp_path)
    assert "ok=4" in proc.stdout and "failed=0" in proc.stdout
    assert '{"plan": true, "rewritten": 60}' in proc.stdout.replace('\\"', '"'), proc.stdout[-2000:]
    # and the modules that ran are the installed ones, not the source tree
    doc = _run([str(BIN / "ansible-doc"), "-t", "module", "--json", "crdops.migration.crd_storage_migrate"], env=env)
    assert json.loads(doc.stdout)["crdops.migration.crd_storage_migrate"]["doc"]["filename"].startswith(str(installed))
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): 60}
    assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1beta1"]


def test_one_module_defaults_block_configures_both_collections(cluster, kube, group, tmp_path, installed):
    """docs: `group/crdops.migration.crdops` extends kubernetes.core's group, so one block configures a
    kubernetes.core module and ours; kubernetes.core's own group does not reach ours (only kubernetes.core
    can add to it)."""
    s = seed_old_objects(kube, group, 3)
    auth = {"kubeconfig": str(cluster.kubeconfig), "context": cluster.contexts()[0]}

    def play(group_name: str) -> list:
        return [{"name": f"One block: {group_name}", "hosts": "localhost", "gather_facts": False,
                 "module_defaults": {group_name: auth},
                 "tasks": [
                     {"name": "kubernetes.core", "kubernetes.core.k8s_info": {
                         "api_version": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "name": s.crd_name}, "register": "theirs"},
                     {"name": "crdops.migration", "crdops.migration.crd_storage_info": {"names": [s.crd_name]},
                      "register": "ours"},
                     {"name": "Show", "ansible.builtin.debug": {"msg": "{{ {'theirs': theirs.resources | map("
                                                                       "attribute='metadata.name') | list, 'ours': "
                                                                       "ours.crds | map(attribute='object_count') | list}"
                                                                       " | to_json }}"}}]}]

    # no ~/.kube/config and no K8S_AUTH_*: a module the block does not reach has no cluster to talk to
    env = dict(ansible_env(str(installed)), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", HOME=str(tmp_path))
    # one run: the block for our group, then one for kubernetes.core's (its last task fails)
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play("group/crdops.migration.crdops")
                                                      + play("group/kubernetes.core.k8s")))
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(tmp_path / "play.yml"), "-v"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    ours, theirs = proc.stdout.split("PLAY [One block: group/kubernetes.core.k8s]")
    assert f'{{"theirs": ["{s.crd_name}"], "ours": [3]}}' in ours.replace('\\"', '"'), proc.stdout[-3000:]
    assert proc.returncode != 0 and "ok=4 " in proc.stdout, proc.stdout[-3000:]   # 3 + k8s_info of the 2nd play
    assert theirs.count("ok: [localhost]") == 1 and "cannot load kubeconfig" in theirs, theirs[-2000:]

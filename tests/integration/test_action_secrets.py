"""The controller-side crd_storage_migrate and crd_storage_info (action plugins, in ansible-playbook's worker) keep
secrets secret: an api_key and an inline kubeconfig dict, in a passing and a failing run, at -vvv (-vvvv prints the
command line, extra vars included)."""
from __future__ import annotations

import json

import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.integration.modrun import ansible_playbook
from tests.integration.seed import seed_old_objects
from tests.integration.test_security import (
    _inline_kubeconfig, _secret_texts, service_account_token, shipped_rules, token_args)


def test_action_results_and_vvv_output_carry_no_secret(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, 15)
    token = service_account_token(kube, f"act-{group.split('.')[0]}", shipped_rules(group))
    secrets = dict(_secret_texts(cluster), token=token)
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "secrets check, controller-side re-store", "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"name": "token", "crdops.migration.crd_storage_migrate": dict(
                token_args(cluster, "{{ tok }}"), names=[s.crd_name], progress_interval=0.5), "register": "r1"},
            {"name": "inline kubeconfig, failing", "crdops.migration.crd_storage_migrate": {
                "kubeconfig": "{{ inline }}", "names": ["nope.example.com"]}, "ignore_errors": True, "register": "r2"},
            # the read-only modules' jobs run in the worker too (plugins/plugin_utils/job_on_controller.py)
            {"name": "info, token", "crdops.migration.crd_storage_info": dict(
                token_args(cluster, "{{ tok }}"), names=[s.crd_name]), "register": "r3"},
            {"name": "info, inline kubeconfig, failing", "crdops.migration.crd_storage_info": {
                "kubeconfig": "{{ inline }}", "names": ["nope.example.com"]}, "ignore_errors": True, "register": "r4"},
            {"name": "show", "ansible.builtin.debug": {
                "msg": "{{ r1 | to_json }} {{ r2 | to_json }} {{ r3 | to_json }} {{ r4 | to_json }}"}},
        ]}]))
    proc = ansible_playbook("-vvv", str(playbook), "-e", json.dumps({"tok": token, "inline": _inline_kubeconfig(cluster)}),
                            timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "runs as a module" not in out  # the pass ran in the worker (controller side)
    assert "AnsiballZ_crd_storage_info" not in out  # so did the info job: no module process
    assert "15/15 objects (100.0%)" in out and "nope.example.com" in out
    assert '"object_count": 15' in out and out.count("unknown CRD name(s): nope.example.com") >= 2, out[-3000:]
    assert scan_storage(cluster.etcd_url, s.group, s.plural).counts == {s.new(): 15}
    for what, secret in secrets.items():
        assert secret not in out, f"{what} leaked"

"""Least privilege, API Priority and Fairness throttling, secrets, and bad input."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from tests.controlplane.etcd_reader import keys_written_since, current_revision, scan_storage
from tests.controlplane.kube import Kube, KubeError, make_crd
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook, auth_args, run_module
from tests.integration.seed import seed_old_objects

REPO = Path(__file__).resolve().parents[2]
CLUSTERROLE = REPO / "docs" / "rbac" / "clusterrole.yaml"


def service_account_token(kube: Kube, name: str, rules: list[dict], namespace: str = "crdops-system") -> str:
    """A ServiceAccount bound to a ClusterRole with `rules`; returns a token from the TokenRequest API."""
    kube.ensure_namespace(namespace)
    for path, body in (
        (f"/api/v1/namespaces/{namespace}/serviceaccounts",
         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
         {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
          "rules": rules}),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
          "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}),
    ):
        kube.post(path, body)
    token = kube.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": 3600}})
    return token["status"]["token"]


def shipped_rules(group: str) -> list[dict]:
    """docs/rbac/clusterrole.yaml as shipped, with its example API groups replaced by the test's."""
    role = yaml.safe_load(CLUSTERROLE.read_text())
    rules = role["rules"]
    for rule in rules:
        if "example.com" in rule.get("apiGroups", []):
            rule["apiGroups"] = [group]
    return rules


def token_args(cluster, token: str) -> dict:
    return {"host": cluster.server, "api_key": token, "ca_cert": str(cluster.pki.ca_cert)}


def test_least_privilege_clusterrole_runs_everything(cluster, kube, group):
    s = seed_old_objects(kube, group, 120)
    sa = f"least-{group.split('.')[0]}"
    token = service_account_token(kube, sa, shipped_rules(group))
    auth = token_args(cluster, token)

    info = run_module("crd_storage_info", dict(auth, names=[s.crd_name]))
    assert not info.get("failed"), info.get("msg")
    migrated = run_module("crd_storage_migrate", dict(auth, names=[s.crd_name]))
    assert not migrated.get("failed"), migrated.get("msg")
    assert migrated["crds"][0]["rewritten"] == 120
    trimmed = run_module("crd_stored_versions_trim", dict(auth, names=[s.crd_name]))
    assert not trimmed.get("failed"), trimmed.get("msg")
    assert kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1beta1"]
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): 120}
    for text in (json.dumps(info), json.dumps(migrated), json.dumps(trimmed)):
        assert token not in text


@pytest.mark.parametrize("missing", [
    ("customresourcedefinitions/status", "patch", "crd_stored_versions_trim"),
    ("*", "patch", "crd_storage_migrate"),
    ("*", "list", "crd_storage_migrate"),
    ("customresourcedefinitions", "list", "crd_storage_info"),
])
def test_each_missing_permission_is_named(cluster, kube, group, missing):
    resource, verb, module = missing
    s = seed_old_objects(kube, group, 10)
    if module == "crd_stored_versions_trim":
        assert not run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name])).get("failed")
    rules = shipped_rules(group)
    for rule in rules:
        if resource in rule.get("resources", []) and verb in rule["verbs"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    sa = f"miss-{verb}-{group.split('.')[0]}"
    token = service_account_token(kube, sa, rules)
    before = current_revision(cluster.etcd_url)
    args = dict(token_args(cluster, token), **({"all": True} if module == "crd_storage_info" else {"names": [s.crd_name]}))
    result = run_module(module, args)
    assert result["failed"] is True
    msg = result["msg"]
    assert f"cannot {verb} resource" in msg, msg
    assert f"system:serviceaccount:crdops-system:{sa}" in msg
    assert token not in json.dumps(result)
    assert scan_storage(cluster.etcd_url, group, s.plural).counts.get(s.old(), 0) in (0, 10)
    if module == "crd_storage_info":
        assert keys_written_since(cluster.etcd_url, before) == []
    reliability.record(f"least privilege: {verb} on {resource} missing ({module})",
                       "failed naming the missing permission and the ServiceAccount; the token is not in the result",
                       10, scan_storage(cluster.etcd_url, group, s.plural).total, None)


def test_api_priority_and_fairness_throttling_is_honoured(cluster, kube, group):
    s = seed_old_objects(kube, group, 300)
    sa = f"apf-{group.split('.')[0]}"
    token = service_account_token(kube, sa, shipped_rules(group))
    name = f"crdops-tight-{group.split('.')[0]}"
    kube.post("/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "lendablePercent": 0,
                                                "limitResponse": {"type": "Reject"}}}})
    kube.post("/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": name},
        "spec": {"priorityLevelConfiguration": {"name": name}, "matchingPrecedence": 100,
                 "distinguisherMethod": {"type": "ByUser"},
                 "rules": [{"subjects": [{"kind": "ServiceAccount",
                                          "serviceAccount": {"name": sa, "namespace": "crdops-system"}}],
                            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                               "clusterScope": True, "namespaces": ["*"]}]}]}})
    # pace max: 24 writes in flight from the start, so APF has to queue and reject; the gentle default starts
    # at one write in flight and may never be throttled, which is the point of it but not of this test
    result = run_module("crd_storage_migrate", dict(token_args(cluster, token), names=[s.crd_name], workers=24,
                                                    page_size=100, retry_deadline=300, pace="max"))
    assert not result.get("failed"), result.get("msg")
    entry = result["crds"][0]
    assert entry["throttled"] > 0, entry
    assert entry["rewritten"] == 300 and entry["failed"] == 0
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.new(): 300}
    reliability.record("429 from API Priority and Fairness (non-admin identity, 1-share priority level)",
                       f"{entry['throttled']} requests throttled and retried after Retry-After; completed",
                       300, final.total, True)


def _secret_texts(cluster) -> dict[str, str]:
    key_pem = cluster.pki.admin_key.read_text()
    key_body = "".join(line for line in key_pem.splitlines() if "-----" not in line)
    return {"client key PEM body": key_body[:40],
            "client key base64": base64.b64encode(key_pem.encode()).decode()[:40]}


def _inline_kubeconfig(cluster, token: str | None = None) -> dict:
    user = {"client-certificate-data": base64.b64encode(cluster.pki.admin_cert.read_bytes()).decode(),
            "client-key-data": base64.b64encode(cluster.pki.admin_key.read_bytes()).decode()}
    return {"apiVersion": "v1", "kind": "Config", "current-context": "inline",
            "clusters": [{"name": "inline", "cluster": {
                "server": cluster.server,
                "certificate-authority-data": base64.b64encode(cluster.pki.ca_cert.read_bytes()).decode()}}],
            "users": [{"name": "inline", "user": user}],
            "contexts": [{"name": "inline", "context": {"cluster": "inline", "user": "inline"}}]}


def test_secrets_never_appear_in_results_or_verbose_output(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, 15)
    token = service_account_token(kube, f"secret-{group.split('.')[0]}", shipped_rules(group))
    secrets = dict(_secret_texts(cluster), token=token)
    inline = _inline_kubeconfig(cluster)

    outputs = []
    outputs.append(json.dumps(run_module("crd_storage_info", dict(token_args(cluster, token), names=[s.crd_name]))))
    outputs.append(json.dumps(run_module("crd_storage_info", {"host": cluster.server,
                                                              "ca_cert": str(cluster.pki.ca_cert),
                                                              "client_cert": str(cluster.pki.admin_cert),
                                                              "client_key": str(cluster.pki.admin_key),
                                                              "names": [s.crd_name]})))
    outputs.append(json.dumps(run_module("crd_storage_migrate", {"kubeconfig": inline, "names": [s.crd_name]})))
    # failures too: a wrong token and an unreachable host with an inline kubeconfig
    outputs.append(json.dumps(run_module("crd_storage_info", dict(token_args(cluster, token + "x"),
                                                                  names=[s.crd_name]))))

    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "secrets check", "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"name": "token", "crdops.migration.crd_storage_info": dict(token_args(cluster, "{{ tok }}"),
                                                                        names=[s.crd_name])},
            {"name": "inline kubeconfig", "crdops.migration.crd_stored_versions_trim": {
                "kubeconfig": "{{ inline }}", "names": [s.crd_name]}},
            {"name": "inline kubeconfig, failing", "crdops.migration.crd_storage_info": {
                "kubeconfig": "{{ inline }}", "names": ["nope.example.com"]}, "ignore_errors": True},
        ]}]))
    proc = ansible_playbook("-vvv", str(playbook), "-e", json.dumps({"tok": token, "inline": inline}), timeout=300)
    outputs.append(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "migration record" in proc.stdout or "ok=3" in proc.stdout

    for text in outputs:
        for what, secret in secrets.items():
            assert secret not in text, f"{what} leaked"
    reliability.record("secrets: api_key, client key file and inline kubeconfig dict in use",
                       f"searched {len(outputs)} module results and ansible-playbook -vvv output (successes and "
                       "failures) for the token and the key material: none found", 0, 0, None)


def test_bad_input_is_refused_before_anything_is_written(cluster, kube, group, tmp_path):
    s = seed_old_objects(kube, group, 8)
    before = current_revision(cluster.etcd_url)

    not_a_crd = tmp_path / "not-a-crd.yaml"
    not_a_crd.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    res = run_module("crd_storage_info", dict(auth_args(cluster), names=[s.crd_name],
                                              target_manifests=[str(not_a_crd)]))
    assert res["failed"] and "not-a-crd.yaml" in res["msg"] and "ConfigMap" in res["msg"], res["msg"]

    malformed = tmp_path / "broken.yaml"
    malformed.write_text("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n  spec: [\n")
    res = run_module("crd_storage_info", dict(auth_args(cluster), names=[s.crd_name],
                                              target_manifests=[str(malformed)]))
    assert res["failed"] and "broken.yaml" in res["msg"], res["msg"]

    res = run_module("crd_storage_migrate", dict(auth_args(cluster), group="no-crds-here.example.com"))
    assert res["failed"] and "no-crds-here.example.com" in res["msg"], res["msg"]

    res = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name],
                                                      versions=["v1beta1"], force=True))
    assert res["failed"] and "storage version" in res["msg"].lower()

    # a CRD whose storage version is not served, selected together with a healthy one
    odd = make_crd(group, "oddities", "Oddity", [("v1alpha1", True, False), ("v1beta1", False, True)])
    try:
        kube.apply_crd(odd)
    except KubeError as exc:
        pytest.fail(f"the apiserver refused a CRD with an unserved storage version: {exc}")
    res = run_module("crd_storage_migrate", dict(auth_args(cluster), group=group))
    assert res["failed"] and "oddities." + group in res["msg"] and "not served" in res["msg"], res["msg"]

    assert keys_written_since(cluster.etcd_url, before) == [
        f"/registry/apiextensions.k8s.io/customresourcedefinitions/oddities.{group}"]
    final = scan_storage(cluster.etcd_url, group, s.plural)
    assert final.counts == {s.old(): 8}
    reliability.record("bad input: target manifest not a CRD, malformed YAML, zero CRDs selected, removing the "
                       "storage version, a CRD whose storage version is not served",
                       "each refused with a message naming the file, CRD or group; no key written to etcd (the "
                       "only write is the test's own CRD)", 8, final.total, None)


def _exec_kubeconfig(cluster, token: str) -> dict:
    """An inline kubeconfig whose user gets the token from an exec plugin, through an env entry VALUE.

    Another env entry is named `prod`: a name is not a secret, `prod-eu-1` must print as it is.
    """
    script = ('printf \'{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
              '"status":{"token":"%s"}}\' "$CRDOPS_EXEC_TOKEN"')
    return {"apiVersion": "v1", "kind": "Config", "current-context": "prod-eu-1",
            "clusters": [{"name": "prod-eu-1", "cluster": {
                "server": cluster.server,
                "certificate-authority-data": base64.b64encode(cluster.pki.ca_cert.read_bytes()).decode()}}],
            "users": [{"name": "prod-eu-1", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/bin/sh", "args": ["-c", script],
                "env": [{"name": "prod", "value": "zz-opaque-7"}, {"name": "CRDOPS_EXEC_TOKEN", "value": token}]}}}],
            "contexts": [{"name": "prod-eu-1", "context": {"cluster": "prod-eu-1", "user": "prod-eu-1"}}]}


@pytest.mark.parametrize("given", ["crd_upgrade_auth.api_key", "K8S_AUTH_API_KEY", "inline kubeconfig (exec env)"])
def test_whole_role_at_vvvv_never_prints_the_token(cluster, kube, group, tmp_path, given):
    import sys
    from tests.integration.modrun import REPO as ROOT, ansible_env
    from tests.integration.seed import crd_at

    s = seed_old_objects(kube, group, 12, flip=False)
    token = service_account_token(kube, f"vvvv-{group.split('.')[0]}", shipped_rules(group))
    release_n, release_next = tmp_path / "release-n", tmp_path / "release-next"
    for folder, crd in ((release_n, crd_at(s, "v1beta1")), (release_next, crd_at(s, "v1beta1", served=("v1beta1",)))):
        folder.mkdir()
        (folder / "crd.yaml").write_text(yaml.safe_dump(crd))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_release_manifests": [str(release_n / "*.yaml")],
            "crd_upgrade_target_manifests": [str(release_next / "*.yaml")],
            "crd_upgrade_crd_names": [s.crd_name], "crd_upgrade_settle_seconds": 0, "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 0}
    env = ansible_env()
    if given == "crd_upgrade_auth.api_key":
        host["crd_upgrade_auth"] = token_args(cluster, token)
    elif given == "K8S_AUTH_API_KEY":
        env.update(K8S_AUTH_HOST=cluster.server, K8S_AUTH_API_KEY=token, K8S_AUTH_SSL_CA_CERT=str(cluster.pki.ca_cert))
    else:
        host["crd_upgrade_auth"] = {"kubeconfig": _exec_kubeconfig(cluster, token)}
    (tmp_path / "progress").mkdir()
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {
        "prod-eu-1": host}}}}}))
    proc = ansible_playbook("-vvvv", "-i", str(tmp_path / "inventory.yml"),
                            str(ROOT / "playbooks" / "fleet_upgrade.yml"),
                            "-e", json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "report")}),
                            env=env, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): 12}
    assert len(out.splitlines()) > 2000, "not a -vvvv run"   # module invocations, connection details
    files = [p for folder in ("progress", "report") for p in (tmp_path / folder).rglob("*") if p.is_file()]
    assert len(list((tmp_path / "report" / "latest").glob("fleet-report.*"))) == 3
    texts = {str(p): p.read_text(errors="replace") for p in files}
    texts["ansible-playbook -vvvv output"] = out
    for where, text in texts.items():
        assert token not in text, f"the token ({given}) is in {where}"
        # JWT parts: the signature alone must not leak either (a token cut by a line break)
        assert token.split(".")[-1][:40] not in text, f"part of the token ({given}) is in {where}"
    # names are not secrets: the host and context name print as they are
    assert "prod-eu-1" in out and "********-eu-1" not in out and "prod-********" not in out
    reliability.record(f"secrets: the whole role at -vvvv, ServiceAccount token as {given}",
                       f"token absent from {len(out.splitlines())} output lines, the results, {len(files)} progress "
                       "and report files; host and context names unmasked", 12, 12, True)

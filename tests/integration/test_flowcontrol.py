"""docs/rbac/prioritylevel.yaml and flowschema.yaml, as shipped, on a real kube-apiserver 1.37.2 (APF is on by
default): the migration's ServiceAccount is classified into our FlowSchema and priority level, and a pass run as it
is dispatched through them, with exact counts and every etcd key at the new version."""
from __future__ import annotations

import re
import time
from pathlib import Path

import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import Kube, KubeError, objects_path
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import seed_old_objects
from tests.integration.test_security import service_account_token, shipped_rules, token_args

REPO = Path(__file__).resolve().parents[2]
FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
SA_NAMESPACE = "crdops-system"


def shipped(name: str) -> dict:
    return yaml.safe_load((REPO / "docs" / "rbac" / name).read_text())


def create_or_replace(kube: Kube, collection: str, body: dict) -> dict:
    try:
        return kube.post(collection, body)
    except KubeError as exc:
        if exc.status != 409:
            raise
    path = f"{collection}/{body['metadata']['name']}"
    body = dict(body, metadata=dict(body["metadata"], resourceVersion=kube.get(path)["metadata"]["resourceVersion"]))
    return kube.put(path, body)


def pf_headers(cluster, token: str, path: str) -> dict:
    """The APF response headers of one request made with the ServiceAccount's own token."""
    client = Kube(cluster.server, cluster.pki.ca_cert, token=token)
    resp = client.pool.request("GET", cluster.server + path, headers=dict(client.headers, Accept="application/json"))
    assert resp.status == 200, (path, resp.status, resp.data[:300])
    return {k.lower(): v for k, v in resp.headers.items() if k.lower().startswith("x-kubernetes-pf-")}


def flow_control_of(cluster, token: str, s) -> dict:
    """crd_storage_info's flow_control, run with the ServiceAccount's token."""
    result = run_module("crd_storage_info", dict(token_args(cluster, token), names=[s.crd_name]))
    assert not result.get("failed"), result.get("msg")
    return result["flow_control"]


def dispatched(kube: Kube, flow_schema: str) -> float:
    """apiserver_flowcontrol_dispatched_requests_total of one FlowSchema, summed over its priority levels."""
    text = kube.request("GET", "/metrics")
    total = 0.0
    for line in str(text).splitlines():
        if line.startswith("apiserver_flowcontrol_dispatched_requests_total{") and \
                re.search(r'flow_schema="%s"' % re.escape(flow_schema), line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_shipped_flowschema_classifies_the_migration_serviceaccount_and_its_pass(cluster, kube, group):
    count = 300
    s = seed_old_objects(kube, group, count)
    sa = f"apf-{group.split('.')[0]}"
    token = service_account_token(kube, sa, shipped_rules(group), namespace=SA_NAMESPACE)
    plc, fs = shipped("prioritylevel.yaml"), shipped("flowschema.yaml")
    # the plan's words before the shipped objects are in place: another FlowSchema (service-accounts)
    assert flow_control_of(cluster, token, s)["state"] == "other"
    assert plc["spec"]["type"] == "Limited" and plc["spec"]["limited"]["limitResponse"]["type"] == "Queue"
    subject = fs["spec"]["rules"][0]["subjects"][0]["serviceAccount"]
    assert (subject["namespace"], subject["name"]) == ("ops", "crdops-migration")  # as docs/rbac.md says
    subject.update(namespace=SA_NAMESPACE, name=sa)  # the test's ServiceAccount, as shipped_rules swaps the groups
    plc_uid = create_or_replace(kube, f"{FLOWCONTROL}/prioritylevelconfigurations", plc)["metadata"]["uid"]
    fs_uid = create_or_replace(kube, f"{FLOWCONTROL}/flowschemas", fs)["metadata"]["uid"]

    want = {"x-kubernetes-pf-flowschema-uid": fs_uid, "x-kubernetes-pf-prioritylevel-uid": plc_uid}
    paths = (objects_path(group, "v1beta1", s.plural) + "?limit=1", "/version")  # a resource and a non-resource rule
    deadline = time.monotonic() + 30  # the APF config controller applies new objects within seconds
    while True:
        seen = [pf_headers(cluster, token, p) for p in paths]
        if all(h == want for h in seen) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert seen == [want, want]
    conditions = {c["type"]: c["status"] for c in kube.get(f"{FLOWCONTROL}/flowschemas/{fs['metadata']['name']}")
                  ["status"].get("conditions", [])}
    assert conditions.get("Dangling") == "False"
    # an identity the schema does not name stays where it was (our rule matches only the ServiceAccount)
    other = service_account_token(kube, f"{sa}-other", shipped_rules(group), namespace=SA_NAMESPACE)
    assert pf_headers(cluster, other, "/version")["x-kubernetes-pf-flowschema-uid"] != fs_uid
    # what the plan says, by the same uids, with the shipped ClusterRole's read of the two FlowSchemas
    assert flow_control_of(cluster, token, s) == {
        "state": "shipped", "flow_schema_uid": fs_uid, "priority_level_uid": plc_uid,
        "words": "API Priority and Fairness: the shipped FlowSchema crdops-migration is in place (a priority level "
                 "of its own)"}
    assert flow_control_of(cluster, other, s)["state"] == "other"
    admin = run_module("crd_storage_info", dict(auth_args(cluster), names=[s.crd_name]))
    assert admin["flow_control"]["state"] == "exempt", admin["flow_control"]

    before = dispatched(kube, fs["metadata"]["name"])
    result = run_module("crd_storage_migrate", dict(token_args(cluster, token), names=[s.crd_name]))
    after = dispatched(kube, fs["metadata"]["name"])
    assert not result.get("failed"), result.get("msg")
    crd = result["crds"][0]
    assert (crd["listed"], crd["rewritten"], crd["unchanged"], crd["gone"], crd["failed"]) == (count, count, 0, 0, 0)
    assert crd["record_written"] is True and crd["pace"]["mode"] == "gentle"
    assert scan_storage(cluster.etcd_url, group, s.plural).counts == {s.new(): count}
    # every write of the pass went through our FlowSchema (plus its lists, reads, Lease and Events)
    assert after - before >= count, (before, after)
    assert token not in str(result)
    print(f"\nAPF: FlowSchema {fs_uid} / PriorityLevel {plc_uid} matched; the pass dispatched {after - before:.0f} "
          f"requests through crdops-migration for {count} objects")

"""No client left behind: a client that keeps server-side applying at v1alpha1 while the role runs is named before
release N+1 (which removes v1alpha1) and N+1 is refused; with crd_upgrade_accept_broken_clients the rerun applies
N+1, lists the client as broken in crd_upgrade_result and the fleet report, and leaves no managedFields entry at
v1alpha1 (entries the client recreated are rewritten before and after N+1).

The client is a Python loop of raw server-side apply requests (PATCH application/apply-patch+yaml at v1alpha1,
no force), one every second, each changing `.spec.size` as a deployer bumping a replica count would.
"""
from __future__ import annotations

import json
import threading
import time

from tests.controlplane import etcd_reader
from tests.controlplane.kube import KubeError, objects_path
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import Seeded, crd_at
from tests.integration.test_client_check import ssa
from tests.integration.test_role_managed_fields import run_role

COUNT = 6
WRITER = "legacy-deployer"
WRITTEN = ("w-00", "w-01")  # the objects the writer keeps applying to


class ApplyLoop(threading.Thread):
    """Applies `.spec.size` of each of WRITTEN at v1alpha1 as WRITER every `period` seconds until stopped."""

    def __init__(self, kube, s: Seeded, period: float = 1.0):
        super().__init__(daemon=True)
        self.kube, self.s, self.period = kube, s, period
        self.done = threading.Event()
        self.ok = 0
        self.errors: list[tuple[int, str]] = []

    def run(self):
        n = 100
        while not self.done.is_set():
            for name in WRITTEN:
                n += 1
                try:
                    ssa(self.kube, self.s, "v1alpha1", "apps", name, WRITER, {"size": n})
                    self.ok += 1
                except KubeError as exc:
                    self.errors.append((exc.status, exc.message))
            self.done.wait(self.period)

    def stop(self):
        self.done.set()
        self.join(10)


def entries_at(kube, s: Seeded, version: str) -> list[tuple[str, str]]:
    items = kube.get(objects_path(s.group, "v1beta1", s.plural))["items"]
    return [(o["metadata"]["name"], e["manager"]) for o in items for e in o["metadata"].get("managedFields") or []
            if e.get("apiVersion") == f"{s.group}/{version}"]


def test_a_client_writing_at_the_removed_version_is_named_and_refused_unless_accepted(cluster, kube, group, tmp_path):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    kube.ensure_namespace("apps")
    for i in range(COUNT):
        ssa(kube, s, "v1alpha1", "apps", f"w-{i:02d}", "argocd-controller", {"color": "blue"})
    release_n, release_next = crd_at(s, "v1beta1"), crd_at(s, "v1beta1", ("v1beta1",))
    for sub in ("first", "accepted"):
        (tmp_path / sub).mkdir()
    writer = ApplyLoop(kube, s)
    writer.start()
    try:
        # the preflight is proven elsewhere; the refused run's report is not read
        proc = run_role(cluster, tmp_path / "first", s, release_n, release_next, crd_upgrade_writers_window=2,
                        crd_upgrade_preflight=False, crd_upgrade_report_on_failure=False)
        assert proc.returncode != 0, proc.stdout[-4000:]
        out = proc.stdout
        assert "release N+1 not applied" in out, out[-4000:]
        # cluster, CRD, manager, object count, last write; and the requests at v1alpha1 on the apiserver
        for text in ("cluster mf-cluster", s.crd_name, f"manager {WRITER} (Apply at v1alpha1) on 2 objects, last write",
                     "requests at v1alpha1 served by", "APPLY", "crd_upgrade_accept_broken_clients"):
            assert text in out, (text, out[-4000:])
        assert "argocd-controller (Apply" not in out  # its entries are older than the run: rewritten, not a writer
        crd = kube.get_crd(s.crd_name)
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"]  # N+1 not applied
        assert crd["status"]["storedVersions"] == ["v1beta1"]  # the run got as far as the trim

        # check mode (the module as the role runs it there): the writers of the last hour, nothing failed
        listed = run_module("crd_client_check", dict(auth_args(cluster), check="writers", names=[s.crd_name],
                                                     removed_versions={s.crd_name: ["v1alpha1"]}, metrics_window=0,
                                                     fail_on_error=False), check_mode=True)
        assert listed["_rc"] == 0 and listed["ok"] is False, listed
        [client] = listed["broken_clients"]
        assert (client["manager"], client["objects"], client["seen_in"]) == (WRITER, 2, "managedFields")
        assert listed["writers"]["metrics"] == "not measured: metrics_window is 0"

        proc = run_role(cluster, tmp_path / "accepted", s, release_n, release_next, crd_upgrade_writers_window=2,
                        crd_upgrade_preflight=False, crd_upgrade_accept_broken_clients=True)
        assert proc.returncode == 0, proc.stdout[-6000:]
        time.sleep(1.5)  # the writer's next round: it is broken now
    finally:
        writer.stop()
    assert writer.ok > 0 and writer.errors and all(status == 404 for status, _m in writer.errors[-2:]), writer.errors[-3:]
    assert f"{WRITER} of versions release N+1 removes" in proc.stdout or "clients of versions release N+1" in proc.stdout
    crd = kube.get_crd(s.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    assert entries_at(kube, s, "v1alpha1") == []
    report = json.loads(sorted((tmp_path / "accepted" / "report").rglob("fleet-report.json"))[0].read_text())
    [result] = [c for c in report["clusters"] if c["cluster"] == "mf-cluster"]
    assert result["broken_clients_accepted"] is True
    named = [c for c in result["broken_clients"] if c.get("manager") == WRITER]
    assert named and named[0]["crd"] == s.crd_name and named[0]["version"] == "v1alpha1" and named[0]["objects"] == 2
    assert any(c["seen_in"] == "metrics" and c["requests"] > 0 for c in result["broken_clients"])
    scan = etcd_reader.scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.total == COUNT and dict(scan.counts) == {s.new(): COUNT}

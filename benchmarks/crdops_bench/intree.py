"""The in-tree migrator: kube-controller-manager's storage-version-migrator-controller.

KCM 1.37.2 runs with `--controllers=garbage-collector-controller,namespace-controller,
storage-version-migrator-controller`, default QPS, as the migrator ServiceAccount (not system:masters),
started after the data is seeded. The migration is timed from creating the StorageVersionMigration to its
`Succeeded` condition; `active_seconds` from its first condition (`Running`, set once the controller's check
that the garbage collector's cache caught up passed) to `Succeeded`. KCM start and the garbage collector's
initial sync are not counted. `work_seconds` runs from the last poll (every 50 ms, with etcd's revision)
before the first object was rewritten -- the smallest mod_revision among the keys afterwards -- to
`Succeeded`: the migration work alone, without the controller's wait for the garbage collector's cache
(`Running` is set before that wait in 1.37).
"""
from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request

from . import data

SVM_GROUP = "storagemigration.k8s.io"
POLL = 0.05


def discover_svm(kube) -> tuple[str, str]:
    """(preferred StorageVersionMigration version, a line saying what the apiserver serves)."""
    groups = kube.get(f"/apis/{SVM_GROUP}")
    preferred = groups["preferredVersion"]["version"]
    return preferred, f"{SVM_GROUP}: served {[v['version'] for v in groups['versions']]}, preferred {preferred}"


class InTree:
    def __init__(self, bench, svm_version: str):
        self.bench = bench
        self.svm_version = svm_version

    def argv(self, port: int) -> list:
        kc = str(self.bench.migrator_kubeconfig)
        return [str(self.bench.binaries.kube_controller_manager), f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}", f"--authorization-kubeconfig={kc}", "--leader-elect=false",
                "--controllers=garbage-collector-controller,namespace-controller,storage-version-migrator-controller",
                "--bind-address=127.0.0.1", f"--secure-port={port}", "-v=2"]

    def wait_healthy(self, kcm, port: int, log) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # KCM's self-signed serving certificate
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline or not kcm.alive():
                raise RuntimeError(f"kube-controller-manager not healthy; log {log}")
            time.sleep(0.2)

    @staticmethod
    def wait_gc_synced(log, timeout: float = 120) -> None:
        """The migrator reads objects from the garbage collector's graph: wait for its caches."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace").lower()
            if "synced garbage collector" in text or "all resource monitors have synced" in text:
                return
            time.sleep(0.2)

    def svm(self, group: str) -> tuple[str, dict]:
        body = {"apiVersion": f"{SVM_GROUP}/{self.svm_version}", "kind": "StorageVersionMigration",
                "metadata": {"name": f"bench-{group.split('.')[0]}"},
                "spec": {"resource": {"group": group, "resource": data.PLURAL}}}
        if self.svm_version == "v1alpha1":
            body["spec"]["resource"]["version"] = "v1beta1"
        return f"/apis/{SVM_GROUP}/{self.svm_version}/storageversionmigrations", body

    def follow(self, base: str, name: str, group: str, t0: float) -> dict:
        """Poll the StorageVersionMigration (created at t0) until Succeeded or Failed."""
        kube, etcd_url = self.bench.kube, self.bench.cluster.etcd_url
        state, note, t_running, revisions = None, "", None, []
        while time.monotonic() < t0 + 3600:
            revisions.append((time.monotonic(), data.revision(etcd_url)))
            conds = {c["type"]: c for c in (kube.get(f"{base}/{name}").get("status") or {}).get("conditions") or []}
            if t_running is None and conds:
                t_running = time.monotonic()
            if conds.get("Succeeded", {}).get("status") == "True":
                state = "Succeeded"
                break
            if conds.get("Failed", {}).get("status") == "True":
                state, note = "Failed", conds["Failed"].get("message", "")
                break
            time.sleep(POLL)
        t1 = time.monotonic()
        first = data.first_write_revision(etcd_url, group)
        t_work = max([t for t, rev in revisions if rev < first], default=t0)
        return {"seconds": t1 - t0, "t0": t0, "t1": t1, "active_seconds": t1 - (t_running or t0),
                "t_running": t_running or t0, "t_work": t_work, "work_seconds": t1 - t_work,
                "note": "" if state == "Succeeded" else f"SVM {state}: {note}"}

    def migrate(self, group: str, ready=lambda: None) -> dict:
        from tests.controlplane.processes import ManagedProcess, free_port

        # the idle window comes before KCM starts, like every contender's; and the SVM is created as soon as the
        # garbage collector has synced, since any write in the cluster after its initial LIST of the resource
        # makes the controller wait for the GC cache (up to a watch bookmark, about a minute)
        ready()
        port = free_port()
        log = self.bench.workdir / "logs" / f"kcm-{group}.log"
        kcm = ManagedProcess("kube-controller-manager", self.argv(port), log).start()
        try:
            self.wait_healthy(kcm, port, log)
            self.wait_gc_synced(log)
            base, body = self.svm(group)
            t0 = time.monotonic()
            self.bench.kube.post(base, body)
            return self.follow(base, body["metadata"]["name"], group, t0)
        finally:
            kcm.stop()

"""Drain before the proof (DESIGN invariant 12) on a real control plane, with our slow admission webhook.

Release N-1 stores v1alpha1 and already serves v1beta1; a validating webhook (failurePolicy Fail, timeoutSeconds
30) holds chosen UPDATEs, as webhooks under load do; a few objects are being updated (a label change) at the
moment release N flips the storage to v1beta1. kube-apiserver gives a request the storage the CRD had when the
request began, for its whole life: the held updates commit old-version bytes whenever they are let go. Every
claim is checked by reading every key from etcd.
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.controlplane.etcd_reader import scan_storage
from tests.controlplane.kube import Kube, objects_path
from tests.controlplane.webhook import Holds, WebhookServer, hold_updates_webhook, storage_version
from tests.integration.modrun import ansible_playbook, auth_args, run_module
from tests.integration.seed import Seeded, create_objects, crd_at

REPO = Path(__file__).resolve().parents[2]
COUNT = 20
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@pytest.fixture()
def webhook(cluster, tmp_path):
    server = WebhookServer(cluster.pki, tmp_path / "webhook").start()
    yield server
    server.stop()


def seed_with_holds(kube: Kube, webhook: WebhookServer, group: str, see_the_flip: bool = False) -> Seeded:
    """COUNT objects at v1alpha1 (v1beta1 served, not stored) behind the holding webhook; ``see_the_flip``: the
    webhook also sees the CRD's updates (Holds.before_storage_change)."""
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1"))
    create_objects(kube, s, "v1alpha1", COUNT, ["ns-a"])
    name = "hold-" + group.split(".")[0]
    kube.post(WEBHOOKS, hold_updates_webhook(name, webhook, group, s.plural,
                                             crd_name=s.crd_name if see_the_flip else None))
    time.sleep(1.0)  # the admission plugin loads webhook configurations from its informer
    return s


class HeldUpdates:
    """Label updates of ``names`` held by the webhook until ``gates[name]`` opens. ``every``: a new wave of them every
    so many seconds until :meth:`stop` (a hold lasts at most Holds.max_hold, under the webhook's 30 s timeout, so
    waves keep updates begun before a flip in flight however long a role takes to reach it); None: one wave."""

    def __init__(self, kube: Kube, s: Seeded, gates: dict[str, str], version: str = "v1alpha1",
                 every: float | None = None):
        self.kube, self.s, self.gates, self.version, self.every = kube, s, gates, version, every
        self.threads: list[threading.Thread] = []
        self.results: dict[str, object] = {}
        self.waves = 0
        self._stop = threading.Event()
        self._launcher = threading.Thread(target=self._launch, daemon=True)
        self._launcher.start()

    def _update(self, name: str, value: str) -> None:
        path = objects_path(self.s.group, self.version, self.s.plural, "ns-a", name)
        try:
            self.results[value + "/" + name] = self.kube.merge_patch(
                path, {"metadata": {"labels": {Holds.HOLD_LABEL: value}}})
        except Exception as exc:  # asserted in finish()
            self.results[value + "/" + name] = exc

    def _launch(self) -> None:
        while True:
            self.waves += 1
            for name, gate in self.gates.items():
                t = threading.Thread(target=self._update, args=(name, f"{gate}-w{self.waves}"), daemon=True)
                t.start()
                self.threads.append(t)
            if self.every is None or self._stop.wait(self.every):
                return

    def stop(self) -> None:
        self._stop.set()
        self._launcher.join()

    def finish(self, holds: Holds) -> dict[str, object]:
        """Let whatever is still held commit; the updates that failed (held past max_hold: refused, never
        committed), by wave/object."""
        self.stop()
        for gate in set(self.gates.values()):
            holds.open(gate)
        for t in self.threads:
            t.join(timeout=40)
        assert len(self.results) == len(self.gates) * self.waves, self.results
        return {k: v for k, v in self.results.items() if isinstance(v, Exception)}


def drop_webhook(kube: Kube, group: str) -> None:
    kube.delete(f"{WEBHOOKS}/hold-{group.split('.')[0]}")


def migrate(cluster, s: Seeded, **extra) -> dict:
    return run_module("crd_storage_migrate", dict(auth_args(cluster), names=[s.crd_name], **extra))


def etcd_counts(cluster, s: Seeded) -> dict:
    return dict(scan_storage(cluster.etcd_url, s.group, s.plural).counts)


def record_of(kube: Kube, s: Seeded) -> dict | None:
    text = (kube.get_crd(s.crd_name)["metadata"].get("annotations") or {}).get("migration.crdops.io/storage-migration")
    return json.loads(text) if text else None


# objects whose updates the webhook holds: they commit 2.5 s and 6.9 s after the flip, and (t9.5) after a pass
# (at barrier_settle 0) has written them
ROWS = {"obj-000002": "t2.5", "obj-000005": "t2.5", "obj-000008": "t6.9", "obj-000011": "t6.9",
        "obj-000014": "t9.5", "obj-000017": "t9.5"}


def test_the_module_drains_updates_begun_before_the_flip(cluster, kube, group, webhook):
    """barrier_settle 0, a drain window longer than the holds: the record is written and every key is current.
    Without the drain the pass writes the 6 objects first and their held updates put v1alpha1 back."""
    s = seed_with_holds(kube, webhook, group)
    updates = HeldUpdates(kube, s, ROWS)
    webhook.holds.wait_held(len(ROWS))
    flipped = time.monotonic()
    for gate in set(ROWS.values()):
        webhook.holds.open_at(gate, flipped + float(gate[1:]))
    kube.apply_crd(crd_at(s, "v1beta1"))
    try:
        out = migrate(cluster, s, barrier_settle=0, drain_window=11)
    finally:
        refused = updates.finish(webhook.holds)
        drop_webhook(kube, group)
    assert not refused and webhook.holds.released >= len(ROWS)  # an update that conflicts is admitted again
    assert not out.get("failed"), out.get("msg")
    entry = out["crds"][0]
    assert entry["record_written"] and entry["drain"]["anchor"] == "flip" and entry["drain"]["waited_s"] > 5, entry
    assert entry["proof"]["kind"] == "confirming-pass" and entry["proof"]["ok"], entry["proof"]
    assert record_of(kube, s)["proof"] == "confirming-pass"
    # every held update committed (its label is there) and every key is at the storage version
    labelled = [o for o in kube.get(objects_path(group, "v1beta1", s.plural))["items"]
                if Holds.HOLD_LABEL in (o["metadata"].get("labels") or {})]
    assert len(labelled) == len(ROWS)
    assert etcd_counts(cluster, s) == {s.new(): COUNT}


def gated_by_our_passes(holds: Holds, held: list[str]) -> dict[str, str]:
    """Let the k-th held object's update go when confirming pass k writes that object, and let that write through
    only after the update committed: each of the 3 confirming passes finds an object put back at v1alpha1. (Gated
    on the pass's first object instead, a loaded machine let the update commit after the pass had written the held
    object, and the last pass came out clean.)"""
    gates = {}
    for k, name in enumerate(held, start=1):
        gates[name] = f"g{k}"
        holds.open_on_noop(f"g{k}", name, k + 1, before_it=True)  # its first no-op write is the re-store's
    return gates


def test_updates_held_past_the_drain_window_leave_no_record(cluster, kube, group, webhook):
    """A drain window shorter than the holds (1 s): the first pass writes before the held updates commit; each
    confirming pass finds an object one of them put back at v1alpha1, so after 3 passes there is no record.
    The updates are at v1beta1 (served before the flip): their managedFields entries need no fix, so only the
    stored bytes differ, and only the resourceVersion our write changes shows it."""
    s = seed_with_holds(kube, webhook, group)
    held = ["obj-000017", "obj-000018", "obj-000019"]
    gates = gated_by_our_passes(webhook.holds, held)
    updates = HeldUpdates(kube, s, gates, "v1beta1")
    webhook.holds.wait_held(len(held))
    kube.apply_crd(crd_at(s, "v1beta1"))
    try:
        out = migrate(cluster, s, barrier_settle=0, drain_window=1, page_size=5, workers=2, max_qps=20)
    finally:
        updates.finish(webhook.holds)
        drop_webhook(kube, group)
    assert out.get("failed"), out
    entry = out["crds"][0]
    assert not entry["record_written"] and record_of(kube, s) is None
    assert "3 confirming passes" in out["msg"] and s.crd_name in out["msg"], out["msg"]
    assert len(entry["proof"]["passes"]) == 3 and all(p["changed"] >= 1 for p in entry["proof"]["passes"]), entry["proof"]
    trim = run_module("crd_stored_versions_trim", dict(auth_args(cluster), names=[s.crd_name]))
    assert trim.get("failed") and kube.get_crd(s.crd_name)["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]


def run_role(cluster, tmp_path: Path, s: Seeded, **host_vars) -> object:
    for name, doc in (("release-n", crd_at(s, "v1beta1")), ("release-next", crd_at(s, "v1beta1", ("v1beta1",)))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "crd.yaml").write_text(yaml.safe_dump(doc))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(tmp_path / "release-n" / "crd.yaml")],
            "crd_upgrade_target_manifests": [str(tmp_path / "release-next" / "crd.yaml")],
            "crd_upgrade_crd_names": [s.crd_name]}
    host.update(host_vars)
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"clusters": {"hosts": {
        "drain-cluster": host}}}}}))
    extra = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "report")})
    return ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra)


def stores(kube: Kube, s: Seeded, version: str = "v1beta1") -> bool:
    """The CRD's storage version is ``version`` now."""
    return storage_version(kube.get_crd(s.crd_name)) == version


def on_flip(kube: Kube, s: Seeded, then, timeout: float = 120.0) -> threading.Thread:
    """Call ``then(monotonic time)`` as soon as the role's release N has flipped the storage to v1beta1."""
    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if stores(kube, s):
                then(time.monotonic())
                return
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_the_role_at_defaults_drains_then_trims_and_applies_the_next_release(cluster, kube, group, webhook, tmp_path):
    """The role with its defaults (drain 65 s, settle 5 s, no etcd URL): updates held across the flip commit 8.8 s
    after it; the run ends ok, trimmed, N+1 applied, every key at v1beta1."""
    s = seed_with_holds(kube, webhook, group)
    gates = dict.fromkeys(["obj-000003", "obj-000006", "obj-000009", "obj-000012", "obj-000015", "obj-000018"],
                          "t8.8")
    updates = HeldUpdates(kube, s, gates, every=8.0)
    webhook.holds.wait_held(len(gates))

    def flipped(at: float) -> None:  # the waves in flight now began before the flip: they commit 8.8 s after it
        updates.stop()
        webhook.holds.open_at("t8.8", at + 8.8)
    watcher = on_flip(kube, s, flipped)
    try:
        # the held updates are this test's own client writing at v1alpha1 during the run: the role names it as a
        # client of the version N+1 removes and would hold N+1 back; accepted, as what is tested here is the drain
        proc = run_role(cluster, tmp_path, s, crd_upgrade_accept_broken_clients=True)
    finally:
        watcher.join(timeout=1)
        updates.finish(webhook.holds)
        drop_webhook(kube, group)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert "proof confirming-pass" in proc.stdout, proc.stdout[-6000:]
    assert "other clients' GET" in proc.stdout, proc.stdout[-6000:]  # the pass says what its latency probe saw
    assert webhook.holds.opened["t8.8"] and webhook.holds.released >= len(gates)  # held across the flip
    crd = kube.get_crd(s.crd_name)
    assert crd["status"]["storedVersions"] == ["v1beta1"]
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    assert etcd_counts(cluster, s) == {s.new(): COUNT}
    assert len(kube.get(objects_path(group, "v1beta1", s.plural))["items"]) == COUNT


def test_the_role_stops_before_the_trim_when_updates_are_held_past_the_drain(cluster, kube, group, webhook, tmp_path):
    """The role with a drain window shorter than the holds (1 s): updates begun before the role's flip commit
    old-version bytes during its confirming passes, so the re-store ends without a record; the run fails in that
    phase, names the CRD and why, and trims nothing: storedVersions and release N's versions stay.
    The updates start inside the admission of the role's flip and are held before it goes on: they began under the
    old storage, and their holds (26 s at most) run from the flip. (Waves of them started on a timer while the role
    got there left it to chance which storage the update held last had, and a clean pass came out under load.)"""
    s = seed_with_holds(kube, webhook, group, see_the_flip=True)
    held = ["obj-000017", "obj-000018", "obj-000019"]
    gates = gated_by_our_passes(webhook.holds, held)
    started: list[HeldUpdates] = []

    def before_the_flip() -> None:
        started.append(HeldUpdates(kube, s, gates, "v1beta1"))
        webhook.holds.wait_held(len(held))
    webhook.holds.before_storage_change(s.crd_name, before_the_flip)
    try:
        proc = run_role(cluster, tmp_path, s, crd_upgrade_drain_window=1, crd_upgrade_settle_seconds=0,
                        crd_upgrade_page_size=5, crd_upgrade_workers=2, crd_upgrade_max_qps=20,
                        crd_upgrade_writers_window=0)
    finally:
        for updates in started:
            updates.finish(webhook.holds)
        drop_webhook(kube, group)
    out = proc.stdout + proc.stderr
    assert started, "the role's flip never reached the webhook: " + out[-3000:]
    assert proc.returncode != 0, out[-6000:]
    assert webhook.holds.released >= 1, "no held update committed during the run: the test proved nothing"
    assert "3 confirming passes" in out and s.crd_name in out, out[-6000:]
    assert record_of(kube, s) is None
    crd = kube.get_crd(s.crd_name)
    assert crd["status"]["storedVersions"] == ["v1alpha1", "v1beta1"]
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"]  # release N+1 not applied
    assert sum(etcd_counts(cluster, s).values()) == COUNT
    report = json.loads((tmp_path / "report" / "latest" / "fleet-report.json").read_text())
    (host,) = report["clusters"]
    assert host["failed_phase"] == "restore" and "3 confirming passes" in host["cause"], host["cause"]
    assert not host["crds"][0]["trimmed"] and not host["crds"][0]["upgraded"]

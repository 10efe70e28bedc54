"""No client left behind: clients that keep server-side applying at v1alpha1 while the role runs are named before
release N+1 (which removes v1alpha1) and N+1 is held back for the CRD (the run ends ok with status `held back`), and
so is an applier whose last apply at v1alpha1 was before the run (its entry is its source's declaration at any age);
with crd_upgrade_accept_broken_clients naming them all the rerun applies N+1, lists the clients as broken in
crd_upgrade_result and the fleet report, and leaves no managedFields entry at v1alpha1 (entries are translated
before and after N+1).

The clients are real, built from Go modules (tests/clients): kubectl (`k8s.io/kubectl`) running
`kubectl apply --server-side` at v1alpha1 without `--field-manager`, so under kubectl's own default manager
`kubectl`, and Flux's apply library (`fluxcd/pkg/ssa` ApplyAllStaged, manager `kustomize-controller`) on two
other objects. kubectl and Flux (a dry-run and an apply per round) each start a round every second; each
round changes `.spec.size` as a deployer bumping a replica count would (an unchanged apply writes nothing, so it
would leave no fresh managedFields time). Both show in the apiserver's request counters at v1alpha1 as APPLY.
"""
from __future__ import annotations

import json
import re
import threading
import time

from tests.clients import DEFAULT_KUSTOMIZATION, FLUX_MANAGER, ApplyLoop, Flux, Kubectl, flux_apply_loop, kubectl_apply_loop
from tests.controlplane import etcd_reader
from tests.controlplane.kube import KubeError, objects_path
from tests.integration.modrun import auth_args, run_module
from tests.integration.seed import Seeded, crd_at
from tests.integration.test_client_check import ssa
from tests.integration.test_role_managed_fields import run_role

COUNT = 6
KUBECTL_MANAGER = "kubectl"  # what `kubectl apply --server-side` sends as fieldManager when none is given
# how a client says that the version it applies at is gone: the apiserver's 404 (kubectl, discovery cached),
# or its REST mapper finding no such version
GONE = re.compile(r"NotFound|not found|no matches for kind", re.IGNORECASE)
WRITTEN = {KUBECTL_MANAGER: ("w-00", "w-01"), FLUX_MANAGER: ("w-02", "w-03")}  # the objects each client applies
FLUXED = len(WRITTEN[FLUX_MANAGER])  # objects that name a source: the Kustomization Flux labels them with
OPERATOR, OPERATED, PERIOD = "widget-ctrl", ("w-04", "w-05"), 20.0  # an old operator's plain updates at v1alpha1


class Operator(threading.Thread):
    """An operator built against v1alpha1: from the moment release N is seen on the CRD (storage v1beta1, so after
    the role's discover, whatever the machine's load), every PERIOD seconds a merge patch (an Update, not an apply)
    of a label on its objects, sent at v1alpha1 under its own field manager; errors (the version gone) are counted,
    as its reconcile loop would log them."""

    def __init__(self, kube, s: Seeded):
        super().__init__(daemon=True)
        self.kube, self.s = kube, s
        self.stopped = threading.Event()
        self.writes, self.errors = 0, 0

    def release_n_applied(self) -> bool:
        versions = self.kube.get_crd(self.s.crd_name)["spec"]["versions"]
        return any(v["name"] == "v1beta1" and v.get("storage") for v in versions)

    def run(self) -> None:
        while not self.stopped.wait(0.2) and not self.release_n_applied():
            pass
        delay, n = 0.0, 0
        while not self.stopped.wait(delay):
            n, delay = n + 1, PERIOD
            for name in OPERATED:
                try:
                    self.kube.request("PATCH", objects_path(self.s.group, "v1alpha1", self.s.plural, "apps", name),
                                      {"metadata": {"labels": {"reconciled": str(n)}}},
                                      "application/merge-patch+json", query={"fieldManager": OPERATOR})
                    self.writes += 1
                except KubeError:
                    self.errors += 1


def sized(s: Seeded, names: tuple[str, ...]):
    """Iteration n's manifests at v1alpha1: `.spec.size` changes every time, so every apply writes."""
    def docs(n: int) -> list[dict]:
        return [{"apiVersion": f"{s.group}/v1alpha1", "kind": s.kind, "metadata": {"name": name, "namespace": "apps"},
                 "spec": {"size": 100 + n}} for name in names]
    return docs


def wait_for_round(loop: ApplyLoop, since: float, timeout: float = 30.0) -> None:
    """Until an apply that began after `since` has finished."""
    deadline = time.time() + timeout
    while not any(o.started > since for o in loop.outcomes):
        assert time.time() < deadline, (loop.name, loop.outcomes[-3:])
        time.sleep(0.2)


def entries_at(kube, s: Seeded, version: str) -> list[tuple[str, str]]:
    items = kube.get(objects_path(s.group, "v1beta1", s.plural))["items"]
    return [(o["metadata"]["name"], e["manager"]) for o in items for e in o["metadata"].get("managedFields") or []
            if e.get("apiVersion") == f"{s.group}/{version}"]


def test_clients_writing_at_the_removed_version_hold_release_next_back_unless_accepted(cluster, kube, group, tmp_path):
    s = Seeded(group, "widgets", "Widget", "Namespaced")
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",)))
    kube.ensure_namespace("apps")
    for i in range(COUNT):
        ssa(kube, s, "v1alpha1", "apps", f"w-{i:02d}", "argocd-controller", {"color": "blue"})
    # Argo CD in sync: its last apply an hour before the run. The apiserver keeps the times a client sends in
    # managedFields when the same write changes something else (a write that changes only times is dropped as a
    # no-op), so the entries are set back together with a label, as a one-time edit by another manager
    an_hour_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    for i in range(COUNT):
        path = objects_path(s.group, "v1alpha1", s.plural, "apps", f"w-{i:02d}")
        entries = kube.get(path)["metadata"]["managedFields"]
        kube.request("PATCH", path, [{"op": "replace", "path": "/metadata/managedFields",
                                      "value": [dict(e, time=an_hour_ago) for e in entries]},
                                     {"op": "add", "path": "/metadata/labels", "value": {"synced": "earlier"}}],
                     "application/json-patch+json", query={"fieldManager": "labeller"})
    release_n, release_next = crd_at(s, "v1beta1"), crd_at(s, "v1beta1", ("v1beta1",))
    for sub in ("first", "accepted"):
        (tmp_path / sub).mkdir()
    context = cluster.contexts()[0]
    loops = [kubectl_apply_loop(Kubectl(cluster.kubeconfig, context), sized(s, WRITTEN[KUBECTL_MANAGER]), 1.0,
                                field_manager=None),
             # every second like kubectl: a client is named by managedFields only if it writes again between the
             # managedFields pass (which moves its entries to v1beta1, time kept) and the writers scan
             flux_apply_loop(Flux(cluster.kubeconfig, context), sized(s, WRITTEN[FLUX_MANAGER]), 1.0)]
    # its first write comes when the role applies release N (after discover), then one every 20 s: the re-store
    # keeps its entry at v1alpha1 (written since discover) for the check, however the writes and the re-store
    # interleave. A write before discover would be a leftover the re-store translates, as for any older entry
    operator = Operator(kube, s)
    for loop in loops:
        loop.start()
    operator.start()
    try:
        # the preflight is proven elsewhere; the refused run's report is not read
        proc = run_role(cluster, tmp_path / "first", s, release_n, release_next, crd_upgrade_writers_window=2,
                        crd_upgrade_preflight=False)
        assert proc.returncode == 0, proc.stdout[-4000:]  # held back is not a failure: everything else is done
        out = proc.stdout
        assert "release N+1 held back for 1 CRDs" in out, out[-4000:]
        # cluster, CRD, client, object count, last write; and the requests at v1alpha1 on the apiserver
        for text in ("cluster mf-cluster", s.crd_name, "requests at v1alpha1 served by", "APPLY",
                     "crd_upgrade_accept_broken_clients", "fix: move these sources to v1beta1",
                     *(f"applier {m} (declares at v1alpha1) on 2 objects, last write" for m in WRITTEN),
                     # applied once, before the run: its source still says v1alpha1 as much as the others'; one
                     # client per source, so on the objects Flux labels with its Kustomization it is named apart
                     f"applier argocd-controller (declares at v1alpha1) on {COUNT - FLUXED} objects, last write "
                     f"{an_hour_ago}",
                     f"applier argocd-controller (declares at v1alpha1) on {FLUXED} objects, last write "
                     f"{an_hour_ago} (e.g. apps/w-02, apps/w-03); source: Flux Kustomization {DEFAULT_KUSTOMIZATION}",
                     f"manager {OPERATOR} (Update at v1alpha1) on {len(OPERATED)} objects"):
            assert text in out, (text, out[-4000:])
        report = json.loads(sorted((tmp_path / "first" / "report").rglob("fleet-report.json"))[0].read_text())
        [held] = [c for c in report["clusters"] if c["cluster"] == "mf-cluster"]
        assert held["status"] == "held back" and [h["crd"] for h in held["held_back"]] == [s.crd_name], held
        crd = kube.get_crd(s.crd_name)
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1", "v1beta1"]  # N+1 not applied
        assert crd["status"]["storedVersions"] == ["v1beta1"]  # the run got as far as the trim

        # check mode (the module as the role runs it there): the writers of the last hour, nothing failed
        listed = run_module("crd_client_check", dict(auth_args(cluster), check="writers", names=[s.crd_name],
                                                     removed_versions={s.crd_name: ["v1alpha1"]}, metrics_window=0,
                                                     fail_on_error=False), check_mode=True)
        assert listed["_rc"] == 0 and listed["ok"] is False and listed["held_back"] == [s.crd_name], listed
        assert sorted((c["manager"], c["objects"], c["seen_in"]) for c in listed["broken_clients"]) == sorted(
            [(m, 2, "managedFields") for m in WRITTEN] + [("argocd-controller", COUNT - FLUXED, "managedFields"),
                                                          ("argocd-controller", FLUXED, "managedFields"),
                                                          (OPERATOR, len(OPERATED), "managedFields")]), \
            listed["broken_clients"]
        assert listed["writers"]["metrics"] == "not measured: metrics_window is 0"

        # accepted by name: the three appliers (Flux's by the Kustomization its objects name: a manager's name covers
        # only objects that name no source), and the requests the counters saw
        proc = run_role(cluster, tmp_path / "accepted", s, release_n, release_next, crd_upgrade_writers_window=2,
                        crd_upgrade_preflight=False,
                        crd_upgrade_accept_broken_clients=[KUBECTL_MANAGER, DEFAULT_KUSTOMIZATION, "argocd-controller",
                                                           OPERATOR, "requests"])
        assert proc.returncode == 0, proc.stdout[-6000:]
        applied = time.time()
        for loop in loops:  # each client's next round: it is broken now
            wait_for_round(loop, applied)
    finally:
        operator.stopped.set()
        for loop in loops:
            loop.stop()
    for loop in loops:
        assert loop.succeeded > 0 and not loop.outcomes[-1].ok, (loop.name, loop.outcomes[-3:])
        assert GONE.search(loop.outcomes[-1].detail), (loop.name, loop.outcomes[-1])
    assert any(f"{m} of versions release N+1 removes" in proc.stdout for m in WRITTEN) \
        or "clients of versions release N+1" in proc.stdout
    crd = kube.get_crd(s.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"]
    assert entries_at(kube, s, "v1alpha1") == []
    report = json.loads(sorted((tmp_path / "accepted" / "report").rglob("fleet-report.json"))[0].read_text())
    [result] = [c for c in report["clusters"] if c["cluster"] == "mf-cluster"]
    assert result["broken_clients_accepted"] is True
    for manager in WRITTEN:
        named = [c for c in result["broken_clients"] if c.get("manager") == manager]
        assert named and named[0]["crd"] == s.crd_name and named[0]["version"] == "v1alpha1" \
            and named[0]["objects"] == 2, (manager, result["broken_clients"])
    assert any(c["seen_in"] == "metrics" and c["requests"] > 0 for c in result["broken_clients"])
    scan = etcd_reader.scan_storage(cluster.etcd_url, group, s.plural)
    assert scan.total == COUNT and dict(scan.counts) == {s.new(): COUNT}

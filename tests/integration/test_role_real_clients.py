"""Real GitOps clients keep working across the role's upgrade (release N+1 removes v1alpha1), in the order the
role enforces: their sources move to v1beta1 before v1alpha1 goes.

The clients are not written here: Flux's apply library (`fluxcd/pkg/ssa` ApplyAllStaged, manager
`kustomize-controller`), kubectl (`k8s.io/kubectl`) and Helm v4 (`helm.sh/helm/v4`), all built from Go modules
(tests/clients). Objects at v1alpha1: some applied by Flux (with the Kustomization labels kustomize-controller
sets), some by `kubectl apply --server-side --field-manager=argocd-controller` (with Argo CD's tracking
annotation), some by client-side `kubectl apply`, some POSTed, some installed by a Helm chart. Each column's CRD
(a group each, on the shared cluster) goes through two role runs:

1. the sources still say v1alpha1: the re-store, its proof and the trim are done, release N+1 is held back (status
   `held back`, rc 0) naming every applier, the Helm release and their sources with the version; each applier's
   unchanged v1alpha1 re-apply and `helm upgrade` of the same chart still work;
2. every source but one moves to v1beta1 (the same content in v1beta1's names). Flux's objects come from two
   Kustomizations (the real CRD from kustomize-controller's module, each with the inventory kustomize-controller
   writes from its apply's change set): `apps` moves by its apiVersion line only, which Flux does not even send
   (no drift), `legacy` does not move. The rerun, with `apps` accepted as the old fix text said, still holds N+1
   back, naming `legacy` only, and warns that accepting `apps` accepts nothing: its inventory says v1beta1;
3. `legacy` moves too, and the next run applies N+1 with nothing accepted.

Then every client re-applies at v1beta1 with one value changed and one optional field removed, and: every client
applies without force; the changed values land; the dropped field is pruned for every client (for client-side
apply by kubectl's own last-applied annotation, now at v1beta1); a third manager's non-forced apply conflicts
naming the owner; no `before-first-apply` entry exists; an unchanged re-apply writes nothing; `helm upgrade`
works; etcd holds every key at v1beta1 (exact counts).
"""
from __future__ import annotations

import json
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.clients import Flux, FluxResult, Helm, Kubectl, Kustomizations, kustomization_crd, write_chart
from tests.controlplane import etcd_reader
from tests.controlplane.kube import make_crd, objects_path
from tests.controlplane.webhook import WebhookServer, conversion_spec, widget_schemas
from tests.integration import reliability
from tests.integration.modrun import ansible_playbook

REPO = Path(__file__).resolve().parents[2]
NS = "apps"
# objects per client, exact: Flux, kubectl server-side (Argo CD's manager), kubectl client-side, plain POST, Helm
COUNTS = {"flux": 8, "argo": 8, "csa": 4, "post": 4, "helm": 3}
TOTAL = sum(COUNTS.values())
OWNER = {"flux": "kustomize-controller", "argo": "argocd-controller", "csa": "kubectl-client-side-apply",
         "post": "poster", "helm": "helm"}
APPLY_CLIENTS = ("flux", "argo")  # the clients that own fields as an Apply manager
# the Kustomizations the Flux client labels its objects with (as kustomize-controller does; one pair per column),
# the objects each applies, and the Argo CD Application named in the tracking annotation: the sources to edit
FLUX_SHARE = {"apps": 5, "legacy": 3}
ARGO_APP = "shop"
RELEASE_PREFIX = "app-"  # one Helm release per column


def _obj(**props) -> dict:
    return {"type": "object", "properties": props}


STR, INT = {"type": "string"}, {"type": "integer"}


@dataclass(frozen=True)
class Column:
    """One CRD and the manifests its clients apply: `before` at v1alpha1, `after` at v1beta1."""
    name: str
    group: str
    plural: str = "widgets"
    kind: str = "Widget"
    conversion: dict | None = None  # spec.conversion of release N (N+1 serves one version and needs none)

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    def resource(self) -> str:
        return f"{self.plural}.v1beta1.{self.group}"

    def path(self, version: str, name: str | None = None) -> str:
        return objects_path(self.group, version, self.plural, NS, name)

    def doc(self, version: str, name: str, spec: dict) -> dict:
        return {"apiVersion": f"{self.group}/{version}", "kind": self.kind,
                "metadata": {"name": name, "namespace": NS}, "spec": spec}

    def crd(self, storage: str, served: tuple[str, ...]) -> dict:
        crd = make_crd(self.group, self.plural, self.kind, [(v, True, v == storage) for v in served])
        for v in crd["spec"]["versions"]:
            v["schema"] = {"openAPIV3Schema": self.schema(v["name"])}
        if self.conversion and len(served) > 1:
            crd["spec"]["conversion"] = self.conversion
        return crd

    # per column ---------------------------------------------------------------------------------
    def schema(self, version: str) -> dict:
        raise NotImplementedError

    def before(self, i: int) -> dict:
        raise NotImplementedError

    def after(self, i: int) -> dict:
        raise NotImplementedError

    def changed(self, spec: dict) -> object:
        """The value that `after` changed, read from a v1beta1 spec."""
        raise NotImplementedError

    def dropped_present(self, spec: dict) -> bool:
        """Whether the optional field that `after` no longer declares is still in a v1beta1 spec."""
        raise NotImplementedError

    def patch_after(self, i: int) -> dict:
        """The POSTing client's re-write at v1beta1: a merge patch with the same change and removal."""
        raise NotImplementedError

    def third_manager(self, i: int) -> dict:
        """A spec that changes the value every client set (to conflict with its owner)."""
        raise NotImplementedError

    def moved(self, i: int) -> dict:
        """``before`` in v1beta1's names: what a source says once it has moved, with nothing else changed."""
        raise NotImplementedError

    def doc_for(self, client: str, version: str, name: str, spec: dict) -> dict:
        """A client's manifest, with the annotation Argo CD adds (the Flux client labels its objects itself)."""
        doc = self.doc(version, name, spec)
        if client == "argo":
            doc["metadata"]["annotations"] = {
                "argocd.argoproj.io/tracking-id": f"{ARGO_APP}:{self.group}/{self.kind}:{NS}/{name}"}
        return doc

    @property
    def release(self) -> str:
        return RELEASE_PREFIX + self.name.lower()

    def kustomization(self, which: str) -> str:
        """The Kustomization ``which`` (apps, legacy) of this column's Flux objects, as namespace/name."""
        return f"flux-system/{which}-{self.name.lower()}"


class NoneColumn(Column):
    """conversion None: v1alpha1 and v1beta1 have the same fields."""

    def schema(self, version: str) -> dict:
        spec = _obj(size=INT, color=STR, tier=STR)
        return _obj(apiVersion=STR, kind=STR, metadata={"type": "object"}, spec=spec)

    def before(self, i: int) -> dict:
        return {"size": i, "color": "blue", "tier": "gold"}

    def after(self, i: int) -> dict:
        return {"size": i + 100, "color": "blue"}

    def changed(self, spec: dict) -> object:
        return spec.get("size")

    def dropped_present(self, spec: dict) -> bool:
        return "tier" in spec

    def patch_after(self, i: int) -> dict:
        return {"spec": {"size": i + 100, "tier": None}}

    def third_manager(self, i: int) -> dict:
        return {"size": 7}

    def moved(self, i: int) -> dict:
        return self.before(i)


class WebhookColumn(Column):
    """conversion Webhook (tests/controlplane/webhook.py): spec.size is renamed spec.replicas, the often equal
    spec.primaryZone / spec.backupZone move to spec.zones.primary / .backup, the list-map spec.ports changes
    its key from `name` to `portName`, and spec.endpoint is split into spec.host and spec.port."""

    def schema(self, version: str) -> dict:
        return widget_schemas()[version]

    def before(self, i: int) -> dict:
        return {"size": i, "color": "blue", "primaryZone": "eu-1", "backupZone": "eu-1",
                "ports": [{"name": "http", "number": 8080}], "endpoint": f"svc-{i}:8080"}

    def after(self, i: int) -> dict:
        return {"replicas": i + 100, "color": "blue", "zones": {"primary": "eu-1"},
                "ports": [{"portName": "http", "number": 8080}], "host": f"svc-{i}", "port": "8080"}

    def changed(self, spec: dict) -> object:
        return spec.get("replicas")

    def dropped_present(self, spec: dict) -> bool:
        return "backup" in (spec.get("zones") or {})

    def patch_after(self, i: int) -> dict:
        return {"spec": {"replicas": i + 100, "zones": {"backup": None}}}

    def third_manager(self, i: int) -> dict:
        return {"replicas": 7}

    def moved(self, i: int) -> dict:
        return {"replicas": i, "color": "blue", "zones": {"primary": "eu-1", "backup": "eu-1"},
                "ports": [{"portName": "http", "number": 8080}], "host": f"svc-{i}", "port": "8080"}


def object_names(client: str) -> list[str]:
    return [f"{client}-{i:02d}" for i in range(COUNTS[client])]


def manifests_at(col: Column, version: str, spec_of) -> dict[str, list[dict]]:
    return {c: [col.doc_for(c, version, n, spec_of(i)) for i, n in enumerate(object_names(c))] for c in COUNTS}


@dataclass
class Clients:
    kubectl: Kubectl
    flux: Flux
    helm: Helm
    charts: Path
    kustomizations: Kustomizations


def reconcile_flux(clients: Clients, col: Column, docs: list[dict], revision: str) -> FluxResult:
    """Each Kustomization of the column applies its share of ``docs``, and its status then says what
    kustomize-controller writes after that reconcile (the inventory of the apply's change set); one result."""
    results, start = [], 0
    for which, count in FLUX_SHARE.items():
        ref = col.kustomization(which)
        res = clients.flux.apply(docs[start:start + count], kustomization=ref)
        start += count
        if res.ok:
            clients.kustomizations.reconciled(ref, res.inventory, revision)
        results.append(res)
    return FluxResult(max(r.returncode for r in results), [o for r in results for o in r.objects],
                      sum(r.applied for r in results), sum(r.changed for r in results),
                      "; ".join(r.error for r in results if r.error), "".join(r.stderr for r in results),
                      [e for r in results for e in r.inventory])


def revision(version: str) -> str:
    return f"main@sha1:{version.encode().hex():0<40}"


def apply_sources(kube, clients: Clients, col: Column, version: str, spec_of, first: bool = False,
                  legacy: tuple | None = None) -> list[str]:
    """Every source applies its manifests at ``version`` (the POSTing client only creates); what failed.
    ``legacy``: (version, spec_of) that the legacy Kustomization's source still says instead."""
    docs = manifests_at(col, version, spec_of)
    if legacy is not None:
        old = manifests_at(col, legacy[0], legacy[1])["flux"]
        docs["flux"] = docs["flux"][:FLUX_SHARE["apps"]] + old[FLUX_SHARE["apps"]:]
    problems = []
    res = reconcile_flux(clients, col, docs["flux"], revision(version))
    if not res.ok:
        problems.append(f"flux at {version}: {res.error}")
    for client, kw in (("argo", dict(server_side=True, field_manager=OWNER["argo"])), ("csa", {})):
        out = clients.kubectl.apply(docs[client], **kw)
        if not out.ok:
            problems.append(f"{client} at {version}: {kubectl_errors(out.stderr)}")
    chart = write_chart(clients.charts / col.release / version, col.release,
                        "1.0.0" if version == "v1alpha1" else "1.1.0", docs["helm"])
    out = (clients.helm.install if first else clients.helm.upgrade)(col.release, NS, chart)
    if not out.ok:
        problems.append(f"helm {'install' if first else 'upgrade'} at {version}: {out.stderr.strip()[-400:]}")
    if first:
        for doc in docs["post"]:
            kube.request("POST", col.path("v1alpha1"), doc, query={"fieldManager": OWNER["post"]})
    return problems


def run_role(cluster, tmp_path: Path, cols: list[Column], **host_vars):
    """Release N (both versions, storage v1beta1), then N+1 (v1beta1 only), for every column's CRD at once."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    release, target = tmp_path / "release.yaml", tmp_path / "target.yaml"
    release.write_text(yaml.safe_dump_all([c.crd("v1beta1", ("v1alpha1", "v1beta1")) for c in cols]))
    target.write_text(yaml.safe_dump_all([c.crd("v1beta1", ("v1beta1",)) for c in cols]))
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "crd_upgrade_kubeconfig": str(cluster.kubeconfig), "crd_upgrade_context": cluster.contexts()[0],
            "crd_upgrade_release_manifests": [str(release)], "crd_upgrade_target_manifests": [str(target)],
            "crd_upgrade_crd_names": [c.crd_name for c in cols], "crd_upgrade_settle_seconds": 0,
            "crd_upgrade_drain_window": 1, "crd_upgrade_writers_window": 5, **host_vars}
    inventory = {"all": {"children": {"clusters": {"hosts": {"clients-cluster": host}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    extra_vars = json.dumps({"crd_upgrade_waves": [1], "crd_upgrade_report_dir": str(tmp_path / "report")})
    proc = ansible_playbook("-i", str(tmp_path / "inventory.yml"), str(REPO / "playbooks" / "fleet_upgrade.yml"),
                            "-e", extra_vars)
    assert proc.returncode == 0, proc.stdout[-6000:]
    report = json.loads(next((tmp_path / "report" / "latest").glob("*.json")).read_text())
    return proc, report["clusters"][0]


def reapply_after(kube, clients: Clients, col: Column) -> dict[str, object]:
    """Every client writes its changed manifest at v1beta1, none forced (Flux applies as Flux always does)."""
    docs = manifests_at(col, "v1beta1", col.after)
    flux_res = reconcile_flux(clients, col, docs["flux"], revision("after"))
    argo = clients.kubectl.apply(docs["argo"], server_side=True, field_manager=OWNER["argo"])
    csa = clients.kubectl.apply(docs["csa"])
    for i, name in enumerate(object_names("post")):
        kube.request("PATCH", col.path("v1beta1", name), col.patch_after(i), "application/merge-patch+json",
                     query={"fieldManager": OWNER["post"]})
    chart = write_chart(clients.charts / col.release / "after", col.release, "1.2.0", docs["helm"])
    helm = clients.helm.upgrade(col.release, NS, chart)
    return {"flux": flux_res, "argo": argo, "csa": csa, "helm": helm}


def objects(kube, col: Column) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in kube.get(col.path("v1beta1"))["items"]}


def third_manager_conflicts(kubectl: Kubectl, col: Column, client: str) -> str:
    """A non-forced server-side dry-run apply by `intruder` of the value each object's client owns: kubectl goes
    on past each failed object, so its stderr holds one error per object."""
    docs = [col.doc("v1beta1", n, col.third_manager(i)) for i, n in enumerate(object_names(client))]
    return kubectl.apply(docs, server_side=True, field_manager="intruder", dry_run="server").stderr


@dataclass
class FirstRun:
    """What the run with every source still at v1alpha1 left, per column."""
    result: dict
    versions: dict[str, list[str]]  # CRD name -> spec.versions after it
    stored: dict[str, list[str]]  # CRD name -> status.storedVersions after it
    etcd: dict[str, dict]  # CRD name -> keys per apiVersion after it
    reapply_problems: dict[str, list[str]]  # column -> the unchanged v1alpha1 re-applies that failed


@pytest.fixture(scope="module")
def upgraded(cluster, kube, tmp_path_factory):
    """The columns, seeded by the real clients at v1alpha1; a role run while the sources still say v1alpha1;
    every source but the legacy Kustomizations moved to v1beta1 and a rerun (accepting the moved ones by name);
    the legacy ones moved too, and a third run with nothing accepted."""
    tmp = tmp_path_factory.mktemp("real-clients")
    context = cluster.contexts()[0]
    kube.apply_crd(kustomization_crd())
    clients = Clients(Kubectl(cluster.kubeconfig, context), Flux(cluster.kubeconfig, context),
                      Helm(cluster.kubeconfig, context), tmp / "charts", Kustomizations(kube))
    kube.ensure_namespace(NS)
    webhook = WebhookServer(cluster.pki, tmp / "webhook").start()
    suffix = uuid.uuid4().hex[:6]
    cols: dict[str, Column] = {
        "None": NoneColumn("None", f"none{suffix}.clients.crdops.test"),
        "Webhook": WebhookColumn("Webhook", f"hook{suffix}.clients.crdops.test", conversion=conversion_spec(webhook)),
    }
    for col in cols.values():
        kube.apply_crd(col.crd("v1alpha1", ("v1alpha1",)))
        for which in FLUX_SHARE:
            clients.kustomizations.create(col.kustomization(which), f"./{which}")
        problems = apply_sources(kube, clients, col, "v1alpha1", col.before, first=True)
        assert not problems, problems
    _proc, result = run_role(cluster, tmp / "first", list(cols.values()))
    first = FirstRun(result, {}, {}, {}, {})
    for col in cols.values():
        crd = kube.get_crd(col.crd_name)
        first.versions[col.crd_name] = [v["name"] for v in crd["spec"]["versions"]]
        first.stored[col.crd_name] = crd["status"]["storedVersions"]
        first.etcd[col.crd_name] = dict(etcd_reader.scan_storage(cluster.etcd_url, col.group, col.plural).counts)
        # the sources as they are, unchanged: still working while release N+1 is held back
        first.reapply_problems[col.name] = apply_sources(kube, clients, col, "v1alpha1", col.before)
        # then each moves but legacy: the same content, in v1beta1's names (Flux sends nothing for it: no drift)
        moved = apply_sources(kube, clients, col, "v1beta1", col.moved, legacy=("v1alpha1", col.before))
        assert not moved, moved
    # accepting the moved Kustomizations by name, as the old fix text said, must not let legacy's objects through
    accepted = [c.kustomization("apps") for c in cols.values()]
    proc, second = run_role(cluster, tmp / "second", list(cols.values()), crd_upgrade_accept_broken_clients=accepted)
    rerun = Rerun(proc.stdout, second, {c.crd_name: [v["name"] for v in kube.get_crd(c.crd_name)["spec"]["versions"]]
                                        for c in cols.values()})
    for col in cols.values():
        assert not apply_sources(kube, clients, col, "v1beta1", col.moved)
    proc, third = run_role(cluster, tmp / "third", list(cols.values()))
    yield cols, clients, proc, first, rerun, third
    webhook.stop()


@dataclass
class Rerun:
    """The run after every source but the legacy Kustomizations moved."""
    stdout: str
    result: dict
    versions: dict[str, list[str]]


def check_rerun(rerun: Rerun, col: Column) -> list[str]:
    """Release N+1 still held back for this CRD, naming the legacy Kustomization only (with what its controller
    says), every other client's evidence gone, and the accepted moved one said to accept nothing."""
    problems = []
    if rerun.result["status"] != "held back" or rerun.versions[col.crd_name] != ["v1alpha1", "v1beta1"]:
        problems.append(f"rerun: status {rerun.result['status']}, versions {rerun.versions[col.crd_name]}: "
                        f"release N+1 applied while {col.kustomization('legacy')} declares v1alpha1")
    held = [h for h in rerun.result["held_back"] if h["crd"] == col.crd_name]
    said = " ".join(held[0]["clients"]) if held else ""
    legacy = (f"applier {OWNER['flux']} (declares at v1alpha1) on {FLUX_SHARE['legacy']} objects",
              f"source: Flux Kustomization {col.kustomization('legacy')} (GitRepository flux-system/repo, path "
              f"./legacy, revision {revision('v1beta1')})")
    for words in legacy:
        if words not in said:
            problems.append(f"rerun: the held-back clients do not say {words!r}: {said}")
    for gone in (col.kustomization("apps"), OWNER["argo"], OWNER["csa"], col.release):
        if gone in said:
            problems.append(f"rerun: {gone} moved but is still named: {said}")
    warned = [line for line in rerun.stdout.splitlines() if "accept no client of a removed version" in line]
    if not any(col.kustomization("apps") in line for line in warned):
        problems.append(f"rerun: no warning that accepting {col.kustomization('apps')} accepts nothing: {warned}")
    return problems


def kubectl_errors(stderr: str) -> str:
    """kubectl's error lines (the server's messages) with their counts, without its advice paragraphs."""
    lines = Counter(line.strip() for line in stderr.splitlines()
                    if line.startswith(("Apply failed", "error:", "Error from server")))
    return "; ".join(f"{n}x {line}" for line, n in lines.items()) or stderr.strip()[:300]


def check_reapply(kube, clients: Clients, col: Column) -> list[str]:
    """Every client re-applies its changed manifest; what went wrong, one line per check."""
    problems = []
    results = reapply_after(kube, clients, col)
    fr = results["flux"]
    if not fr.ok or (fr.applied, fr.changed) != (COUNTS["flux"], COUNTS["flux"]):
        problems.append(f"flux: applied {fr.applied}, changed {fr.changed} of {COUNTS['flux']}: {fr.error}")
    for client in ("argo", "csa"):
        if not results[client].ok:
            problems.append(f"{client}: kubectl apply failed: {kubectl_errors(results[client].stderr)}")
    if not results["helm"].ok:
        problems.append(f"helm upgrade failed: {results['helm'].stderr.strip()[-400:]}")
    after = objects(kube, col)
    for client in COUNTS:
        names = object_names(client)
        landed = [n for i, n in enumerate(names) if col.changed(after[n]["spec"]) == col.changed(col.after(i))]
        if landed != names:
            problems.append(f"{client}: changed value landed on {len(landed)}/{len(names)}")
        # the dropped field is gone: pruned by server-side apply for an Apply manager; for client-side apply by
        # the three-way patch of kubectl's last-applied annotation; for the POSTing client by its merge patch
        kept = [n for n in names if col.dropped_present(after[n]["spec"])]
        if kept:
            problems.append(f"{client}: field dropped from the manifest still there on {len(kept)}/{len(names)}")
    # no object lost its ownership to the apiserver's stand-in for stripped managedFields
    stand_ins = [n for n, o in after.items()
                 if any(e.get("manager") == "before-first-apply" for e in o["metadata"].get("managedFields", []))]
    if stand_ins:
        problems.append(f"before-first-apply entries on {len(stand_ins)}/{TOTAL} objects")
    return problems


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def check_last_applied(kube, col: Column) -> list[str]:
    """kubectl's last-applied annotation after the role: the moved manifest, as kubectl wrote it at v1beta1 (the
    role left the client-side applier's declaration alone); owned by kubectl alone."""
    problems = []
    current = objects(kube, col)
    for i, name in enumerate(object_names("csa")):
        meta = current[name]["metadata"]
        applied = json.loads(meta["annotations"][LAST_APPLIED])
        want = f"{col.group}/v1beta1"
        if applied.get("apiVersion") != want or applied.get("spec") != col.moved(i):
            problems.append(f"{name}: last-applied annotation {applied.get('apiVersion')} {applied.get('spec')}, "
                            f"expected {want} {col.moved(i)}")
        owners = [e["manager"] for e in meta["managedFields"]
                  if "f:" + LAST_APPLIED in e.get("fieldsV1", {}).get("f:metadata", {}).get("f:annotations", {})]
        if owners != [OWNER["csa"]]:
            problems.append(f"{name}: last-applied annotation owned by {owners}, expected [{OWNER['csa']}]")
    return problems


def check_conflicts(kubectl: Kubectl, col: Column) -> list[str]:
    """A third manager (no force) changing a value each client owns conflicts, naming that client only."""
    problems = []
    for client in COUNTS:
        err = third_manager_conflicts(kubectl, col, client)
        named = err.count(f'conflict with "{OWNER[client]}"')
        if err.count("Apply failed with") != COUNTS[client] or named != COUNTS[client]:
            problems.append(f"{client}: {named}/{COUNTS[client]} conflicts name {OWNER[client]}: {kubectl_errors(err)}")
        if "before-first-apply" in err:
            problems.append(f"{client}: conflicts name before-first-apply")
    return problems


def check_noop(kube, clients: Clients, col: Column) -> list[str]:
    """An unchanged re-apply by every client writes nothing."""
    problems = []
    rv_before = {n: o["metadata"]["resourceVersion"] for n, o in objects(kube, col).items()}
    again = reapply_after(kube, clients, col)
    if not again["flux"].ok or set(again["flux"].actions().values()) != {"unchanged"}:
        problems.append(f"flux: unchanged re-apply: {again['flux'].actions()} {again['flux'].error}")
    if not (again["argo"].ok and again["csa"].ok) or "unchanged" not in again["csa"].stdout:
        problems.append(f"kubectl: unchanged re-apply: {kubectl_errors(again['argo'].stderr)} / "
                        f"{again['csa'].stdout.strip()} {kubectl_errors(again['csa'].stderr)}")
    rv_after = {n: o["metadata"]["resourceVersion"] for n, o in objects(kube, col).items()}
    rewritten = sorted(n for n in rv_before if rv_after[n] != rv_before[n])
    if rewritten:
        problems.append(f"unchanged re-apply wrote {len(rewritten)} objects: {rewritten}")
    return problems


def check_first_run(first: FirstRun, col: Column) -> list[str]:
    """The run with every source still at v1alpha1: re-stored, proven and trimmed, release N+1 held back for this
    CRD naming every client with its version and source, and every unchanged v1alpha1 re-apply still working."""
    problems = list(first.reapply_problems[col.name])
    if first.result["status"] != "held back":
        problems.append(f"first run: status {first.result['status']}, expected held back")
    if first.versions[col.crd_name] != ["v1alpha1", "v1beta1"]:
        problems.append(f"first run: release N+1 applied: versions {first.versions[col.crd_name]}")
    if first.stored[col.crd_name] != ["v1beta1"] or first.etcd[col.crd_name] != {f"{col.group}/v1beta1": TOTAL}:
        problems.append(f"first run: storedVersions {first.stored[col.crd_name]}, etcd {first.etcd[col.crd_name]}")
    held = [h for h in first.result["held_back"] if h["crd"] == col.crd_name]
    said = " ".join(held[0]["clients"]) if held else ""
    for words in (f"applier {OWNER['flux']} (declares at v1alpha1) on {FLUX_SHARE['apps']} objects",
                  f"applier {OWNER['flux']} (declares at v1alpha1) on {FLUX_SHARE['legacy']} objects",
                  f"source: Flux Kustomization {col.kustomization('apps')} (GitRepository flux-system/repo, "
                  f"path ./apps, revision {revision('v1alpha1')})",
                  f"source: Flux Kustomization {col.kustomization('legacy')}",
                  f"applier {OWNER['argo']} (declares at v1alpha1) on {COUNTS['argo']} objects",
                  f"Argo CD Application {ARGO_APP}",
                  f"applier {OWNER['csa']} (declares (client-side apply) at v1alpha1) on {COUNTS['csa']} objects",
                  f"applier helm (declares at v1alpha1) on {COUNTS['helm']} objects",
                  f"applier {NS}/{col.release} (declares (Helm release) at v1alpha1) on {COUNTS['helm']} objects",
                  f"Helm release {NS}/{col.release}"):
        if words not in said:
            problems.append(f"first run: the held-back clients do not say {words!r}: {said}")
    if OWNER["post"] in said:
        problems.append(f"first run: the POSTing client's one-time create is named as a client: {said}")
    return problems


@pytest.mark.parametrize("conversion", ["None", "Webhook"])
def test_real_clients_after_the_role(cluster, kube, upgraded, conversion):
    cols, clients, proc, first, rerun, third = upgraded
    col = cols[conversion]
    problems = check_first_run(first, col) + check_rerun(rerun, col)
    still = [c for c in third["broken_clients"] if c.get("crd") == col.crd_name]
    if third["status"] != "ok" or still:
        problems.append(f"run after legacy moved, nothing accepted: status {third['status']}, clients still seen "
                        f"{still}")
    crd = kube.get_crd(col.crd_name)
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta1"], (problems, proc.stdout[-3000:])
    assert crd["status"]["storedVersions"] == ["v1beta1"]
    scan = etcd_reader.scan_storage(cluster.etcd_url, col.group, col.plural)
    assert scan.total == TOTAL and dict(scan.counts) == {f"{col.group}/v1beta1": TOTAL}

    problems += check_last_applied(kube, col)
    problems += check_reapply(kube, clients, col)
    problems += check_conflicts(clients.kubectl, col)
    problems += check_noop(kube, clients, col)
    assert not problems, f"conversion {conversion}:\n" + "\n".join(problems)

    # other everyday kubectl verbs work on the upgraded CRD
    clients.kubectl.run("label", col.resource(), "--all", "-n", NS, "checked=yes").check()
    listed = clients.kubectl.get(col.resource(), namespace=NS)["items"]
    assert len(listed) == TOTAL and all(o["metadata"]["labels"].get("checked") == "yes" for o in listed)

    scan = etcd_reader.scan_storage(cluster.etcd_url, col.group, col.plural)
    assert scan.total == TOTAL and dict(scan.counts) == {f"{col.group}/v1beta1": TOTAL}
    reliability.record(f"real clients (Flux ssa, kubectl, Helm) across the role, conversion {conversion}",
                       f"sources at v1alpha1: release N+1 held back naming each, their re-applies work; all but one "
                       f"Kustomization moved: held back naming that one only, by its inventory; all moved: "
                       f"every client re-applies at v1beta1 without force; pruned; conflicts name the owner; "
                       f"no before-first-apply; no-op re-apply on {TOTAL} of {TOTAL}",
                       TOTAL, scan.total, True)

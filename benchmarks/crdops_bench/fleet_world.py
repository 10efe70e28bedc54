"""A fleet of many clusters, as Ansible sees it, on a few real apiservers (benchmarks/fleet200.py).

Each inventory host is one cluster from Ansible's point of view: its own kubeconfig context and its own CRD
group (`widgets.c<NNN>-<set>.fleet.bench.crdops.io`), so its migration records, pass Leases, report rows and etcd
keys never meet another host's. The hosts are spread round-robin over `apiservers` real kube-apiserver + etcd
pairs (tests/controlplane): 200 real control planes do not fit 2 cores, a few do, and the apiserver work a host
causes is the same whether its neighbours share the process or not.

Each host's data is seeded straight into etcd at v1alpha1 and its storage version flipped to v1beta1 through the
API long before any run (crdops_bench.data.seed), so a run re-stores, verifies, trims and applies release N+1
(v1beta1 only) without waiting for a drain. A few hosts are broken on purpose, each the way a real cluster is:
  no-permission  its context's user is a client certificate nobody bound to any role;
  unreachable    its context's server is a loopback port nothing listens on;
  webhook        a validating admission webhook on its apiserver refuses every UPDATE of its CRD.
"""
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.controlplane import Cluster, start_cluster
from tests.controlplane.cluster import admin_kube
from tests.controlplane.kube import make_crd
from tests.controlplane.pki import sign_client_cert
from tests.controlplane.processes import free_port
from tests.controlplane.webhook import WebhookServer, deny_updates_webhook

from . import data

FAULTS = ("no-permission", "unreachable", "webhook")
# what the fleet report must say about each broken host (a substring of its error)
FAULT_EVIDENCE = {"no-permission": "forbidden", "unreachable": "unreachable", "webhook": "admission webhook"}
NOBODY = "crdops-fleet-nobody"


@dataclass
class Host:
    name: str
    server: int           # index of the apiserver it lives on
    group: str
    fault: str = ""

    @property
    def crd_name(self) -> str:
        return data.crd_name(self.group)


@dataclass
class World:
    folder: Path
    servers: list[Cluster]
    kubeconfig: Path = field(init=False)
    webhooks: list[WebhookServer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kubeconfig = self.folder / "fleet-kubeconfig"

    def stop(self) -> None:
        for hook in self.webhooks:
            hook.stop()
        for server in self.servers:
            server.stop()

    def server_pids(self) -> dict[str, list[int]]:
        return {"kube-apiserver": [s.apiserver.process.pid for s in self.servers],
                "etcd": [s.etcd.process.pid for s in self.servers]}


def start_world(folder: Path, apiservers: int) -> World:
    """`apiservers` clusters, started one after another (2 cores: side by side they time out)."""
    servers: list[Cluster] = []
    try:
        for i in range(apiservers):
            servers.append(start_cluster(f"kas{i}", folder / f"kas{i}"))
            print(f"# apiserver kas{i} up", file=sys.stderr, flush=True)
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return World(folder, servers)


def plan_hosts(clusters: int, apiservers: int, set_tag: str, faults: int) -> list[Host]:
    """Hosts fleet-000 ...; the last `faults` of them broken, one fault kind each in FAULTS order."""
    hosts = [Host(f"fleet-{i:03d}", i % apiservers, f"c{i:03d}-{set_tag}.fleet.bench.crdops.io")
             for i in range(clusters)]
    for k in range(min(faults, clusters)):
        hosts[clusters - faults + k].fault = FAULTS[k % len(FAULTS)]
    return hosts


def seed_hosts(world: World, hosts: list[Host], objects: int) -> float:
    """Every host's CRD and objects, storage flipped to v1beta1; one thread per apiserver. Seconds taken."""
    t0 = time.monotonic()

    def seed_server(index: int) -> None:
        kube = admin_kube(world.servers[index])
        for h in (h for h in hosts if h.server == index):
            data.seed(kube, world.servers[index].etcd_url, h.group, objects, flip=True)

    with ThreadPoolExecutor(len(world.servers)) as pool:
        list(pool.map(seed_server, range(len(world.servers))))
    return time.monotonic() - t0


def break_hosts(world: World, hosts: list[Host]) -> None:
    """The admission webhook of the `webhook` hosts (one server per apiserver that needs one)."""
    for h in (h for h in hosts if h.fault == "webhook"):
        server = world.servers[h.server]
        hook = WebhookServer(server.pki, world.folder / f"webhook-{h.group}",
                             deny_message=f"fleet bench: {h.group} is frozen by policy").start()
        world.webhooks.append(hook)
        admin_kube(server).post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                                deny_updates_webhook(f"deny-{h.group}", hook, h.group, data.PLURAL))


def write_kubeconfig(world: World, hosts: list[Host]) -> Path:
    """One kubeconfig, one context per host (named after it), as an AWX kubeconfig credential carries them."""
    clusters, users, contexts = [], [], []
    for i, s in enumerate(world.servers):
        users.append({"name": f"kas{i}-admin", "user": {"client-certificate": str(s.pki.admin_cert),
                                                        "client-key": str(s.pki.admin_key)}})
        cert, key = sign_client_cert(s.pki, "fleet-nobody", NOBODY)
        users.append({"name": f"kas{i}-nobody", "user": {"client-certificate": str(cert), "client-key": str(key)}})
    for h in hosts:
        s = world.servers[h.server]
        url = f"https://127.0.0.1:{free_port()}" if h.fault == "unreachable" else s.server
        clusters.append({"name": h.name, "cluster": {"server": url, "certificate-authority": str(s.pki.ca_cert)}})
        user = f"kas{h.server}-nobody" if h.fault == "no-permission" else f"kas{h.server}-admin"
        contexts.append({"name": h.name, "context": {"cluster": h.name, "user": user}})
    doc = {"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users, "contexts": contexts,
           "current-context": hosts[0].name}
    world.kubeconfig.write_text(yaml.safe_dump(doc, sort_keys=False))
    world.kubeconfig.chmod(0o600)
    return world.kubeconfig


def write_releases(folder: Path, h: Host) -> tuple[str, str]:
    """Release N (v1alpha1 + v1beta1 served, v1beta1 storage: what the seed flipped to) and N+1 (v1beta1 only)."""
    n, n1 = folder / f"{h.name}-{h.group}-n.yaml", folder / f"{h.name}-{h.group}-n1.yaml"
    versions_n = [("v1alpha1", True, False), ("v1beta1", True, True)]
    n.write_text(yaml.safe_dump(make_crd(h.group, data.PLURAL, data.KIND, versions_n)))
    n1.write_text(yaml.safe_dump(make_crd(h.group, data.PLURAL, data.KIND, [("v1beta1", True, True)])))
    return str(n), str(n1)


def inventory(world: World, hosts: list[Host], report_dir: Path, python: str) -> dict:
    """Group `clusters`, one host per cluster; the connection is local (the modules run on the controller)."""
    releases = world.folder / "releases"
    releases.mkdir(exist_ok=True)
    rows = {}
    for h in hosts:
        n, n1 = write_releases(releases, h)
        rows[h.name] = {"crd_upgrade_context": h.name, "crd_upgrade_etcd_url": world.servers[h.server].etcd_url,
                        "crd_upgrade_release_manifests": [n], "crd_upgrade_target_manifests": [n1]}
    return {"all": {"children": {"clusters": {"hosts": rows, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": python,
        "crd_upgrade_kubeconfig": str(world.kubeconfig)}}},
        "vars": {"crd_upgrade_report_dir": str(report_dir)}}}

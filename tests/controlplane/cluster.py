"""Start real clusters: etcd + kube-apiserver(s) on loopback, one, a fleet of N, or an HA pair.

Flags follow envtest's (controller-runtime) with RBAC on, so tests see the same authorization and
admission chain as a real cluster. See ../../docs/testing.md for the why of each choice.
"""
from __future__ import annotations

import shutil
import ssl
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .binaries import Binaries, find_binaries
from .delay_proxy import DelayProxy
from .haproxy import HAProxy
from .pki import Pki, ensure_pki
from .processes import ManagedProcess, free_port

READY_TIMEOUT = 120.0


class ControlPlaneError(RuntimeError):
    pass


@dataclass
class Etcd:
    binaries: Binaries
    folder: Path
    detached: bool = False
    client_port: int = 0
    process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def start(self) -> "Etcd":
        self.client_port = self.client_port or free_port()
        peer = free_port()
        data = self.folder / "etcd-data"
        data.mkdir(parents=True, exist_ok=True)
        argv = [str(self.binaries.etcd), "--name", "default", "--data-dir", str(data),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"default=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync", "--log-level", "warn",
                # one snapshot per 10k revisions keeps a long benchmark's memory flat
                "--snapshot-count", "10000", "--quota-backend-bytes", str(8 * 1024 ** 3)]
        self.process = ManagedProcess("etcd", argv, self.folder / "logs" / "etcd.log", self.detached).start()
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise ControlPlaneError(f"etcd exited during start; log {self.process.log_path}:\n"
                                        f"{self.process.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                    if b'"true"' in resp.read():
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise ControlPlaneError(f"etcd not healthy after {timeout}s; log {self.process.log_path}")

    def stop(self) -> None:
        if self.process:
            self.process.stop()


@dataclass
class KubeAPIServer:
    binaries: Binaries
    pki: Pki
    etcd_url: str
    folder: Path
    name: str
    address: str = "127.0.0.1"
    hostname: str | None = None
    detached: bool = False
    extra_args: tuple[str, ...] = ()
    port: int = 0
    process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"https://{self.address}:{self.port}"

    def argv(self) -> list[str]:
        argv = [str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}", "--etcd-prefix=/registry",
                f"--secure-port={self.port}", f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--cert-dir={self.folder / 'apiserver-certs'}",
                f"--tls-cert-file={self.pki.serving_cert}", f"--tls-private-key-file={self.pki.serving_key}",
                f"--client-ca-file={self.pki.ca_cert}",
                f"--service-account-issuer=https://kubernetes.default.svc.{self.name}.local",
                f"--service-account-key-file={self.pki.sa_key}",
                f"--service-account-signing-key-file={self.pki.sa_key}",
                "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount", "--allow-privileged=true",
                # several apiservers share 127.0.0.1 here: no fight over the default/kubernetes endpoints
                "--endpoint-reconciler-type=none",
                # a `service:` webhook is reached at its endpoints, not its ClusterIP: no kube-proxy routes
                # ClusterIPs here (webhook.publish_as_service)
                "--enable-aggregator-routing=true",
                *self.extra_args]
        if self.hostname:
            # the apiserver identity lease is keyed by hostname: two on one host need distinct ones
            argv = ["unshare", "--uts", "sh", "-c", f'hostname {self.hostname} && exec "$@"', "kas", *argv]
        return argv

    def start(self) -> "KubeAPIServer":
        self.port = self.port or free_port(self.address)
        log = self.folder / "logs" / f"kube-apiserver-{self.address}-{self.port}.log"
        self.process = ManagedProcess("kube-apiserver", self.argv(), log, self.detached).start()
        return self

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_cert))
        ctx.load_cert_chain(str(self.pki.admin_cert), str(self.pki.admin_key))
        return ctx

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        ctx = self.ssl_context()
        last = ""
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise ControlPlaneError(f"kube-apiserver exited during start; log {self.process.log_path}:\n"
                                        f"{self.process.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", context=ctx, timeout=3) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise ControlPlaneError(f"kube-apiserver {self.url} not ready after {timeout}s ({last}); "
                                f"log {self.process.log_path}")

    def restart(self) -> None:
        """Stop and start on the same port (fault injection: an apiserver restart mid-run)."""
        self.process.stop()
        self.start()
        self.wait_ready()

    def stop(self) -> None:
        if self.process:
            self.process.stop()


def kubeconfig_entry(name: str, server: str, pki: Pki) -> tuple[dict, dict, dict]:
    cluster = {"name": name, "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)}}
    user = {"name": f"{name}-admin",
            "user": {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)}}
    context = {"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}
    return cluster, user, context


def write_kubeconfig(path: Path, entries: list[tuple[dict, dict, dict]]) -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "preferences": {},
           "clusters": [e[0] for e in entries], "users": [e[1] for e in entries],
           "contexts": [e[2] for e in entries], "current-context": entries[0][2]["name"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


@dataclass
class Cluster:
    """One etcd and one or more kube-apiservers sharing it (more than one = HA)."""
    name: str
    folder: Path
    etcd: Etcd
    apiservers: list[KubeAPIServer]
    pki: Pki
    kubeconfig: Path = field(init=False)
    # HA pair with a lagging member: the second apiserver's link to etcd (see delay_proxy.py)
    etcd_link: DelayProxy | None = None
    # HAProxy in front of the apiservers (front_with_haproxy); its kubeconfig context is `lb_context`
    load_balancer: HAProxy | None = None

    def __post_init__(self) -> None:
        self.kubeconfig = self.folder / "kubeconfig"

    @property
    def apiserver(self) -> KubeAPIServer:
        return self.apiservers[0]

    @property
    def context(self) -> str:
        return self.name

    @property
    def server(self) -> str:
        return self.apiserver.url

    @property
    def etcd_url(self) -> str:
        return self.etcd.url

    @property
    def lb_context(self) -> str:
        return f"{self.name}-lb"

    def contexts(self) -> list[str]:
        if len(self.apiservers) == 1:
            return [self.name]
        return [f"{self.name}-{i}" for i in range(len(self.apiservers))]

    def kubeconfig_entries(self) -> list[tuple[dict, dict, dict]]:
        entries = [kubeconfig_entry(ctx, kas.url, self.pki) for ctx, kas in zip(self.contexts(), self.apiservers)]
        if self.load_balancer:
            entries.append(kubeconfig_entry(self.lb_context, self.load_balancer.url, self.pki))
        return entries

    def api_client(self, context: str | None = None):
        """A `kubernetes` ApiClient as admin (system:masters), for test setup and assertions."""
        from kubernetes import config
        return config.new_client_from_config(config_file=str(self.kubeconfig), context=context or self.contexts()[0])

    def pids(self) -> list[int]:
        procs = [self.etcd.process] + [k.process for k in self.apiservers]
        return [p.pid for p in procs if p and p.pid]

    def ports(self) -> list[int]:
        return [self.etcd.client_port] + [k.port for k in self.apiservers]

    def stop(self) -> None:
        if self.load_balancer:
            self.load_balancer.stop()
        for kas in self.apiservers:
            kas.stop()
        if self.etcd_link:
            self.etcd_link.stop()
        self.etcd.stop()

    def describe(self) -> dict:
        return {"name": self.name, "contexts": self.contexts(), "servers": [k.url for k in self.apiservers],
                "etcd": self.etcd.url, "kubeconfig": str(self.kubeconfig), "pids": self.pids(),
                "folder": str(self.folder)}


def _launch(name: str, folder: Path, binaries: Binaries, apiservers: int, detached: bool,
            extra_args: tuple[str, ...], lagging_member: bool = False) -> Cluster:
    folder.mkdir(parents=True, exist_ok=True)
    addresses = [f"127.0.0.{i + 1}" for i in range(apiservers)]
    pki = ensure_pki(folder / "pki", extra_ips=tuple(addresses[1:]))
    etcd = Etcd(binaries, folder, detached).start()
    # the last apiserver reaches etcd through a delaying proxy (pass-through until etcd_link.lag(s))
    link = DelayProxy("127.0.0.1", etcd.client_port).start() if lagging_member else None
    kas_list = [KubeAPIServer(binaries, pki, link.url if link and i == apiservers - 1 else etcd.url, folder, name,
                              address=addr, hostname=f"{name}-kas-{i}" if apiservers > 1 else None,
                              detached=detached, extra_args=extra_args)
                for i, addr in enumerate(addresses)]
    cluster = Cluster(name, folder, etcd, kas_list, pki, etcd_link=link)
    try:
        etcd.wait_ready()
        for kas in kas_list:
            kas.start()
        for kas in kas_list:
            kas.wait_ready()
    except BaseException:
        cluster.stop()
        raise
    write_kubeconfig(cluster.kubeconfig, cluster.kubeconfig_entries())
    return cluster


def start_cluster(name: str, folder: Path, binaries: Binaries | None = None, detached: bool = False,
                  extra_args: tuple[str, ...] = ()) -> Cluster:
    return _launch(name, Path(folder), binaries or find_binaries(), 1, detached, extra_args)


def start_ha_pair(name: str, folder: Path, binaries: Binaries | None = None, detached: bool = False,
                  extra_args: tuple[str, ...] = (), lagging_member: bool = False) -> Cluster:
    """Two apiservers (127.0.0.1 and 127.0.0.2, distinct hostnames) on one etcd and prefix.

    `lagging_member`: the second one reaches etcd through a DelayProxy (`cluster.etcd_link`), which
    passes bytes through until `cluster.etcd_link.lag(seconds)`; then that apiserver learns every change
    (a CRD's new storage version among them) `seconds` late."""
    return _launch(name, Path(folder), binaries or find_binaries(), 2, detached, extra_args, lagging_member)


def front_with_haproxy(cluster: Cluster) -> HAProxy:
    """Start HAProxy (TCP, round-robin, TLS passthrough) in front of every apiserver of `cluster`.

    The kubeconfig gains the context `cluster.lb_context` whose server is the frontend
    (https://127.0.0.1:<port>, covered by the serving cert's SANs); the other contexts stay as they were."""
    backends = [(kas.address, kas.port) for kas in cluster.apiservers]
    cluster.load_balancer = HAProxy(cluster.folder / "haproxy", backends).start()
    write_kubeconfig(cluster.kubeconfig, cluster.kubeconfig_entries())
    return cluster.load_balancer


HAPair = Cluster


@dataclass
class Fleet:
    clusters: list[Cluster]
    kubeconfig: Path

    def stop(self) -> None:
        for cluster in self.clusters:
            cluster.stop()


def start_fleet(count: int, folder: Path, binaries: Binaries | None = None, detached: bool = False,
                prefix: str = "cluster") -> Fleet:
    """N independent clusters (own etcd each) started side by side, one kubeconfig with N contexts."""
    folder = Path(folder)
    binaries = binaries or find_binaries()
    names = [f"{prefix}-{chr(ord('a') + i)}" for i in range(count)]
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(_launch, n, folder / n, binaries, 1, detached, ()) for n in names]
        clusters, errors = [], []
        for fut in futures:
            try:
                clusters.append(fut.result())
            except Exception as exc:  # keep going so that every started cluster is stopped below
                errors.append(exc)
    if errors:
        for cluster in clusters:
            cluster.stop()
        raise errors[0]
    entries = [e for c in clusters for e in c.kubeconfig_entries()]
    kubeconfig = write_kubeconfig(folder / "kubeconfig", entries)
    return Fleet(clusters, kubeconfig)


def remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def admin_kube(cluster: Cluster, index: int = 0):
    """The raw test client as admin, against one of the cluster's apiservers."""
    from .kube import Kube
    return Kube(cluster.apiservers[index].url, cluster.pki.ca_cert, cluster.pki.admin_cert, cluster.pki.admin_key)

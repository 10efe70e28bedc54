"""One local control plane and every contender that migrates a CRD group on it.

A contender is a method taking the CRD group (already seeded) and `ready`, a callable it calls once it is
set up and about to start its work (the gentle suite measures the probe's idle window there). It returns
at least `seconds` (its work), `t0`/`t1` (time.monotonic() around that work) and `note` (empty when it
succeeded).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import urllib3

from . import REPO, data, engine, identities
from .children import PROBE_IDLE_S, run_child


def nothing() -> None:
    """The default `ready`: nothing to wait for."""


def callback_json(stdout: str) -> dict:
    """The json callback's document: it is printed last, after any progress lines the action plugin wrote
    while a task ran, and starts with a line holding only `{`."""
    starts = ([0] if stdout.startswith("{\n") else []) + [m.start() + 1 for m in re.finditer(r"\n\{\n", stdout)]
    for at in starts:
        try:
            return json.loads(stdout[at:])
        except ValueError:
            continue
    return {}


class Bench:
    def __init__(self, workdir: Path, kubectl: bool = True, kcm: bool = True):
        from tests.controlplane.binaries import find_binaries
        from tests.controlplane.cluster import admin_kube, start_cluster

        self.workdir = workdir
        (workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.collections = engine.snapshot()
        engine.use(self.collections)
        self.earlier: dict[str, str] = {}  # git ref -> a snapshot of the engine as it was there (--against)
        self.binaries = find_binaries(with_kcm=kcm)  # builds what is missing (KCM: benchmark only)
        self.cluster = start_cluster("bench", workdir / "bench", self.binaries)
        self.kube = admin_kube(self.cluster)
        self.kube.pool = urllib3.PoolManager(
            maxsize=32, cert_reqs="CERT_REQUIRED", ca_certs=str(self.cluster.pki.ca_cert),
            cert_file=str(self.cluster.pki.admin_cert), key_file=str(self.cluster.pki.admin_key), retries=False)
        ca = str(self.cluster.pki.ca_cert)
        self.migrator = identities.migrator(self.kube, self.cluster.server, ca)
        self.migrator_kubeconfig = self.migrator.kubeconfig(workdir / "migrator.kubeconfig")
        self.seq = 0
        self.probe_idle_s = PROBE_IDLE_S  # the latency probe's idle before an engine pass writes (--probe-idle-seconds)
        self.seed_rates: list[float] = []
        self.kubectl = self._find_kubectl() if kubectl else None

    def _find_kubectl(self) -> str | None:
        own = self.binaries.kube_apiserver.parent / "kubectl"
        if not own.exists():
            subprocess.run([str(REPO / "tests/controlplane/build.sh"), "--with-kcm", "--with-kubectl"], check=False)
        return str(own) if own.exists() else None

    def close(self) -> None:
        self.cluster.stop()
        for earlier in self.earlier.values():  # only children imported them (this process imports its own snapshot)
            shutil.rmtree(earlier, ignore_errors=True)

    # ---- data ------------------------------------------------------------------------------------
    def new_group(self, tag: str) -> str:
        self.seq += 1
        return f"{tag}{self.seq}.bench.crdops.io"

    def seed(self, tag: str, n: int, flip: bool = True) -> str:
        group = self.new_group(tag)
        seconds = data.seed(self.kube, self.cluster.etcd_url, group, n, flip=flip)
        self.seed_rates.append(n / seconds)
        return group

    def verify(self, group: str, n: int) -> tuple[bool, str]:
        return data.verify(self.cluster.etcd_url, group, n)

    def drop(self, group: str) -> None:
        data.drop(self.kube, self.cluster.etcd_url, group)

    # ---- contenders ------------------------------------------------------------------------------
    def ceiling(self, group: str, workers: int, ready=nothing) -> dict:
        ready()
        out = run_child("ceiling", {"collections": self.collections, "server": self.cluster.server,
                                    "ca": self.migrator.ca_cert, "token": self.migrator.token,
                                    "group": group, "plural": data.PLURAL, "workers": workers})
        return dict(out, note=f"bad={out['bad']}" if out["bad"] else "")

    def admin_auth(self) -> dict:
        """ConnectionOptions of the cluster admin's certificate (system:masters: exempt from APF)."""
        pki = self.cluster.pki
        return {"host": self.cluster.server, "ca_cert": str(pki.ca_cert), "client_cert": str(pki.admin_cert),
                "client_key": str(pki.admin_key)}

    def engine(self, group: str, options: dict, ready=nothing, profile=None, auth: dict | None = None,
               ref: str | None = None) -> dict:
        """Our engine's pass in a child process: this tree's, or with ``ref`` the one of that git commit."""
        if ref is not None and ref not in self.earlier:
            self.earlier[ref] = engine.snapshot(ref)
        collections = self.earlier[ref] if ref is not None else self.collections
        ready()
        out = run_child("engine", {"collections": collections, "auth": auth or self.migrator.engine_auth(),
                                   "crd": data.crd_name(group), "options": options, "profile": profile,
                                   "probe_idle_s": self.probe_idle_s})
        r = out["result"]
        ok = r["complete"] and r["failed"] == 0
        return dict(out, rss_kb=out["hwm_kb"], rewritten=r["rewritten"], unchanged=r["unchanged"], pace_state=r.get("pace"),
                    note="" if ok else f"engine: complete={r['complete']} failed={r['failed']} {r['aborted_reason']}")

    def playbook(self, play: list, inventory: dict, forks: int = 1, extra_env: dict | None = None) -> dict:
        """ansible-playbook from the snapshot with the json stdout callback; returns its wall time and the
        parsed output (per-task durations)."""
        from tests.integration.modrun import ansible_env

        d = Path(tempfile.mkdtemp(prefix="crdops-bench-pb-", dir=self.workdir))
        (d / "inventory.json").write_text(json.dumps(inventory))
        (d / "play.yml").write_text(json.dumps(play))
        env = ansible_env(self.collections)
        env.update(ANSIBLE_FORKS=str(forks), ANSIBLE_STDOUT_CALLBACK="json", **(extra_env or {}))
        t0 = time.monotonic()
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(d / "inventory.json"),
                               str(d / "play.yml")], capture_output=True, text=True, env=env, cwd=d, check=False)
        t1 = time.monotonic()
        output = callback_json(proc.stdout)
        note = "" if proc.returncode == 0 else f"ansible-playbook rc={proc.returncode}: {proc.stdout[-1500:]}"
        return {"seconds": t1 - t0, "t0": t0, "t1": t1, "note": note, "output": output}

    def local_host(self, **hostvars) -> dict:
        return {"all": {"hosts": {"bench": dict(ansible_connection="local",
                                                ansible_python_interpreter=sys.executable, **hostvars)}}}

    def ansible(self, group: str, workers: int | None, ready=nothing, force: bool = False) -> dict:
        """One crdops.migration.crd_storage_migrate task, as users run it (wall clock incl. Ansible start-up);
        workers None: the module's default."""
        # the harness flipped the storage seconds ago and holds no request across it: a short drain window
        task = dict(self.migrator.engine_auth(), names=[data.crd_name(group)], force=force, drain_window=1)
        if workers:
            task["workers"] = workers
        play = [{"name": "bench", "hosts": "all", "gather_facts": False,
                 "tasks": [{"name": "migrate", "crdops.migration.crd_storage_migrate": task}]}]
        ready()
        out = self.playbook(play, self.local_host())
        out.pop("output")
        return out

    def kubectl_replace(self, group: str, ready=nothing) -> dict:
        if not self.kubectl:
            return {"seconds": float("nan"), "t0": 0.0, "t1": 0.0, "note": "no kubectl"}
        kc = ["--kubeconfig", str(self.migrator_kubeconfig)]
        ready()
        t0 = time.monotonic()
        get = subprocess.Popen([self.kubectl, *kc, "get", data.crd_name(group), "-A", "-o", "json"],
                               stdout=subprocess.PIPE)
        rep = subprocess.run([self.kubectl, *kc, "replace", "-f", "-"], stdin=get.stdout,
                             capture_output=True, text=True, check=False)
        get.stdout.close()
        get.wait()
        t1 = time.monotonic()
        ok = rep.returncode == 0 and get.returncode == 0
        return {"seconds": t1 - t0, "t0": t0, "t1": t1,
                "note": "" if ok else f"kubectl rc={rep.returncode}: {rep.stderr[-500:]}"}

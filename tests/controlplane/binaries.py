"""Locate (or build) the kube-apiserver, etcd and optional kube-controller-manager binaries."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
KUBE_VERSION = os.environ.get("KUBE_VERSION", "1.37.2")
ETCD_VERSION = os.environ.get("ETCD_VERSION", "3.6.16")


class BinariesMissing(RuntimeError):
    pass


@dataclass(frozen=True)
class Binaries:
    kube_apiserver: Path
    etcd: Path
    etcdctl: Path | None
    kube_controller_manager: Path | None


def _cache_root() -> Path:
    return Path(os.environ.get("CRDOPS_CACHE", Path.home() / ".cache" / "crdops"))


def find_binaries(build: bool = True, with_kcm: bool = False) -> Binaries:
    """Prefer KUBEBUILDER_ASSETS (envtest convention), else the version-keyed build cache.

    With `build=True` a missing binary triggers build.sh, which is a no-op when everything is cached.
    """
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        folder = Path(assets)
        kas, etcd = folder / "kube-apiserver", folder / "etcd"
        if not (kas.exists() and etcd.exists()):
            raise BinariesMissing(f"KUBEBUILDER_ASSETS={assets} must hold kube-apiserver and etcd")
        kcm = folder / "kube-controller-manager"
        etcdctl = folder / "etcdctl"
        return Binaries(kas, etcd, etcdctl if etcdctl.exists() else None, kcm if kcm.exists() else None)

    kube_dir = _cache_root() / "bin" / f"kube-{KUBE_VERSION}"
    etcd_dir = _cache_root() / "bin" / f"etcd-{ETCD_VERSION}"
    wanted = [kube_dir / "kube-apiserver", etcd_dir / "etcd"]
    if with_kcm:
        wanted.append(kube_dir / "kube-controller-manager")
    if not all(p.exists() for p in wanted):
        if not build:
            raise BinariesMissing(
                "control-plane binaries are not built; run tests/controlplane/build.sh "
                "(or set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd)")
        args = [str(HERE / "build.sh")] + (["--with-kcm"] if with_kcm else [])
        proc = subprocess.run(args, check=False)
        if proc.returncode != 0:
            raise BinariesMissing("tests/controlplane/build.sh failed; see the message above")
    kcm = kube_dir / "kube-controller-manager"
    return Binaries(kube_dir / "kube-apiserver", etcd_dir / "etcd", etcd_dir / "etcdctl",
                    kcm if kcm.exists() else None)

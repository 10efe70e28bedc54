"""Build the situation the collection fixes: objects stored at an old version after a storage flip."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tests.controlplane.kube import Kube, make_crd, objects_path


@dataclass
class Seeded:
    group: str
    plural: str
    kind: str
    scope: str

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    def old(self) -> str:
        return f"{self.group}/v1alpha1"

    def new(self) -> str:
        return f"{self.group}/v1beta1"


def create_objects(kube: Kube, s: Seeded, version: str, count: int, namespaces: list[str] | None,
                   start: int = 0, payload_bytes: int = 0, workers: int = 8) -> list[tuple[str | None, str]]:
    """Create `count` objects spread over `namespaces` (None for cluster scope); returns (ns, name)."""
    filler = "x" * payload_bytes

    def make(i: int):
        ns = namespaces[i % len(namespaces)] if namespaces else None
        name = f"obj-{i:06d}"
        body = {"apiVersion": f"{s.group}/{version}", "kind": s.kind, "metadata": {"name": name},
                "spec": {"index": i, "filler": filler}}
        kube.post(objects_path(s.group, version, s.plural, ns), body)
        return ns, name

    for ns in namespaces or []:
        kube.ensure_namespace(ns)
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(make, range(start, start + count)))


def crd_at(s: Seeded, storage: str, served: tuple[str, ...] = ("v1alpha1", "v1beta1"), labels=None) -> dict:
    return make_crd(s.group, s.plural, s.kind, [(v, True, v == storage) for v in served], s.scope, labels)


def seed_old_objects(kube: Kube, group: str, count: int, namespaces: list[str] | None = ("ns-a", "ns-b"),
                     plural: str = "widgets", kind: str = "Widget", payload_bytes: int = 0,
                     flip: bool = True, labels=None) -> Seeded:
    """A CRD stored at v1alpha1 with `count` objects; then (flip) v1beta1 becomes the storage version."""
    scope = "Namespaced" if namespaces else "Cluster"
    s = Seeded(group, plural, kind, scope)
    kube.apply_crd(crd_at(s, "v1alpha1", ("v1alpha1",), labels))
    create_objects(kube, s, "v1alpha1", count, list(namespaces) if namespaces else None, payload_bytes=payload_bytes)
    if flip:
        flip_storage(kube, s, "v1beta1", labels=labels)
    return s


def flip_storage(kube: Kube, s: Seeded, storage: str, labels=None) -> dict:
    return kube.apply_crd(crd_at(s, storage, labels=labels))

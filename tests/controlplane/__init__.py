"""A real Kubernetes control plane (kube-apiserver + etcd built from Go modules) for tests and the demo.

`Cluster`, `Fleet` and `HAPair` start real processes on loopback ports; `etcd_reader` reads what etcd
holds without going through the apiserver; `front_with_haproxy` puts HAProxy in front of an HA pair,
`start_ha_pair(lagging_member=True)` makes its second apiserver see etcd late (`DelayProxy`), and
`FaultFront` answers chosen writes with a 404 of its own. Nothing here is part of the shipped collection.
"""
from __future__ import annotations

from .binaries import Binaries, find_binaries
from .cluster import Cluster, Fleet, HAPair, front_with_haproxy, start_cluster, start_fleet, start_ha_pair
from .delay_proxy import DelayProxy
from .etcd_reader import StorageScan, current_revision, scan_storage

__all__ = [
    "Binaries", "find_binaries", "Cluster", "Fleet", "HAPair", "start_cluster", "start_fleet",
    "start_ha_pair", "StorageScan", "current_revision", "scan_storage", "front_with_haproxy", "DelayProxy",
]

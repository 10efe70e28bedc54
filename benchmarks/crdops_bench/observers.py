"""The two outside observers, side by side (probe.py): a ServiceAccount that API Priority and Fairness queues, and
the admin certificate that it exempts. Both sample at once, each request kind
of each in a process and on a connection of its own.

A row keeps each observer's windows as `<prefix>_idle` and `<prefix>_during`; the ServiceAccount's prefix stays
`probe`, the name of the rows from before there were two observers, so earlier rows.json files still report.
"""
from __future__ import annotations

import time
from pathlib import Path

from . import identities
from .probe import Probe, SampleStream, create_configmaps, summarize

SERVICE_ACCOUNT, EXEMPT = "service-account", "apf-exempt"
OBSERVERS = (SERVICE_ACCOUNT, EXEMPT)
PREFIX = {SERVICE_ACCOUNT: "probe", EXEMPT: "exempt"}
TITLE = {SERVICE_ACCOUNT: "ServiceAccount observer (APF queues it)", EXEMPT: "admin observer (APF-exempt)"}
SHORT = {SERVICE_ACCOUNT: "ServiceAccount", EXEMPT: "APF-exempt"}
WARM_UP_S = 2.0  # the first requests pay the TLS handshake: not part of anyone's idle window


def sample_file(workdir: Path, name: str, kind: str = "get") -> Path:
    """Where an observer's samples of one request kind go (probe.Probe names its streams' files so)."""
    return Path(workdir) / f"observer-{name}-{kind}.samples"


def start(bench) -> dict[str, Probe]:
    """Both observers, sampling; their sample files in the run's workdir."""
    kube, cluster = bench.kube, bench.cluster
    who = {SERVICE_ACCOUNT: identities.probe(kube, cluster.server, str(cluster.pki.ca_cert)),
           EXEMPT: identities.admin(cluster)}
    create_configmaps(kube)
    started: dict[str, Probe] = {}
    try:
        for name in OBSERVERS:
            started[name] = Probe(who[name], Path(bench.workdir) / f"observer-{name}.samples").start()
    except Exception:
        stop(started)
        raise
    time.sleep(WARM_UP_S)
    return started


def stop(observers: dict[str, Probe]) -> None:
    for probe in observers.values():
        probe.stop()


def windows(observers: dict[str, Probe], t0: float, t1: float, extra_percentiles: tuple = ()) -> dict[str, dict]:
    return {name: probe.window(t0, t1, extra_percentiles) for name, probe in observers.items()}


def row_window(row: dict, observer: str, when: str) -> dict:
    """An observer's `idle` or `during` window of a row ({} when the row has none)."""
    return row.get(f"{PREFIX[observer]}_{when}") or {}


def get_stat(row: dict, observer: str, when: str, stat: str = "p99") -> float:
    return (row_window(row, observer, when).get("get") or {}).get(stat, float("nan"))


def flow_schemas(kube, observers: dict[str, Probe]) -> str:
    """Which FlowSchema the apiserver named for each observer (X-Kubernetes-PF-FlowSchema-UID), as a sentence."""
    names = {}
    try:
        for fs in kube.get("/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas").get("items", []):
            names[fs["metadata"]["uid"]] = fs["metadata"]["name"]
    except Exception as exc:  # noqa: BLE001 - a sentence for the page, never a failed run
        return f"FlowSchemas not listed ({exc})"
    parts = []
    for name, probe in observers.items():
        uid = probe.flow_schema_uid
        schema = f"`{names.get(uid, uid)}`" if uid else "no FlowSchema header"
        parts.append(f"the {SHORT[name]} observer's requests under {schema}")
    return "the apiserver classified " + ", ".join(parts)


def complete_slowest(raw: list, workdir: Path) -> int:
    """Rows saved before each window kept its slowest GETs (probe.slowest): filled in from the run's own GET sample
    files beside rows.json, over the same during window [t0, t1). How many windows were filled."""
    filled = 0
    for name in OBSERVERS:
        path = sample_file(workdir, name)
        if not path.exists():
            continue
        stream = SampleStream(None, "get", path)
        for r in raw:
            during = row_window(r, name, "during").get("get")
            if during is None or "slowest_ms" in during or "t0" not in r:
                continue
            during["slowest_ms"] = summarize(stream.window(r["t0"], r["t1"]))["get"]["slowest_ms"]  # as a live run
            filled += 1
    return filled

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""What holds release N+1 back, for the whole fleet: one row per source, across every cluster.

Built from each cluster's ``broken_clients`` (crd_client_check ``check=writers``, one record per client of a
removed version per CRD) and ``held_back``. A row is the thing a platform team changes: a Flux Kustomization, a
Helm release, an Argo CD Application, a field manager whose objects name no source, or the readers the request
counters saw. It says what the source's controller says of it, the clusters it is on, the CRDs and versions, the
objects, and the fix. Accepted clients (``held: false``) hold nothing back: they are listed apart.

Rows come sorted so that the first unblocks the most clusters: first the rows that are the last holder on the
most clusters (fixing that row alone lets each of those clusters get release N+1), then by the clusters the row
is on, then by its objects (requests for readers), then by name.

Pure data shaping; no I/O.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..release.client_evidence import NOT_CHECKED_HELM
from ..release.writers import REQUESTS

HEADING = "What holds release N+1 back"
ACCEPTED_HEADING = "Accepted, holding nothing back (crd_upgrade_accept_broken_clients)"
ORDER = ("first the source that is the last holder on the most clusters (fixing it alone lets each of them get "
         "release N+1), then the one on the most clusters, then the one with the most objects")
COLUMNS = ("#", "source", "what its controller says", "clusters", "CRDs and versions", "objects", "fix")

FIELD_MANAGER = "field manager"  # a writer whose objects name no source: the manager itself is the row
READERS = "readers (request counters)"  # requests counted at a removed version: no name but "requests"
MAX_NAMED_CLUSTERS = 10  # a cell names this many clusters, then counts the rest; the JSON lists them all
MAX_EXAMPLES = 3

Key = Tuple[str, str]  # (what, ref)
# something besides the rows keeps release N+1 from a cluster (a CRD held back that no held record explains, or a
# failed phase): no row alone frees that cluster
NOT_A_ROW: Key = ("", "")
# user:password@ in a URL a controller's status may quote: the report never holds credentials
_URL_CREDENTIALS = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")


# the kinds of source client_evidence.sources_of and the Helm scan name, longest first ("Argo CD Application" is
# the start of the instance label's)
_LEGACY_WHATS = ("Argo CD Application (instance label)", "Argo CD Application", "Flux Kustomization", "Helm release")


def _legacy_source(record: Mapping[str, Any]) -> Optional[Tuple[str, str, Optional[str]]]:
    """A record of an older release has ``sources`` ("Flux Kustomization flux-system/apps", "Helm release
    shop/widgets (revision 4)") and no ``source``. One source is that source; several share the writer's objects,
    so the manager is the row."""
    sources = [str(s) for s in record.get("sources") or []]
    if len(sources) != 1:
        return None
    what = next((w for w in _LEGACY_WHATS if sources[0].startswith(w + " ")), None)
    if what is None:
        return None
    ref, _sep, rest = sources[0][len(what) + 1:].partition(" ")
    return what, ref, rest.strip().strip("()") or None


def source_of(record: Mapping[str, Any]) -> Tuple[str, str, Optional[str]]:
    """(what, ref, what its controller says) of a client record: the row it belongs to."""
    if record.get("seen_in") == "metrics":
        return READERS, REQUESTS, None
    source = record.get("source")
    if isinstance(source, Mapping) and source.get("what"):
        says = _URL_CREDENTIALS.sub(r"\1<redacted>@", str(source["says"])) if source.get("says") else None
        return str(source["what"]), str(source.get("ref") or ""), says
    legacy = _legacy_source(record) if "source" not in record else None
    if legacy:
        return legacy
    return FIELD_MANAGER, str(record.get("manager") or "?"), None


def held_crds(cluster: Mapping[str, Any]) -> Set[str]:
    """The CRDs the cluster's ``held_back`` list holds back."""
    return set(str(h.get("crd")) for h in cluster.get("held_back") or [] if isinstance(h, Mapping))


def is_held(record: Mapping[str, Any], held: Set[str]) -> bool:
    """Does this client hold release N+1 back? Its own ``held`` says so; a record without one (readers counted by
    the request counters, a report of an older release) holds it back when its CRD is held back."""
    if "held" in record:
        return bool(record["held"])
    return str(record.get("crd")) in held


def _new_row(what: str, ref: str) -> Dict[str, Any]:
    return {"source": what if what == READERS else "%s %s" % (what, ref), "what": what, "ref": ref, "says": [], "clusters": [],
            "last_holder_on": [], "crds": [], "objects": 0, "examples": [], "requests": 0, "watches": 0,
            "apiservers": [], "kinds": [], "managers": [], "accept_name": ref}


def _add_once(items: List[Any], item: Any) -> None:
    if item not in items:
        items.append(item)


def _add_crd(row: Dict[str, Any], record: Mapping[str, Any]) -> None:
    name = str(record.get("crd"))
    entry = next((c for c in row["crds"] if c["crd"] == name), None)
    if entry is None:
        entry = {"crd": name, "versions": [], "stays": []}
        row["crds"].append(entry)
    _add_once(entry["versions"], str(record.get("version")))
    if record.get("stays"):
        _add_once(entry["stays"], str(record["stays"]))


def _add_record(row: Dict[str, Any], cluster: str, record: Mapping[str, Any], says: Optional[str]) -> None:
    _add_once(row["clusters"], cluster)
    if says:
        _add_once(row["says"], says)
    _add_crd(row, record)
    if record.get("seen_in") == "metrics":
        row["requests"] += int(record.get("requests") or 0)
        row["watches"] += int(record.get("watches") or 0)
        _add_once(row["apiservers"], str(record.get("apiserver")))
        return
    row["objects"] += int(record.get("objects") or 0)
    _add_once(row["kinds"], str(record.get("kind") or "writes"))
    _add_once(row["managers"], str(record.get("manager") or "?"))
    for example in record.get("examples") or []:
        if len(row["examples"]) < MAX_EXAMPLES:
            row["examples"].append("%s: %s" % (cluster, example))


def _records(cluster: Mapping[str, Any]) -> Iterable[Tuple[Mapping[str, Any], bool]]:
    """Each client record of the cluster, with whether it holds release N+1 back. A record without ``stays``
    (readers counted by the request counters) takes it from another record of its CRD on the cluster."""
    held = held_crds(cluster)
    records = [r for r in cluster.get("broken_clients") or [] if isinstance(r, Mapping)]
    stays = dict((str(r.get("crd")), r["stays"]) for r in records if r.get("stays"))
    for record in records:
        if not record.get("stays") and str(record.get("crd")) in stays:
            record = dict(record, stays=stays[str(record.get("crd"))])
        yield record, is_held(record, held)


def collect(clusters: Iterable[Mapping[str, Any]]) -> Tuple[Dict[Key, Dict[str, Any]], Dict[Key, Dict[str, Any]],
                                                            Dict[str, Set[Key]]]:
    """(held rows, accepted rows, per cluster the rows that hold it back), each row filled from its records."""
    held_rows: Dict[Key, Dict[str, Any]] = {}
    accepted_rows: Dict[Key, Dict[str, Any]] = {}
    holders: Dict[str, Set[Key]] = {}
    for cluster in clusters:
        name = str(cluster.get("cluster"))
        for record, held in _records(cluster):
            what, ref, says = source_of(record)
            rows = held_rows if held else accepted_rows
            row = rows.setdefault((what, ref), _new_row(what, ref))
            _add_record(row, name, record, says)
            if held:
                holders.setdefault(name, set()).add((what, ref))
        # a CRD held back that no held record explains (a failed Helm rewrite, an older release's report)
        explained = set(str(r.get("crd")) for r, held in _records(cluster) if held)
        if held_crds(cluster) - explained or (cluster.get("status") == "failed" and name in holders):
            holders.setdefault(name, set()).add(NOT_A_ROW)
    return held_rows, accepted_rows, holders


# -- the fix, by the kind of source ------------------------------------------------------------------------------
def _stays(row: Mapping[str, Any]) -> str:
    stays: List[str] = []
    for crd in row["crds"]:
        for version in crd["stays"]:
            _add_once(stays, version)
    return ", ".join(stays) or "the version that stays"


def _accept_words(row: Mapping[str, Any]) -> str:
    return "crd_upgrade_accept_broken_clients: [%s]" % row["accept_name"]


def _helm_fix(row: Mapping[str, Any], stays: str) -> str:
    parts = []
    if any(kind != NOT_CHECKED_HELM for kind in row["kinds"]):
        parts.append("move the chart's templates to %s and upgrade the release (helm upgrade), or upgrade it to a "
                     "chart version that declares %s" % (stays, stays))
    if NOT_CHECKED_HELM in row["kinds"]:
        parts.append("grant the run read of the release's storage (what its controller says names the permission) "
                     "and run again; once its chart declares %s, accepting it by name releases it (%s)"
                     % (stays, _accept_words(row)))
    return "; ".join(parts)


def fix_of(row: Mapping[str, Any]) -> str:
    """What to change so that this source holds nothing back, by its kind."""
    what, stays = str(row["what"]), _stays(row)
    if what.startswith("Flux Kustomization"):
        return ("change apiVersion to %s in the path its source says, and let it reconcile: its inventory then "
                "says %s and the next run applies release N+1" % (stays, stays))
    if "Helm" in what:
        return _helm_fix(row, stays)
    if what.startswith("Argo CD"):
        # Argo CD writes on drift only: an apiVersion-only change leaves its managedFields entry where it was
        return ("move the manifests in Git to %s and sync with Replace=true or a forced sync: Argo CD writes on "
                "drift only, and an apiVersion-only change is no drift" % stays)
    if what == FIELD_MANAGER:
        return ("the controller or operator writing as %s must move to %s (upgrade it), or be accepted (%s)"
                % (row["ref"], stays, _accept_words(row)))
    if what == READERS:
        return ("find the reader by the request counters (the apiservers and verbs in the JSON's broken_clients) "
                "and move it to %s, or accept the requests (%s)" % (stays, _accept_words(row)))
    return "move %s to %s, let it apply, then run again" % (row["source"], stays)


# -- the row as the Markdown and HTML print it ---------------------------------------------------------------------
def _names(items: List[str]) -> str:
    shown = ", ".join(items[:MAX_NAMED_CLUSTERS])
    more = len(items) - MAX_NAMED_CLUSTERS
    return shown + (" and %d more" % more if more > 0 else "")


def _says_cell(row: Mapping[str, Any]) -> str:
    if row["says"]:
        return "; ".join(row["says"])
    if row["what"] == FIELD_MANAGER:
        return "no source: its objects name none"
    if row["what"] == READERS:
        return "no name: counted by the apiservers' request counters"
    return "not asked"


def _clusters_cell(row: Mapping[str, Any]) -> str:
    text = "%d: %s" % (len(row["clusters"]), _names(row["clusters"]))
    if row["last_holder_on"]:
        text += "; last holder on %d: %s" % (len(row["last_holder_on"]), _names(row["last_holder_on"]))
    return text


def _count(number: int, noun: str) -> str:
    return "%d %s%s" % (number, noun, "" if number == 1 else "es" if noun.endswith("h") else "s")


def _objects_cell(row: Mapping[str, Any]) -> str:
    if row["what"] == READERS:
        return "%s in the window, %s open" % (_count(row["requests"], "request"), _count(row["watches"], "watch"))
    if not row["objects"] and row["kinds"] == [NOT_CHECKED_HELM]:
        return "unknown: the release's storage was not read"
    examples = " (e.g. %s)" % ", ".join(row["examples"]) if row["examples"] else ""
    return "%d%s" % (row["objects"], examples)


def _crds_cell(row: Mapping[str, Any]) -> str:
    return "; ".join("%s %s (stays %s)" % (c["crd"], ",".join(c["versions"]), ",".join(c["stays"]) or "?")
                     for c in row["crds"])


def cells(rank: int, row: Mapping[str, Any]) -> List[str]:
    """The row in the order of COLUMNS."""
    return [str(rank), str(row["source"]), _says_cell(row), _clusters_cell(row), _crds_cell(row), _objects_cell(row),
            str(row["fix"])]


def line(rank: int, row: Mapping[str, Any], held: bool) -> str:
    """The row in one line, for the console and the list of accepted sources."""
    where = "on %s" % _names(row["clusters"])
    if not held:
        return "%s %s: %s (accepted: breaks when release N+1 is applied)" % (row["source"], where, _crds_cell(row))
    alone = " (last holder on %d)" % len(row["last_holder_on"]) if row["last_holder_on"] else ""
    return "#%d %s %s%s: %s; fix: %s" % (rank, row["source"], where, alone, _crds_cell(row), row["fix"])


# -- the table -----------------------------------------------------------------------------------------------------
def unblock_order(row: Mapping[str, Any]) -> Tuple[int, int, int, str, str]:
    """The sort key: last holder on the most clusters, then on the most clusters, then the most objects."""
    weight = int(row["objects"]) + int(row["requests"])
    return (-len(row["last_holder_on"]), -len(row["clusters"]), -weight, str(row["what"]), str(row["ref"]))


def _finish(rows: Iterable[Dict[str, Any]], holders: Mapping[str, Set[Key]], held: bool) -> List[Dict[str, Any]]:
    out = []
    for row in rows:
        key = (row["what"], row["ref"])
        row["clusters"] = sorted(row["clusters"])
        row["last_holder_on"] = sorted(c for c in row["clusters"] if holders.get(c) == {key})
        row["fix"] = fix_of(row)
        out.append(row)
    out.sort(key=unblock_order)
    for rank, row in enumerate(out, 1):
        row["cells"] = cells(rank, row)
        row["line"] = line(rank, row, held)
    return out


def holders_table(clusters: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
    """The fleet's table of what holds release N+1 back: ``rows`` (one per source, sorted so that the first
    unblocks the most clusters) and ``accepted`` (sources accepted to break, which hold nothing back), with the
    heading, the columns and the order as the report prints them."""
    held_rows, accepted_rows, holders = collect(clusters)
    return {"heading": HEADING, "columns": list(COLUMNS), "order": ORDER,
            "rows": _finish(held_rows.values(), holders, True),
            "accepted_heading": ACCEPTED_HEADING, "accepted": _finish(accepted_rows.values(), {}, False)}

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Fleet-level data shaping: wave settings as AWX surveys send them (filters a playbook calls, documented in the
sidecar .yml files of the same names), and the fleet report's steps of the crd_upgrade role (time stamps, the
report, its slice merge, the console's result lines, old run folders), which role_step.py registers as steps of
crd_upgrade_step so that they are not an API of their own.
"""

from __future__ import annotations

import datetime
import json
import os
import re

from ansible_collections.crdops.migration.plugins.module_utils._crdops.report import fleet_report

from ansible_collections.crdops.migration.plugins.module_utils._crdops.report import report_runs


class AnsibleFilterError(ValueError):
    """A bad value given to a filter. Not ansible.errors': importing controller code here changes how the
    modules' unit tests see warnings; ansible-core reports any exception of a filter with its message."""


_WAVE = re.compile(r"^\s*(\d+)\s*(%?)\s*$")
STATUSES = ("ok", "planned", "failed", "not run")


def _wave(item, text):
    """One batch size: a positive int or ``N%`` (1..100). Strings from a survey are accepted."""
    if isinstance(item, bool):
        raise AnsibleFilterError("crd_upgrade_waves: %r is not a batch size (in %s)" % (item, text))
    if isinstance(item, int):
        value, percent = item, ""
    else:
        match = _WAVE.match(str(item))
        if not match:
            raise AnsibleFilterError("crd_upgrade_waves: %r is not a batch size (a number or 'N%%') in %s" % (item, text))
        value, percent = int(match.group(1)), match.group(2)
    if value < 1 or (percent and value > 100):
        raise AnsibleFilterError("crd_upgrade_waves: %r out of range in %s" % (item, text))
    return "%d%%" % value if percent else value


def crd_upgrade_waves(value):
    """``serial`` for the fleet play from a list, a number, or text: ``'[1, "10%", "100%"]'``, ``1,10%,100%``, ``10``.

    An AWX survey sends a text answer as a string; ansible-core's ``serial`` would fail on it.
    """
    text = repr(value)
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = [v.strip().strip("'\"") for v in stripped[1:-1].split(",") if v.strip()]
        else:
            value = [v for v in stripped.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)):
        value = [value]
    if not value:
        raise AnsibleFilterError("crd_upgrade_waves: no batch size in %s" % text)
    return [_wave(item, text) for item in value]


def crd_upgrade_percent(value):
    """``max_fail_percentage`` from an int, ``"10"`` or ``"10%"`` (0..100), as a survey may send it."""
    match = None if isinstance(value, bool) else _WAVE.match(str(value))
    if match is None:
        raise AnsibleFilterError("crd_upgrade_percent: %r is not a percentage (0-100)" % (value,))
    number = int(match.group(1))
    if number > 100:
        raise AnsibleFilterError("crd_upgrade_percent: %r is over 100" % (value,))
    return number


def crd_upgrade_iso_utc(epoch):
    """ISO 8601 with the UTC offset (``2026-12-01T05:11:45+00:00``) from seconds since the epoch."""
    moment = datetime.datetime.fromtimestamp(float(epoch), tz=datetime.timezone.utc)
    return moment.replace(microsecond=0).isoformat()


def _rank(cluster):
    # a host listed by two slices: its real result beats "not run"
    return 0 if cluster.get("status") == "not run" else 1


def crd_upgrade_report_merge(reports, title=None, generated=None, run=None):
    """One fleet report from the reports of the slices of a run (files or set_stats artifacts)."""
    newest = {}
    for index, report in enumerate(r for r in (reports or []) if isinstance(r, dict)):
        # reports come oldest first: a slice that ran again counts once, with its newest report
        newest[str(report.get("slice") or "") or index] = report
    reports = list(newest.values())
    if not reports:
        raise AnsibleFilterError("report_merge: no slice report to merge")
    by_name = {}
    for report in reports:
        for cluster in report.get("clusters") or []:
            name = cluster.get("cluster")
            if name not in by_name or _rank(cluster) >= _rank(by_name[name]):
                by_name[name] = cluster
    clusters = [by_name[name] for name in sorted(by_name)]
    return fleet_report.build(clusters, {
        "title": title or reports[0].get("title"),
        "generated": generated or crd_upgrade_iso_utc(datetime.datetime.now(datetime.timezone.utc).timestamp()),
        "check_mode": any(bool(r.get("check_mode")) for r in reports),
        "slices": sorted(str(r.get("slice") or "") for r in reports),
        "run": run or {}})


def crd_upgrade_fleet_report(clusters, title, generated, slice="", run=None):
    """The fleet report from per-cluster results (step report_clusters): summary, headline, failures first
    with phase, cause and next step, one line per cluster, then each cluster's details (docs/report.md)."""
    return fleet_report.build(list(clusters or []), {"title": title, "generated": generated, "slice": str(slice or ""),
                                                     "check_mode": False, "run": run or {}})


def crd_upgrade_result_lines(result):
    """A cluster's ``crd_upgrade_result`` for the console: status line, one line per CRD that changed or will."""
    return fleet_report.result_lines(result or {})


def crd_upgrade_report_prune(root, keep, current=""):
    """The run folders in the report directory ``root`` beyond the newest ``keep`` (``crd_upgrade_report_keep``),
    oldest first; never ``current``, the folder ``latest`` points at, a link or a name the role did not make.

    Read here on the controller, where the reports are, instead of by a find and a stat task: this runs at
    the start of every playbook run, and nothing else on the controller needs the listing.
    """
    if not report_runs.keep_count(keep):
        return []   # keep all, or a keep the role's input check refuses: no need to read the directory
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    folders = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
    link = os.path.join(root, "latest")
    latest = os.path.basename(os.path.normpath(os.readlink(link))) if os.path.islink(link) else ""
    return report_runs.runs_to_prune(folders, keep, current=current or "", latest=latest)


class FilterModule:
    def filters(self):
        return {
            "crd_upgrade_waves": crd_upgrade_waves,
            "crd_upgrade_percent": crd_upgrade_percent,
        }

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""One migration run over the selected CRDs of a cluster: checks, skips, HA barrier, passes, totals.

Every CRD is checked before the first write, so one unmigratable CRD stops the run with nothing written.
A CRD whose storedVersions is already clean, or that carries a valid record of a complete pass, is
skipped unless forced: a rerun does not redo finished work.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from .barrier import wait_for_storage_version
from .crd import Crd
from .record import validate_record
from .restore import CrdResult, RestoreOptions, check_migratable, migrate_crd
from .transport import Transport

TOTAL_KEYS = ("listed", "rewritten", "unchanged", "gone", "failed", "throttled")


@dataclass(frozen=True)
class RunOptions(object):
    restore: RestoreOptions
    force: bool = False
    barrier_timeout: float = 60.0
    barrier_settle: float = 0.0
    progress_file: Optional[str] = None


@dataclass
class RunResult(object):
    crds: List[Dict[str, Any]] = field(default_factory=list)
    totals: Dict[str, int] = field(default_factory=lambda: dict((k, 0) for k in TOTAL_KEYS))
    changed: bool = False

    def problems(self) -> List[str]:
        return [p for p in (problem_of(entry) for entry in self.crds) if p]


def problem_of(entry: Dict[str, Any]) -> Optional[str]:
    """Why a CRD's pass does not count as complete, in one line naming the CRD and first object."""
    if entry.get("aborted_reason"):
        return "[CRD %s] pass stopped: %s" % (entry["name"], entry["aborted_reason"])
    if entry.get("failed"):
        first = (entry.get("first_failures") or [{}])[0]
        obj = "/".join(x for x in (first.get("namespace"), first.get("name")) if x)
        return "[CRD %s] %d objects failed; first: %s (HTTP %s): %s" % (
            entry["name"], entry["failed"], obj, first.get("status"), first.get("message"))
    if entry.get("record_error"):
        return entry["record_error"]
    return None


def skip_reason(crd: Crd, force: bool, has_valid_record: bool) -> Optional[str]:
    if force:
        return None
    if not crd.needs_migration:
        return "status.storedVersions is already [%s]" % crd.storage_version
    if has_valid_record:
        return "a valid migration record exists for storage version %s" % crd.storage_version
    return None


class ProgressFile(object):
    """A JSON file rewritten atomically after each page, for a role polling a background job."""

    def __init__(self, path: Optional[str], cluster: str, check_mode: bool,
                 on_error: Callable[[str], None]) -> None:
        self.path = path
        self.on_error = on_error
        self.state = dict(cluster=cluster, crds_total=0, crds_done=0, current=None,
                          check_mode=check_mode)  # type: Dict[str, Any]

    def update(self, info: Optional[Dict[str, Any]] = None) -> None:
        if not self.path:
            return
        if info is not None:
            self.state["current"] = info
        self.state["updated_at"] = time.time()
        try:
            fd, tmp = tempfile.mkstemp(prefix=".crdops-progress-", dir=os.path.dirname(os.path.abspath(self.path)))
            with os.fdopen(fd, "w") as fh:
                json.dump(self.state, fh)
            os.replace(tmp, self.path)
        except OSError as exc:
            self.on_error("cannot write progress_file %s: %s" % (self.path, exc))


def run_migration(transport: Transport, crds: List[Crd], options: RunOptions,
                  barrier_transports: Dict[str, Transport], progress: ProgressFile,
                  result: Optional[RunResult] = None) -> RunResult:
    """Migrate ``crds`` one after the other; fills ``result`` as it goes (partial on an exception)."""
    result = result if result is not None else RunResult()
    check_mode = options.restore.check_mode
    for crd in crds:  # every selected CRD is checked before the first write
        check_migratable(crd, transport.cluster_label)
    progress.state["crds_total"] = len(crds)
    for crd in crds:
        had_valid_record = validate_record(crd).ok
        skip = skip_reason(crd, options.force, had_valid_record)
        if skip:
            entry = CrdResult(crd=crd.name, storage_version=crd.storage_version,
                              stored_versions=list(crd.stored_versions), complete=True).to_dict()
        else:
            barrier = None
            if not check_mode:
                barrier = wait_for_storage_version(barrier_transports, crd, options.barrier_timeout,
                                                   options.barrier_settle).to_dict()
            entry = migrate_crd(transport, crd, options.restore, progress=progress.update).to_dict()
            entry["barrier"] = barrier
        entry["skipped"] = skip
        result.crds.append(entry)
        for key in TOTAL_KEYS:
            result.totals[key] += entry.get(key) or 0
        progress.state["crds_done"] += 1
        progress.update()
        # refreshing a record that was already valid (force) is not a change worth reporting
        first_record = entry["record_written"] and not had_valid_record
        if not skip and (entry["rewritten"] or first_record or check_mode):
            result.changed = True
    return result

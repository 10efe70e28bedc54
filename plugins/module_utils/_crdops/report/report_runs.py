# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Which run folders of the report directory go when a run keeps only the newest ``keep`` of them.

A run folder is named by the role (report_open.yml): ``<YYYYMMDDTHHMMSS.mmm>Z[-check][-merged][-slice-<x>]``.
The fixed-width UTC stamp leads, so the names sort by time. Anything else in the directory is the user's and is
never chosen; neither is the current run's folder nor the one ``latest`` points at, even when they are older
than the newest ``keep`` (a clock stepped back, a slice of the same run that started later).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Optional

RUN_ID = re.compile(r"\d{8}T\d{6}\.\d{3}Z(?:-check)?(?:-merged)?(?:-slice-[A-Za-z0-9_.-]+)?")


def keep_count(value: Any) -> Optional[int]:
    """``crd_upgrade_report_keep`` as a count (an int or its digits, as ``-e`` or a survey sends it), or None
    when it is not a whole number >= 0 (0 keeps every run folder)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    text = str(value).strip()
    return int(text) if text.isdigit() else None


def runs_to_prune(names: Iterable[str], keep: Any, current: str = "", latest: str = "") -> List[str]:
    """The run folders among ``names`` older than the newest ``keep``, oldest first. None for keep 0, and
    none for a keep that is not a count: deleting on a value the role's input check will refuse is not safe."""
    count = keep_count(keep)
    if count is None or count <= 0:
        return []
    runs = sorted(name for name in set(names) if RUN_ID.fullmatch(name))
    spared = {current, latest}
    return [name for name in runs[:max(len(runs) - count, 0)] if name not in spared]

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The apiserver's clock: the times it writes (Leases, managedFields) and its ``Date`` header.

Every decision about age (a Lease renewed, an entry written since) is made on the apiserver's clock, never the
controller's, which may be skewed.
"""

from __future__ import annotations

import email.utils
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional


def parse_time(value: Any) -> Optional[float]:
    """Seconds since the epoch of a Kubernetes Time/MicroTime (``2026-12-01T04:33:14.123456Z``)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:  # Python < 3.11 accepts at most 6 fractional digits; the API never sends more
            parsed = datetime.strptime(value.strip()[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
        except ValueError:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def server_now(date_header: Optional[str], fallback: Callable[[], float] = time.time) -> float:
    """The apiserver's clock (HTTP ``Date``), so that a skewed local clock cannot age or rejuvenate Leases."""
    if date_header:
        try:
            return email.utils.parsedate_to_datetime(date_header).timestamp()
        except (TypeError, ValueError):
            pass
    return fallback()

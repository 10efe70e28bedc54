# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Kubernetes Events on a CRD, so that ``kubectl describe crd`` shows what the migration did to it.

A CRD is cluster-scoped; Events about cluster-scoped objects live in the ``default`` namespace (as for
Nodes), and ``kubectl describe`` finds them by involvedObject. An Event is a courtesy to the operator,
never a condition of the migration: a failure to post one is returned, not raised.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Dict, Optional

from ..kube.crd import Crd
from .record import utc_now
from ..kube.transport import Transport, dumps

EVENT_NAMESPACE = "default"
REPORTING_COMPONENT = "crdops-migration"
MAX_MESSAGE = 1024  # the apiserver rejects longer Event messages

# reasons, in the CamelCase `kubectl describe` readers know from controllers
PASS_STARTED = "StorageMigrationStarted"
PASS_SUCCEEDED = "StorageMigrationSucceeded"
PASS_FAILED = "StorageMigrationFailed"
TRIM_SUCCEEDED = "StoredVersionsTrimmed"
TRIM_REFUSED = "StoredVersionsTrimRefused"
REPAIR_STARTED = "StorageRepairStarted"
REPAIR_SUCCEEDED = "StorageRepairSucceeded"
REPAIR_FAILED = "StorageRepairFailed"


def event_body(crd: Crd, reason: str, message: str, warning: bool, now: str) -> Dict[str, Any]:
    """A core/v1 Event about ``crd``; its name follows the ``<object>.<unique>`` convention."""
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "%s.%s" % (crd.name, uuid.uuid4().hex[:16]), "namespace": EVENT_NAMESPACE},
        "involvedObject": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                           "name": crd.name, "uid": crd.uid or None,
                           "resourceVersion": crd.resource_version or None},
        "reason": reason,
        "message": message[:MAX_MESSAGE],
        "type": "Warning" if warning else "Normal",
        "source": {"component": REPORTING_COMPONENT},
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": "%s-%d" % (os.uname().nodename, os.getpid()),
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }


def emit_crd_event(transport: Transport, crd: Crd, reason: str, message: str, *, warning: bool = False,
                   now: Optional[str] = None) -> Optional[str]:
    """Post an Event about ``crd``; returns why it could not be posted, or None."""
    body = event_body(crd, reason, message, warning, now or utc_now())
    try:
        resp = transport.request("POST", "/api/v1/namespaces/%s/events" % EVENT_NAMESPACE, body=dumps(body),
                                 content_type="application/json")
    except Exception as exc:  # noqa: BLE001 - an Event must never end a pass
        return "event %s not posted: %s" % (reason, exc)
    if not resp.ok:
        return "event %s not posted: HTTP %d %s" % (reason, resp.status, resp.api_message())
    return None

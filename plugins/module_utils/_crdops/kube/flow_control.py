# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Which API Priority and Fairness FlowSchema the run's own requests land in, for the plan.

The shipped ``docs/rbac/flowschema.yaml`` and ``prioritylevel.yaml`` give the migration's ServiceAccount a
priority level of its own; how fast a gentle pass may go at a given latency for other clients depends on them
(docs/performance.md). Whether they apply is decided by the apiserver, per request, from the user and the
FlowSchemas' rules, so the plan asks it: every answer carries ``X-Kubernetes-PF-FlowSchema-UID`` (the schema that
classified the request; kube-apiserver's APF filter sets it), compared with the UIDs of the shipped schema and of
the suggested ``exempt`` one (system:masters). A request like the re-store's (a resource request in
apiextensions) is the one classified, since a FlowSchema may match resource requests only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .transport import JSON, Transport

SHIPPED = "crdops-migration"  # metadata.name of docs/rbac/flowschema.yaml
EXEMPT = "exempt"  # the suggested FlowSchema of system:masters (kube-apiserver's bootstrap configuration)
FLOW_SCHEMA_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"
API_VERSIONS = ("v1", "v1beta3")  # flowcontrol v1 since Kubernetes 1.29, v1beta3 from 1.26
CLASSIFIED = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

IN_PLACE, EXEMPTED, ELSEWHERE, UNNAMED, NOT_CLASSIFIED = "shipped", "exempt", "other", "unknown", "off"


@dataclass(frozen=True)
class FlowControl:
    """Where our requests are classified: ``state`` one of shipped, exempt, other, unknown (the schemas could not
    be read), off (no APF header: APF disabled, or a request not classified)."""
    state: str
    flow_schema_uid: Optional[str] = None
    priority_level_uid: Optional[str] = None
    why: str = ""

    def to_dict(self) -> Dict[str, Any]:
        return {"state": self.state, "flow_schema_uid": self.flow_schema_uid,
                "priority_level_uid": self.priority_level_uid, "words": self.words()}

    def words(self) -> str:
        """The plan's sentence."""
        if self.state == IN_PLACE:
            return "API Priority and Fairness: the shipped FlowSchema %s is in place (a priority level of its own)" \
                % SHIPPED
        if self.state == EXEMPTED:
            return ("API Priority and Fairness: exempt (system:masters): nothing queues the writes, the pace alone "
                    "keeps other clients' latency; the shipped FlowSchema %s applies to a ServiceAccount" % SHIPPED)
        if self.state == ELSEWHERE:
            return ("API Priority and Fairness: the shipped FlowSchema %s is not in place (the requests fall under "
                    "another FlowSchema); docs/rbac/flowschema.yaml and prioritylevel.yaml give the run a level of "
                    "its own (docs/rbac.md)" % SHIPPED)
        if self.state == UNNAMED:
            return "API Priority and Fairness: FlowSchema %s, not named (%s)" % (self.flow_schema_uid, self.why)
        return "API Priority and Fairness: requests not classified (%s)" % (self.why or "no APF header")


def _schema_uid(transport: Transport, name: str) -> Tuple[Optional[str], Optional[int]]:
    """(uid of the FlowSchema ``name``, None) or (None, the HTTP status that answered its GET)."""
    status = None
    for version in API_VERSIONS:
        resp = transport.request("GET", "/apis/flowcontrol.apiserver.k8s.io/%s/flowschemas/%s" % (version, name),
                                 accept=JSON)
        if resp.ok:
            return str(((resp.json() or {}).get("metadata") or {}).get("uid") or "") or None, None
        status = resp.status
        if status != 404:  # forbidden or failing: another API version would answer the same
            break
    return None, status


def flow_control(transport: Transport) -> FlowControl:
    """Where the apiserver classifies a request like the re-store's; never raises for an answer it got."""
    resp = transport.request("GET", CLASSIFIED, query=[("limit", "1")], accept=JSON)
    schema, level = resp.header(FLOW_SCHEMA_HEADER), resp.header(PRIORITY_LEVEL_HEADER)
    if not schema:
        return FlowControl(NOT_CLASSIFIED, why="no %s header: APF is off on this apiserver" % FLOW_SCHEMA_HEADER
                           if resp.ok else "the classifying GET answered HTTP %s" % resp.status)
    forbidden = None
    for name, state in ((SHIPPED, IN_PLACE), (EXEMPT, EXEMPTED)):
        uid, status = _schema_uid(transport, name)
        if uid == schema:
            return FlowControl(state, schema, level)
        if status not in (None, 404):
            forbidden = status
    if forbidden is not None:
        return FlowControl(UNNAMED, schema, level, "GET flowschemas answered HTTP %s: grant get on "
                           "flowschemas.flowcontrol.apiserver.k8s.io to name it" % forbidden)
    return FlowControl(ELSEWHERE, schema, level)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""May this identity do what a run will do? One SelfSubjectAccessReview per verb and resource.

A review is a question, not an object: the apiserver answers it and stores nothing, so it is asked in check
mode too. Every authenticated identity may ask it (the ``system:basic-user`` ClusterRole), so a request that
fails is a problem of the connection, not a denial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .errors import BadInputError
from .transport import JSON, Transport, dumps, error_from_response

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
FIELDS = ("verb", "group", "resource", "subresource", "namespace", "name", "version")
REQUIRED = ("verb", "resource")


@dataclass(frozen=True)
class AccessCheck:
    """The ``resourceAttributes`` of one review."""

    verb: str
    resource: str
    group: str = ""
    subresource: Optional[str] = None
    namespace: Optional[str] = None
    name: Optional[str] = None
    version: Optional[str] = None

    @classmethod
    def from_dict(cls, value: Any, index: int = 0) -> AccessCheck:
        if not isinstance(value, Mapping):
            raise BadInputError("checks[%d]: expected a dictionary of resourceAttributes, got %r" % (index, value))
        unknown = sorted(set(value) - set(FIELDS))
        if unknown:
            raise BadInputError("checks[%d]: unknown key%s %s (known: %s)" % (
                index, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(FIELDS)))
        missing = [k for k in REQUIRED if not value.get(k)]
        if missing:
            raise BadInputError("checks[%d]: %s must be set" % (index, " and ".join(missing)))

        def text(key: str) -> Optional[str]:
            return None if value.get(key) is None else str(value[key])

        return cls(verb=str(value["verb"]), resource=str(value["resource"]), group=str(value.get("group") or ""),
                   subresource=text("subresource"), namespace=text("namespace"), name=text("name"),
                   version=text("version"))

    def attributes(self) -> Dict[str, str]:
        return {k: v for k, v in ((f, getattr(self, f)) for f in FIELDS) if v is not None}

    def describe(self) -> str:
        """``<verb> <resource>[/<subresource>].<group>[ in namespace <ns>]``"""
        return "%s %s%s.%s%s" % (self.verb, self.resource, "/" + self.subresource if self.subresource else "",
                                 self.group, " in namespace %s" % self.namespace if self.namespace else "")


@dataclass(frozen=True)
class AccessAnswer:
    check: AccessCheck
    allowed: bool
    reason: str = ""
    evaluation_error: str = ""

    def why_not(self) -> str:
        return self.reason or self.evaluation_error or "denied"

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.check.attributes(), allowed=self.allowed, reason=self.reason,
                    evaluation_error=self.evaluation_error, check=self.check.describe())


def review(transport: Transport, check: AccessCheck) -> AccessAnswer:
    """Ask the apiserver; raises the API's error (naming the cluster and the check) when it does not answer."""
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": check.attributes()}}
    resp = transport.request("POST", REVIEWS, body=dumps(body), content_type=JSON, accept=JSON)
    if not resp.ok:
        raise error_from_response(resp, "SelfSubjectAccessReview (%s)" % check.describe(),
                                  cluster=transport.cluster_label)
    status = (resp.json() or {}).get("status") or {}
    return AccessAnswer(check, allowed=bool(status.get("allowed")), reason=str(status.get("reason") or ""),
                        evaluation_error=str(status.get("evaluationError") or ""))


def review_all(transport: Transport, checks: Sequence[AccessCheck]) -> List[AccessAnswer]:
    seen: List[AccessCheck] = []
    for check in checks:  # each question once, in the order given
        if check not in seen:
            seen.append(check)
    return [review(transport, check) for check in seen]


def missing(answers: Sequence[AccessAnswer]) -> List[str]:
    """``<check> (<why not>)`` per check not allowed."""
    return ["%s (%s)" % (a.check.describe(), a.why_not()) for a in answers if not a.allowed]

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Engine exceptions. Every message names the cluster, CRD, object and the API's own message."""

from __future__ import annotations

from typing import Any, Dict, Optional


class CrdOpsError(Exception):
    """Base error. ``str()`` is a complete, secret-free sentence for ``fail_json(msg=...)``."""

    kind = "error"
    # the repair sets what it had done before failing, for the module to return
    partial_result: Optional[Dict[str, Any]] = None

    def __init__(
        self,
        message: str,
        *,
        cluster: Optional[str] = None,
        crd: Optional[str] = None,
        obj: Optional[str] = None,
        status: Optional[int] = None,
        api_message: Optional[str] = None,
        reason: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.cluster = cluster
        self.crd = crd
        self.obj = obj
        self.status = status
        self.api_message = api_message
        self.reason = reason

    def with_context(self, *, cluster: Optional[str] = None, crd: Optional[str] = None,
                     obj: Optional[str] = None) -> CrdOpsError:
        """Fill in context that was unknown where the error was raised (never overwrites)."""
        if cluster and not self.cluster:
            self.cluster = cluster
        if crd and not self.crd:
            self.crd = crd
        if obj and not self.obj:
            self.obj = obj
        return self

    def __str__(self) -> str:
        parts = []
        if self.cluster:
            parts.append("cluster %s" % self.cluster)
        if self.crd:
            parts.append("CRD %s" % self.crd)
        if self.obj:
            parts.append("object %s" % self.obj)
        text = self.message
        if parts:
            text = "[%s] %s" % (", ".join(parts), text)
        if self.status is not None:
            text += " (HTTP %d%s)" % (self.status, ", %s" % self.reason if self.reason else "")
        elif self.reason:
            text += " (%s)" % self.reason
        if self.api_message:
            text += ": %s" % self.api_message
        return text

    def to_dict(self) -> Dict[str, Any]:
        return {
            "kind": self.kind,
            "msg": str(self),
            "cluster": self.cluster,
            "crd": self.crd,
            "object": self.obj,
            "status": self.status,
            "api_message": self.api_message,
            "reason": self.reason,
        }


class BadInputError(CrdOpsError):
    kind = "bad_input"


def at_least(name: str, value: Optional[float], low: float, *, strict: bool = False) -> None:
    """The options dataclasses' one numeric check, so every option fails with the same words:
    ``<name> must be > <low>, got <value>`` (``strict``) or ``>= <low>``. ``None`` (unset) passes."""
    if value is None:
        return
    if value < low or (strict and value == low):
        raise BadInputError("%s must be %s %s, got %r" % (name, ">" if strict else ">=", low, value))


class OutcomeError(CrdOpsError):
    """The task ran to its end and its outcome is a failure (keys at another version, an apply that would fail,
    an incomplete pass). The message is complete as given; ``kind`` says which outcome."""

    def __init__(self, kind: str, message: str, **context: Any) -> None:
        super().__init__(message, **context)
        self.kind = kind

    def __str__(self) -> str:
        return self.message


class SelectionError(CrdOpsError):
    """Unknown CRD name, nothing selected, ambiguous selection."""

    kind = "selection"


class ConnectionFailed(CrdOpsError):
    """Cannot reach / authenticate to the apiserver (connection, TLS, 401)."""

    kind = "connection"


class PermissionDenied(CrdOpsError):
    """403 Forbidden."""

    kind = "permission"


class ConversionWebhookError(CrdOpsError):
    """The CRD's conversion webhook failed; the pass must stop (kubernetes#136919)."""

    kind = "conversion_webhook"


class AdmissionRejected(CrdOpsError):
    """An admission webhook / policy rejected the no-op write."""

    kind = "admission"


class RecordError(CrdOpsError):
    """Migration record missing or stale."""

    kind = "record"


class RefusalError(CrdOpsError):
    """A request that would break a safety invariant (e.g. dropping the storage version)."""

    kind = "refusal"


class ConflictError(CrdOpsError):
    """Optimistic lock failed: the object changed since it was read."""

    kind = "conflict"


class NotFoundError(CrdOpsError):
    kind = "not_found"


class ApiError(CrdOpsError):
    """Any other unexpected API status."""

    kind = "api"


class UnexpectedError(CrdOpsError):
    """An exception that is not ours (a credential plugin failing on token refresh, a library bug) raised while a
    pass runs. It stops the pass like our own fatal errors; its text is scrubbed and never carries a traceback."""

    kind = "unexpected"


_SECRET_PATTERNS = None  # compiled on first use


def scrub(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters with anything that looks like a credential replaced: bearer tokens,
    JWTs, ``token=``/``password=`` values and long base64-like runs (a failing exec plugin may echo its output)."""
    import re

    global _SECRET_PATTERNS
    if _SECRET_PATTERNS is None:
        _SECRET_PATTERNS = [
            re.compile(r"(?i)(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"),
            re.compile(r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9._-]+"),
            re.compile(r"(?i)((?:token|password|passwd|secret|api[_-]?key|client[_-]?key)\W{0,3}[=:]\s*)\S+"),
            re.compile(r"[A-Za-z0-9+/_=-]{32,}"),
        ]
    out = text
    for i, pattern in enumerate(_SECRET_PATTERNS):
        out = pattern.sub((lambda m: m.group(1) + "<redacted>") if i == 2 else (lambda m: "<redacted>"), out)
    out = " ".join(out.split())
    return out if len(out) <= limit else out[:limit] + "..."


def unexpected(exc: BaseException, what: str, **context: Any) -> UnexpectedError:
    """Wrap a foreign exception: its type and scrubbed message, with the context we know."""
    detail = scrub(str(exc))
    return UnexpectedError("%s failed with an unexpected %s%s" % (what, type(exc).__name__,
                                                                  ": %s" % detail if detail else ""), **context)

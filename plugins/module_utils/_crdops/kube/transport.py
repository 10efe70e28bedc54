# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""HTTP transport: raw JSON over one pooled urllib3 connection set, retries, throttling, QPS cap.

The hot path never touches the generated ``kubernetes`` models. Tests use any object that
satisfies :class:`Transport` (see ``tests/unit``).
"""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

try:
    import orjson

    HAS_ORJSON = True
except ImportError:  # pragma: no cover - exercised when orjson is absent
    HAS_ORJSON = False

try:
    from urllib3 import Timeout as _Urllib3Timeout

    HAS_URLLIB3 = True
except ImportError:  # pragma: no cover - urllib3 comes with the kubernetes library
    HAS_URLLIB3 = False

from .errors import (
    AdmissionRejected,
    ApiError,
    ConflictError,
    ConnectionFailed,
    ConversionWebhookError,
    CrdOpsError,
    NotFoundError,
    PermissionDenied,
)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is valid YAML, so a JSON body is accepted
ACCEPT_PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
ACCEPT_PARTIAL = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


def loads(data: bytes) -> Any:
    if HAS_ORJSON:
        return orjson.loads(data)
    return json.loads(data)


def dumps(obj: Any) -> bytes:
    if HAS_ORJSON:
        try:
            return orjson.dumps(obj)
        except TypeError:  # a dict key of a str subclass: ansible-core 2.16's unsafe text, in a module run in the worker
            pass
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


class ApiResponse:
    __slots__ = ("status", "headers", "data")

    def __init__(self, status: int, headers: Optional[Mapping[str, str]] = None, data: bytes = b"") -> None:
        self.status = status
        self.headers = dict(headers or {})
        self.data = data

    def __repr__(self) -> str:
        return "ApiResponse(status=%d, %d bytes)" % (self.status, len(self.data))

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        if not self.data:
            return {}
        return loads(self.data)

    def header(self, name: str) -> Optional[str]:
        lname = name.lower()
        for k, v in self.headers.items():
            if k.lower() == lname:
                return v
        return None

    def status_body(self) -> Dict[str, Any]:
        """The ``metav1.Status`` body, or ``{}`` when the body is not JSON."""
        try:
            body = self.json()
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def api_message(self) -> str:
        body = self.status_body()
        msg = body.get("message")
        if msg:
            return str(msg)
        text = self.data[:500].decode("utf-8", "replace").strip()
        return text or "no message"

    def api_reason(self) -> Optional[str]:
        reason = self.status_body().get("reason")
        return str(reason) if reason else None


def is_conversion_webhook_failure(resp: ApiResponse) -> bool:
    return resp.status >= 400 and "conversion webhook" in resp.api_message().lower()


ADMISSION_MARKERS = ("admission webhook", "denied the request", "validatingadmissionpolicy", "denied request")


def is_admission_rejection(message: str) -> bool:
    """Admission webhooks say 'admission webhook "x" denied the request'; policies say
    'ValidatingAdmissionPolicy 'x' with binding 'y' denied request'."""
    lowered = (message or "").lower()
    return any(marker in lowered for marker in ADMISSION_MARKERS)


def error_from_response(
    resp: ApiResponse,
    what: str,
    *,
    cluster: Optional[str] = None,
    crd: Optional[str] = None,
    obj: Optional[str] = None,
) -> CrdOpsError:
    """Map a failed response to the right exception class (with the API's own message)."""
    status = resp.status
    msg = resp.api_message()
    reason = resp.api_reason()
    kw: Dict[str, Any] = dict(cluster=cluster, crd=crd, obj=obj, status=status, api_message=msg, reason=reason)
    if is_conversion_webhook_failure(resp):
        return ConversionWebhookError("%s failed: conversion webhook error" % what, **kw)
    if status == 401:
        return ConnectionFailed("%s failed: not authenticated" % what, **kw)
    if is_admission_rejection(msg):
        # before 403: a webhook may deny with code 403, which is about this object, not our RBAC
        return AdmissionRejected("%s rejected by admission" % what, **kw)
    if status == 403:
        return PermissionDenied("%s failed: permission denied" % what, **kw)
    if status == 404:
        return NotFoundError("%s failed: not found" % what, **kw)
    if status == 409:
        return ConflictError("%s failed: conflict" % what, **kw)
    if status in (400, 422):
        return AdmissionRejected("%s rejected" % what, **kw)
    return ApiError("%s failed" % what, **kw)


class Transport(Protocol):
    """What the engine needs from a connection."""

    cluster_label: str

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Sequence[Tuple[str, str]]] = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        accept: Optional[str] = None,
    ) -> ApiResponse:
        ...  # pragma: no cover


class RetryPolicy:
    """Retry rules. ``deadline`` bounds the total time spent on one request."""

    RETRY_AFTER_STATUSES = (429, 503)
    BACKOFF_STATUSES = (500, 502, 504)

    def __init__(self, deadline: float = 120.0, base_delay: float = 0.2, max_delay: float = 10.0,
                 max_retry_after: float = 60.0) -> None:
        if deadline < 0:
            raise ValueError("retry deadline must be >= 0")
        self.deadline = float(deadline)
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.max_retry_after = max_retry_after

    def backoff(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        cap: float = min(self.max_delay, self.base_delay * (2 ** attempt))
        return cap / 2.0 + rng() * cap / 2.0  # "equal jitter"


class RateLimiter:
    """Token bucket shared by all threads of one transport."""

    def __init__(self, qps: float, burst: Optional[int] = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if qps <= 0:
            raise ValueError("max_qps must be > 0")
        self.qps = float(qps)
        self.capacity = float(burst if burst is not None else max(1, int(qps)))
        self._tokens = self.capacity
        self._clock = clock
        self._sleep = sleep
        self._last = clock()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.capacity, self._tokens + (now - self._last) * self.qps)
                self._last = now
                if self._tokens >= 1.0:
                    self._tokens -= 1.0
                    return
                wait = (1.0 - self._tokens) / self.qps
            self._sleep(wait)


class TransportStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.throttled = 0
        self.retries = 0

    def add(self, requests: int = 0, throttled: int = 0, retries: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.throttled += throttled
            self.retries += retries

    def snapshot(self) -> Dict[str, int]:
        with self._lock:
            return {"requests": self.requests, "throttled": self.throttled, "retries": self.retries}


def _parse_retry_after(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: fall back to backoff


class HttpTransport:
    """Thread-safe transport over a urllib3 ``PoolManager`` (or anything with its ``request``)."""

    def __init__(
        self,
        pool: Any,
        base_url: str,
        *,
        cluster_label: str,
        headers: Optional[Any] = None,
        auth_header: Optional[Callable[[], Optional[str]]] = None,
        retry: Optional[RetryPolicy] = None,
        rate_limiter: Optional[RateLimiter] = None,
        timeout: float = 60.0,
        connect_timeout: Optional[float] = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
        on_close: Optional[Callable[[], None]] = None,
    ) -> None:
        self._pool = pool
        self.base_url = base_url.rstrip("/")
        self.cluster_label = cluster_label
        self._headers = headers  # may be an HTTPHeaderDict (repeated Impersonate-Group)
        self._auth_header = auth_header
        self.retry = retry or RetryPolicy()
        self.rate_limiter = rate_limiter
        self.timeout = timeout
        # Until the cluster has answered once, a connection failure is not an apiserver restart to ride out
        # (retry.deadline) but an unreachable cluster: give up after connect_timeout and say so.
        self.connect_timeout = connect_timeout
        self._answered = False
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self._on_close = on_close
        self.stats = TransportStats()
        # seconds this thread spent waiting in request() rather than on the wire (max_qps bucket, retry sleeps):
        # the pace times whole writes and must not read our own throttling as the apiserver's latency
        self._local = threading.local()

    def __repr__(self) -> str:
        return "HttpTransport(cluster=%r, base_url=%r)" % (self.cluster_label, self.base_url)

    def for_endpoint(self, base_url: str, new_connection_per_request: bool = False) -> HttpTransport:
        """The same credentials and pool against another apiserver of the same cluster (HA).

        ``new_connection_per_request``: ask for ``Connection: close``, so that a load balancer in front of
        several apiservers may route every request to another one (the barrier's settle fallback).
        """
        headers = self._headers
        if new_connection_per_request:
            headers = headers.copy() if headers is not None else {}
            headers["Connection"] = "close"
        return HttpTransport(self._pool, base_url, cluster_label=self.cluster_label, headers=headers,
                             auth_header=self._auth_header, retry=RetryPolicy(deadline=min(self.retry.deadline, 5.0)),
                             timeout=min(self.timeout, 10.0), connect_timeout=self.connect_timeout, clock=self._clock,
                             sleep=self._sleep, rng=self._rng, on_close=lambda: None)

    def fresh_connections(self) -> HttpTransport:
        """This transport (URL, credentials, retries, ``max_qps`` bucket) with a new connection per request, so that
        a load balancer in front of several apiservers may send each request to another one."""
        headers = self._headers.copy() if self._headers is not None else {}
        headers["Connection"] = "close"
        return HttpTransport(self._pool, self.base_url, cluster_label=self.cluster_label, headers=headers,
                             auth_header=self._auth_header, retry=self.retry, rate_limiter=self.rate_limiter,
                             timeout=self.timeout, connect_timeout=self.connect_timeout, clock=self._clock,
                             sleep=self._sleep, rng=self._rng, on_close=lambda: None)

    def wire(self) -> Dict[str, Any]:
        """How this transport reaches the apiserver, for a second client that must do it the same way (the latency
        probe's own process): the URL; the headers it sends besides Authorization, as pairs (Impersonate-Group
        repeats); ``auth_header`` (a function: called per request, it runs the kubeconfig's token refresh); the
        name and keyword options of its connection pool (TLS files, CA, verification) and whether it goes through
        a proxy. Holds no secret itself except through ``auth_header``."""
        headers = self._headers
        pairs: List[Tuple[str, str]] = []
        if headers is not None:  # urllib3 1.x's items() joins a repeated header; iteritems() keeps each
            pairs = [(str(k), str(v)) for k, v in getattr(headers, "iteritems", headers.items)()]
        pool = self._pool
        return {"base_url": self.base_url, "headers": pairs, "auth_header": self._auth_header,
                "pool": type(pool).__name__, "pool_options": dict(getattr(pool, "connection_pool_kw", None) or {}),
                "proxy": getattr(pool, "proxy", None) is not None, "connect_timeout": self.connect_timeout}

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()
        else:
            clear = getattr(self._pool, "clear", None)
            if clear is not None:
                clear()

    def waited(self) -> float:
        """Seconds the calling thread has spent waiting inside request() so far (not on the wire)."""
        return float(getattr(self._local, "waited", 0.0))

    def _add_wait(self, seconds: float) -> None:
        self._local.waited = self.waited() + max(0.0, seconds)

    def _wait(self, seconds: float) -> None:
        self._sleep(seconds)
        self._add_wait(seconds)

    def _build_headers(self, content_type: Optional[str], accept: Optional[str]) -> Any:
        if self._headers is not None:
            headers = self._headers.copy()
        else:
            headers = {}
        headers["Accept"] = accept or JSON
        if content_type:
            headers["Content-Type"] = content_type
        if self._auth_header is not None:
            value = self._auth_header()
            if value:
                headers["Authorization"] = value
        return headers

    def _request_timeout(self) -> Any:
        """urllib3 timeout: TCP/TLS connect bounded by connect_timeout, the read by ``timeout``."""
        if self.connect_timeout is None or not HAS_URLLIB3:
            return self.timeout
        return _Urllib3Timeout(connect=min(self.connect_timeout, self.timeout), read=self.timeout)

    def _url(self, path: str, query: Optional[Sequence[Tuple[str, str]]]) -> str:
        url = self.base_url + path
        if query:
            from urllib.parse import urlencode

            url += "?" + urlencode(list(query))
        return url

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Sequence[Tuple[str, str]]] = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        accept: Optional[str] = None,
    ) -> ApiResponse:
        url = self._url(path, query)
        start = self._clock()
        deadline = start + self.retry.deadline
        attempt = 0
        while True:
            if self.rate_limiter is not None:
                waited = self._clock()
                self.rate_limiter.acquire()
                self._add_wait(self._clock() - waited)
            headers = self._build_headers(content_type, accept)
            self.stats.add(requests=1)
            try:
                raw = self._pool.request(
                    method, url, body=body, headers=headers, retries=False,
                    timeout=self._request_timeout(), preload_content=True, redirect=False,
                )
            except Exception as exc:  # urllib3.exceptions.HTTPError and socket errors
                delay = self._connection_retry_delay(exc, method, path, attempt, start, deadline)
            else:
                self._answered = True
                resp = ApiResponse(raw.status, dict(raw.headers.items()) if hasattr(raw.headers, "items") else {},
                                   raw.data or b"")
                answer_delay = self._answer_retry_delay(resp, attempt)
                if answer_delay is None or self._clock() + answer_delay > deadline:
                    return resp  # a final answer, or the caller sees the last failure
                delay = answer_delay
            self.stats.add(retries=1)
            attempt += 1
            self._wait(delay)

    def _connection_retry_delay(self, exc: Exception, method: str, path: str, attempt: int, start: float,
                                deadline: float) -> float:
        """Seconds to wait before retrying a request that got no answer, or ConnectionFailed when it may not."""
        name = type(exc).__name__
        # Never echo the exception text blindly: urllib3 messages contain the URL only,
        # but keep it short and free of headers.
        detail = "%s: %s" % (name, str(exc)[:300])
        if "SSL" in name or "Certificate" in name:
            raise ConnectionFailed("%s %s: TLS error" % (method, path), cluster=self.cluster_label,
                                   api_message=detail) from exc
        now = self._clock()
        delay = self.retry.backoff(attempt, self._rng)
        if not self._answered and self.connect_timeout is not None:
            # retried until connect_timeout has really passed (a cluster starting up gets all of it)
            left = start + self.connect_timeout - now
            if left <= 0:
                raise ConnectionFailed(
                    "%s %s: cluster unreachable, no answer within connect_timeout %.0fs (%d attempts)"
                    % (method, path, self.connect_timeout, attempt + 1),
                    cluster=self.cluster_label, api_message=detail) from exc
            delay = min(delay, left)
        if now + delay > deadline:
            raise ConnectionFailed(
                "%s %s: connection failed after %d attempts / %.1fs" % (method, path, attempt + 1, now - start),
                cluster=self.cluster_label, api_message=detail) from exc
        return delay

    def _answer_retry_delay(self, resp: ApiResponse, attempt: int) -> Optional[float]:
        """Seconds to wait before retrying an answer that asks for it (throttled, or a transient 5xx); None: final."""
        if resp.status in RetryPolicy.RETRY_AFTER_STATUSES:
            self.stats.add(throttled=1)
            retry_after = _parse_retry_after(resp.header("Retry-After"))
            if retry_after is not None:
                return min(retry_after, self.retry.max_retry_after)
            return self.retry.backoff(attempt, self._rng)
        if resp.status in RetryPolicy.BACKOFF_STATUSES and not is_conversion_webhook_failure(resp):
            return self.retry.backoff(attempt, self._rng)
        return None

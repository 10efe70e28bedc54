# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import json

import pytest

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ConnectionFailed
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import (
    HttpTransport, RateLimiter, RetryPolicy, error_from_response)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube import errors
from tests.unit.crdops_fakes import Clock, status


class Raw:
    def __init__(self, status, body=b"", headers=None):
        self.status = status
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = headers or {}


class Pool:
    def __init__(self, *responses):
        self.responses = list(responses)
        self.requests = []

    def request(self, method, url, **kw):
        self.requests.append((method, url, kw))
        r = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(r, Exception):
            raise r
        return r


def transport(pool, clock, deadline=120.0, **kw):
    return HttpTransport(pool, "https://api.example:6443/", cluster_label="c1", retry=RetryPolicy(deadline=deadline),
                         clock=clock, sleep=clock.sleep, rng=lambda: 0.5, **kw)


def test_429_honours_retry_after_and_counts_throttles():
    clock = Clock(t=0.0)
    pool = Pool(Raw(429, {"message": "slow down"}, {"Retry-After": "3"}), Raw(429, b"", {"retry-after": "1"}),
                Raw(200, {"ok": 1}))
    t = transport(pool, clock)
    r = t.request("GET", "/api")
    assert r.status == 200 and r.json() == {"ok": 1}
    assert clock.sleeps == [3.0, 1.0]
    assert t.stats.snapshot()["throttled"] == 2
    assert pool.requests[0][1] == "https://api.example:6443/api"


def test_503_without_retry_after_backs_off():
    clock = Clock(t=0.0)
    t = transport(Pool(Raw(503), Raw(200)), clock)
    assert t.request("GET", "/x").status == 200 and len(clock.sleeps) == 1 and clock.sleeps[0] > 0


@pytest.mark.parametrize("code", [500, 502, 504])
def test_5xx_retried_with_backoff_until_deadline_then_returned(code):
    clock = Clock(t=0.0)
    t = transport(Pool(Raw(code, {"message": "etcd leader changed"})), clock, deadline=10)
    r = t.request("GET", "/x")
    assert r.status == code and r.api_message() == "etcd leader changed"
    assert clock.t <= 10 and len(clock.sleeps) >= 3
    assert clock.sleeps[1] > clock.sleeps[0]  # exponential


def test_conversion_webhook_500_not_retried():
    clock = Clock(t=0.0)
    t = transport(Pool(Raw(500, {"message": "conversion webhook for x failed: refused"})), clock)
    r = t.request("GET", "/x")
    assert r.status == 500 and clock.sleeps == []


@pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 422])
def test_non_retryable_returned_immediately(code):
    clock = Clock(t=0.0)
    pool = Pool(Raw(code, {"message": "m"}))
    assert transport(pool, clock).request("PATCH", "/x", body=b"{}").status == code
    assert len(pool.requests) == 1


def test_connection_errors_retried_then_connection_failed_names_cluster():
    clock = Clock(t=0.0)
    t = transport(Pool(OSError("Connection refused")), clock, deadline=5)
    with pytest.raises(ConnectionFailed) as ei:
        t.request("GET", "/apis")
    assert "cluster c1" in str(ei.value) and "Connection refused" in str(ei.value)
    assert clock.t <= 5 and clock.sleeps


def test_connection_error_then_success():
    clock = Clock(t=0.0)
    t = transport(Pool(OSError("reset"), Raw(200, {"a": 1})), clock)
    assert t.request("GET", "/x").json() == {"a": 1} and t.stats.snapshot()["retries"] == 1


def test_tls_error_not_retried():
    class SSLError(Exception):
        pass
    clock = Clock(t=0.0)
    t = transport(Pool(SSLError("certificate verify failed")), clock)
    with pytest.raises(ConnectionFailed) as ei:
        t.request("GET", "/x")
    assert "TLS" in str(ei.value) and clock.sleeps == []


def test_headers_auth_and_query():
    clock = Clock(t=0.0)
    pool = Pool(Raw(200))
    t = transport(pool, clock, headers={"Impersonate-User": "alice"}, auth_header=lambda: "Bearer s3cr3t")
    t.request("GET", "/x", query=[("limit", "5"), ("continue", "a/b")], accept="application/json")
    method, url, kw = pool.requests[0]
    assert url.endswith("/x?limit=5&continue=a%2Fb")
    assert kw["headers"]["Authorization"] == "Bearer s3cr3t" and kw["headers"]["Impersonate-User"] == "alice"
    assert kw["retries"] is False
    assert "s3cr3t" not in repr(t)


def test_rate_limiter_spaces_requests():
    clock = Clock(t=0.0)
    rl = RateLimiter(2, burst=1, clock=clock, sleep=clock.sleep)
    for _request in range(5):
        rl.acquire()
    assert clock.t == pytest.approx(2.0)
    with pytest.raises(ValueError):
        RateLimiter(0)


@pytest.mark.parametrize("code,msg,cls", [
    (500, "conversion webhook for a/v1 failed: x", errors.ConversionWebhookError),
    (400, 'admission webhook "v.example.com" denied the request: no', errors.AdmissionRejected),
    (422, "spec.x: Invalid value", errors.AdmissionRejected),
    (403, "forbidden", errors.PermissionDenied),
    (401, "Unauthorized", errors.ConnectionFailed),
    (404, "not found", errors.NotFoundError),
    (409, "modified", errors.ConflictError),
    (418, "teapot", errors.ApiError),
])
def test_error_classification(code, msg, cls):
    err = error_from_response(status(code, msg, "R"), "PATCH", cluster="c1", crd="a.b", obj="ns/o")
    # The exact class, not isinstance(): all of them subclass CrdOpsError, and the 418 case must be plain ApiError,
    # not some more specific class that happens to subclass it.
    assert err.__class__ is cls
    text = str(err)
    assert "cluster c1" in text and "CRD a.b" in text and "object ns/o" in text and msg in text
    assert "HTTP %d" % code in text


def test_never_answering_cluster_fails_at_connect_timeout_naming_it():
    clock = Clock(t=0.0)
    t = transport(Pool(OSError("Connection refused")), clock, deadline=120, connect_timeout=10)
    with pytest.raises(ConnectionFailed) as ei:
        t.request("GET", "/version")
    assert clock.t <= 10, clock.t
    msg = str(ei.value)
    assert "cluster c1" in msg and "connect_timeout 10s" in msg and "Connection refused" in msg


def test_after_a_first_answer_connection_loss_rides_out_the_retry_deadline():
    clock = Clock(t=0.0)
    pool = Pool(Raw(200), *([OSError("Connection refused")] * 8), Raw(200, {"back": 1}))
    t = transport(pool, clock, deadline=120, connect_timeout=10)
    assert t.request("GET", "/a").status == 200
    r = t.request("GET", "/b")
    assert r.json() == {"back": 1} and clock.t > 10


def test_connect_timeout_bounds_only_the_tcp_connect():
    clock = Clock(t=0.0)
    pool = Pool(Raw(200))
    transport(pool, clock, connect_timeout=7, timeout=60).request("GET", "/a")
    timeout = pool.requests[0][2]["timeout"]
    assert (timeout.connect_timeout, timeout.read_timeout) == (7, 60)

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Sending a CRD's conversion webhook a ConversionReview of made-up objects, the way the apiserver does.

- ``clientConfig.url``: called directly over TLS, the server certificate checked against the CRD's
  ``caBundle`` (the system roots when there is none), as the apiserver would.
- ``clientConfig.service``: through the apiserver's service proxy,
  ``POST /api/v1/namespaces/<ns>/services/https:<name>:<port>/proxy/<path>``, which needs ``create`` on
  ``services/proxy`` in that namespace (docs/rbac.md). The apiserver refuses to proxy to a loopback
  endpoint address.

Nothing is written: a ConversionReview only asks the webhook to convert what it is sent.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import uuid
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from ..kube.errors import ConnectionFailed, ConversionWebhookError, CrdOpsError
from ..kube.transport import JSON, Transport, error_from_response

REVIEW_VERSIONS = ("v1", "v1beta1")  # ConversionReview versions we speak (same shape in both)
TIMEOUT_S = 10.0


def review_body(api_version: str, desired: str, objects: List[Dict[str, Any]]) -> Dict[str, Any]:
    return {"apiVersion": api_version, "kind": "ConversionReview",
            "request": {"uid": str(uuid.uuid4()), "desiredAPIVersion": desired, "objects": objects}}


def converted_objects(reply: Any, count: int, where: str) -> List[Dict[str, Any]]:
    """The ``convertedObjects`` of a ConversionReview answer; raises naming the webhook's own message."""
    response = reply.get("response") if isinstance(reply, Mapping) else None
    if not isinstance(response, Mapping):
        raise ConversionWebhookError("%s answered without a ConversionReview response" % where)
    result = response.get("result") or {}
    if result.get("status") != "Success":
        raise ConversionWebhookError("%s refused the made-up objects" % where,
                                     api_message=str(result.get("message") or result))
    objs = response.get("convertedObjects")
    if not isinstance(objs, list) or len(objs) != count:
        raise ConversionWebhookError("%s returned %s objects for %d sent" % (
            where, len(objs) if isinstance(objs, list) else "no", count))
    return [o if isinstance(o, dict) else {} for o in objs]


class WebhookCaller:
    """One CRD's conversion webhook: ``convert(objects, desired)`` answers the converted objects."""

    def __init__(self, transport: Transport, webhook: Mapping[str, Any], timeout: float = TIMEOUT_S) -> None:
        self.transport = transport
        self.config = webhook.get("clientConfig") or {}
        spoken = [v for v in webhook.get("conversionReviewVersions") or ("v1",) if v in REVIEW_VERSIONS]
        self.review_version = "apiextensions.k8s.io/%s" % (spoken[0] if spoken else "v1")
        self.timeout = timeout

    @property
    def route(self) -> str:
        """``url`` or ``service`` (how the webhook is reached), for the result."""
        return "url" if self.config.get("url") else "service"

    def describe(self) -> str:
        svc = self.config.get("service") or {}
        if self.config.get("url"):
            parts = urlsplit(str(self.config["url"]))
            return "webhook %s://%s%s" % (parts.scheme, parts.netloc, parts.path)
        return "webhook service %s/%s:%s%s" % (svc.get("namespace"), svc.get("name"), svc.get("port", 443),
                                               svc.get("path") or "")

    def convert(self, objects: List[Dict[str, Any]], desired: str) -> List[Dict[str, Any]]:
        body = json.dumps(review_body(self.review_version, desired, objects)).encode("utf-8")
        if self.config.get("url"):
            status, data = self._post_url(str(self.config["url"]), body)
        else:
            status, data = self._post_service(body)
        if status >= 300:
            raise ConversionWebhookError("%s answered HTTP %d" % (self.describe(), status), status=status,
                                         api_message=data[:300].decode("utf-8", "replace"))
        try:
            reply = json.loads(data)
        except ValueError as exc:
            raise ConversionWebhookError("%s answered no JSON: %s" % (self.describe(), exc)) from exc
        return converted_objects(reply, len(objects), self.describe())

    def _tls(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        bundle = self.config.get("caBundle")
        if bundle:
            ctx = ssl.create_default_context(cadata=base64.b64decode(bundle).decode("ascii"))
        return ctx

    def _post_url(self, url: str, body: bytes) -> Tuple[int, bytes]:
        parts = urlsplit(url)
        path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
        conn = http.client.HTTPSConnection(parts.hostname or "", parts.port or 443, timeout=self.timeout,
                                           context=self._tls())
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": JSON, "Accept": JSON})
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:  # ssl.SSLError is an OSError
            raise ConnectionFailed("%s could not be reached: %s" % (self.describe(), exc)) from exc
        finally:
            conn.close()

    def _post_service(self, body: bytes) -> Tuple[int, bytes]:
        svc = self.config.get("service") or {}
        path = "/api/v1/namespaces/%s/services/https:%s:%s/proxy%s" % (
            svc.get("namespace"), svc.get("name"), svc.get("port", 443), svc.get("path") or "/")
        resp = self.transport.request("POST", path, body=body, content_type=JSON, accept=JSON)
        if resp.status in (401, 403):
            raise error_from_response(resp, "POST to %s through the apiserver's service proxy" % self.describe())
        return resp.status, resp.data


def webhook_of(crd_obj: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    conversion = (crd_obj.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    webhook = conversion.get("webhook")
    return webhook if isinstance(webhook, Mapping) else None


def is_permission_error(exc: CrdOpsError) -> bool:
    return exc.kind == "permission"

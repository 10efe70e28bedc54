# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Ask a CRD's conversion webhook to convert objects, the way the apiserver does: a ``ConversionReview``.

Writes nothing: the webhook converts what it is sent and answers. Used where the apiserver cannot show an
object at a version (a version that is no longer served, whose objects are still stored at it).

Where the webhook is reached:

* ``url:`` - directly, over TLS verified with the CRD's ``caBundle`` (as the apiserver does).
* ``service:`` - through the apiserver's ``services/proxy`` subresource
  (``/api/v1/namespaces/<ns>/services/https:<name>:<port>/proxy<path>``), with the run's credentials; that needs
  ``create`` on ``services/proxy`` in the webhook's namespace (docs/rbac.md). The apiserver proxies to one of
  the Service's endpoints and does not verify the webhook's certificate on that hop.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence

from .crd import Crd
from .errors import CrdOpsError
from .transport import JSON, Transport, dumps

try:
    import urllib3

    HAS_URLLIB3 = True
except ImportError:  # pragma: no cover - depends on the environment
    HAS_URLLIB3 = False

TIMEOUT_S = 10.0
Converter = Callable[[Crd, Sequence[Dict[str, Any]], str], List[Dict[str, Any]]]


class ConversionReviewError(CrdOpsError):
    """The webhook could not be asked, or did not convert."""

    kind = "conversion_review"


def review_api_version(crd: Crd) -> str:
    versions = (crd.conversion_webhook or {}).get("conversionReviewVersions") or ["v1"]
    return "apiextensions.k8s.io/%s" % ("v1" if "v1" in versions else versions[0])


def review_body(crd: Crd, objects: Sequence[Dict[str, Any]], desired_api_version: str, uid: str) -> Dict[str, Any]:
    return {"apiVersion": review_api_version(crd), "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired_api_version, "objects": list(objects)}}


def converted_objects(answer: Any, uid: str, count: int, crd: Crd) -> List[Dict[str, Any]]:
    """The ``convertedObjects`` of a webhook's answer, checked as the apiserver checks them."""
    response = (answer or {}).get("response") if isinstance(answer, dict) else None
    if not isinstance(response, dict):
        raise ConversionReviewError("the conversion webhook answered without a ConversionReview response",
                                    crd=crd.name)
    result = response.get("result") or {}
    if result.get("status") != "Success":
        raise ConversionReviewError("the conversion webhook refused: %s" % (result.get("message") or result),
                                    crd=crd.name)
    if response.get("uid") != uid:
        raise ConversionReviewError("the conversion webhook answered another request (uid %r)" % response.get("uid"),
                                    crd=crd.name)
    objects = response.get("convertedObjects") or []
    if len(objects) != count:
        raise ConversionReviewError("the conversion webhook returned %d objects for %d" % (len(objects), count),
                                    crd=crd.name)
    return list(objects)


def _post_url(url: str, ca_bundle: Optional[str], body: bytes, timeout: float) -> Any:
    if not HAS_URLLIB3:  # pragma: no cover
        raise ConversionReviewError("urllib3 is required to call a url: conversion webhook")
    tls: Dict[str, Any] = {"cert_reqs": "CERT_REQUIRED"}
    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as ca:
        if ca_bundle:
            ca.write(base64.b64decode(ca_bundle))
            ca.flush()
            tls["ca_certs"] = ca.name
        pool = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(total=timeout), **tls)
        try:
            resp = pool.request("POST", url, body=body, headers={"Content-Type": JSON, "Accept": JSON})
        except (urllib3.exceptions.HTTPError, ssl.SSLError, OSError) as exc:
            raise ConversionReviewError("the conversion webhook %s could not be reached: %s" % (url, exc)) from exc
        finally:
            pool.clear()
    if resp.status != 200:
        raise ConversionReviewError("the conversion webhook %s answered HTTP %d" % (url, resp.status))
    return json.loads(resp.data)


def _post_service(transport: Transport, service: Dict[str, Any], body: bytes) -> Any:
    path = "/api/v1/namespaces/%s/services/https:%s:%s/proxy%s" % (
        service.get("namespace"), service.get("name"), service.get("port") or 443, service.get("path") or "")
    resp = transport.request("POST", path, body=body, content_type=JSON, accept=JSON)
    if not resp.ok:
        raise ConversionReviewError("the conversion webhook (Service %s/%s, through services/proxy) could not be "
                                    "asked: HTTP %d %s" % (service.get("namespace"), service.get("name"),
                                                           resp.status, resp.api_message()),
                                    status=resp.status, api_message=resp.api_message())
    return resp.json()


def webhook_converter(transport: Transport, timeout: float = TIMEOUT_S) -> Converter:
    """A converter for the CRDs of this cluster: ``convert(crd, objects, "group/version") -> objects``."""

    def convert(crd: Crd, objects: Sequence[Dict[str, Any]], desired_api_version: str) -> List[Dict[str, Any]]:
        config = (crd.conversion_webhook or {}).get("clientConfig") or {}
        uid = str(uuid.uuid4())
        body = dumps(review_body(crd, objects, desired_api_version, uid))
        try:
            if config.get("url"):
                answer = _post_url(str(config["url"]), crd.conversion_ca_bundle, body, timeout)
            elif config.get("service"):
                answer = _post_service(transport, config["service"], body)
            else:
                raise ConversionReviewError("the CRD names no conversion webhook (clientConfig has no url or service)")
        except CrdOpsError as exc:
            exc.with_context(cluster=transport.cluster_label, crd=crd.name)
            raise
        return converted_objects(answer, uid, len(objects), crd)

    return convert

"""cert-manager's own webhook, built from its Go module (``build.sh``), run locally with TLS, for tests.

`webhook_binary()` builds or finds the binary (cached by version like the control plane); `CertManagerWebhook`
runs it (on loopback unless told otherwise) with a serving certificate signed by the test cluster's CA; `crds_for(release,
webhook)` reads cert-manager's CRDs of a release (tests/data/fixtures/cert-manager) with their conversion
webhook pointed at it.

Two routes, as users run it: ``url:``, or ``service:`` as cert-manager ships its CRDs (``service:
cert-manager/cert-manager-webhook``). For ``service:`` the webhook listens on a non-loopback address of this machine
and ``tests.controlplane.webhook.publish_as_service`` gives it a Service with that one endpoint: kube-apiserver
(``--enable-aggregator-routing``) converts through the endpoint, since no kube-proxy routes ClusterIPs here, and its
service proxy, which the collection uses to learn the field mapping, refuses loopback endpoints. The webhook is
cert-manager's own code either way. Nothing here is part of the shipped collection.
"""
from __future__ import annotations

from .webhook import (CertManagerWebhook, CertManagerWebhookMissing, RELEASES, crd_file, crds_for, webhook_binary,
                      write_crds)

__all__ = ["CertManagerWebhook", "CertManagerWebhookMissing", "RELEASES", "crd_file", "crds_for",
           "webhook_binary", "write_crds"]

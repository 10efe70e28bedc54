"""cert-manager's own webhook, built from its Go module (``build.sh``), run locally with TLS, for tests.

`webhook_binary()` builds or finds the binary (cached by version like the control plane); `CertManagerWebhook`
runs it on a loopback port with a serving certificate signed by the test cluster's CA; `crds_for(release,
webhook)` reads cert-manager's CRDs of a release (tests/data/fixtures/cert-manager) with their conversion
webhook pointed at it.

Why ``url:`` and not cert-manager's ``service: cert-manager/cert-manager-webhook``: kube-apiserver resolves a
``service:`` webhook to the Service's ClusterIP (without ``--enable-aggregator-routing``), which nothing routes
here (no kube-proxy); with endpoint routing, or through ``services/proxy``, it refuses loopback endpoints, and
tests on this machine may only reach loopback addresses. The webhook is cert-manager's own code either way; only
the address the apiserver uses to reach it differs. Nothing here is part of the shipped collection.
"""
from __future__ import annotations

from .webhook import (CertManagerWebhook, CertManagerWebhookMissing, RELEASES, crd_file, crds_for, webhook_binary,
                      write_crds)

__all__ = ["CertManagerWebhook", "CertManagerWebhookMissing", "RELEASES", "crd_file", "crds_for",
           "webhook_binary", "write_crds"]

"""Build, start and stop cert-manager's webhook; cert-manager's CRDs with their webhook pointed at it."""
from __future__ import annotations

import base64
import copy
import os
import subprocess
import time
from pathlib import Path

import yaml

from tests.controlplane.pki import Pki, _sign
from tests.controlplane.processes import ManagedProcess, free_port, port_is_listening

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "data" / "fixtures" / "cert-manager"
VERSION = os.environ.get("CERT_MANAGER_VERSION", "1.5.4")
RELEASES = {"v1.5.4": "v1.5.4-rendered-openshift-3eca0fc", "v1.6.1": "v1.6.1-rendered-openshift-3e502b3",
            "v1.7.1": "v1.7.1-rendered-openshift-4ee45f0"}
PLURALS = ("certificaterequests", "certificates", "issuers")


class CertManagerWebhookMissing(RuntimeError):
    pass


def webhook_binary(build: bool = True) -> Path:
    """The cached webhook binary; built by build.sh when missing (a few minutes cold, once)."""
    path = Path(subprocess.run([str(HERE / "build.sh"), "--print-path"], capture_output=True, text=True,
                               check=True).stdout.strip())
    if not path.exists() and build:
        proc = subprocess.run([str(HERE / "build.sh")], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CertManagerWebhookMissing(proc.stderr[-3000:] or proc.stdout[-3000:])
    if not path.exists():
        raise CertManagerWebhookMissing(f"{path} not built (tests/certmanager/build.sh)")
    return path


class CertManagerWebhook:
    """cert-manager's webhook with a certificate from the cluster's CA (``pki``), reached at ``host`` (127.0.0.1),
    or as the Service ``service`` (namespace, name) when given: its CRDs then say ``service:`` as cert-manager's own
    do, the certificate names ``<name>.<namespace>.svc``, and ``host`` must not be loopback (see
    ``tests.controlplane.webhook.publish_as_service``).

    It serves ``/convert`` (and validation/mutation) from static certificate files; ``--api-server-host`` names
    an address nothing listens on: conversion needs no apiserver, and the webhook only builds a client."""

    def __init__(self, pki: Pki, folder: Path, host: str = "127.0.0.1", service: tuple[str, str] | None = None):
        self.pki = pki
        self.folder = folder
        self.host = host
        self.service = service
        self.port = free_port()
        self.cert, self.key = folder / "cm-webhook.crt", folder / "cm-webhook.key"
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}/convert"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.pki.ca_cert.read_bytes()).decode()

    def start(self, timeout: float = 30.0) -> "CertManagerWebhook":
        binary = webhook_binary()
        self.folder.mkdir(parents=True, exist_ok=True)
        if not self.cert.exists():
            _sign(self.pki, self.key, self.cert, "/CN=cert-manager-webhook",
                  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                  f"extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:{self.host}{self.dns_name()}\n"
                  "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")
        argv = [str(binary), f"--secure-port={self.port}", f"--healthz-port={free_port()}",
                f"--tls-cert-file={self.cert}", f"--tls-private-key-file={self.key}",
                f"--api-server-host=https://127.0.0.1:{free_port()}"]
        self.process = ManagedProcess("cert-manager-webhook", argv, self.folder / "cm-webhook.log").start()
        deadline = time.monotonic() + timeout
        while not port_is_listening(self.host, self.port):
            if not self.process.alive() or time.monotonic() > deadline:
                raise CertManagerWebhookMissing("cert-manager webhook did not start:\n" + self.process.log_tail())
            time.sleep(0.1)
        return self

    def dns_name(self) -> str:
        return f",DNS:{self.service[1]}.{self.service[0]}.svc" if self.service else ""

    def client_config(self) -> dict:
        """The CRDs' ``conversion.webhook.clientConfig``: ``url:``, or ``service:`` as cert-manager ships it."""
        if self.service is None:
            return {"url": self.url, "caBundle": self.ca_bundle}
        return {"service": {"namespace": self.service[0], "name": self.service[1], "path": "/convert", "port": 443},
                "caBundle": self.ca_bundle}

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None


def crd_file(release: str, plural: str) -> Path:
    return FIXTURES / RELEASES[release] / f"{plural}.cert-manager.io-crd.yaml"


def crds_for(release: str, webhook: CertManagerWebhook | None = None, storage: str | None = None) -> list[dict]:
    """cert-manager's CRDs of ``release``; their webhook pointed at ``webhook`` (``url:`` or ``service:``, and its CA), and the
    storage version moved to ``storage`` when given (an install from before cert-manager 1.0 stored v1alpha2)."""
    out = []
    for plural in PLURALS:
        doc = yaml.safe_load(crd_file(release, plural).read_text())
        doc.pop("status", None)
        conversion = (doc.get("spec") or {}).get("conversion")
        if webhook is not None and conversion and conversion.get("strategy") == "Webhook":
            conversion["webhook"]["clientConfig"] = webhook.client_config()
        if storage is not None:
            for v in doc["spec"]["versions"]:
                v["storage"] = v["name"] == storage
        out.append(copy.deepcopy(doc))
    return out


def write_crds(folder: Path, release: str, docs: list[dict]) -> list[str]:
    """One file per CRD (what the role is given), named after the release."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc in docs:
        path = folder / f"{release}-{doc['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        paths.append(str(path))
    return paths

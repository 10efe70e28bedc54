"""A real HTTPS webhook server for tests: CRD conversion and validating admission.

The apiserver calls it over TLS like any production webhook (a `url:` client config, the cluster CA
in caBundle). Stopping it makes the apiserver's calls fail with connection refused: the "webhook down"
fault, produced for real rather than faked.
"""
from __future__ import annotations

import base64
import copy
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .pki import Pki, _sign
from .processes import free_port

# field renamed between versions: v1alpha1 spec.size <-> v1beta1 spec.replicas
OLD_FIELD, NEW_FIELD = "size", "replicas"
# The other changes of v1alpha1 -> v1beta1, each the kind of change real conversions make (only fields present
# are touched, so objects without them convert as before):
# - two fields that often hold equal values, moved: spec.primaryZone / spec.backupZone -> spec.zones.primary / .backup
# - a path kept by name but given a new meaning: v1alpha1 spec.mode moves to spec.legacyMode, and v1beta1 spec.mode
#   is refilled with "Legacy" (as Cluster API v1beta2 moves status.conditions and refills it)
# - a renamed list-map key: spec.ports items keyed by `name` -> keyed by `portName`
# - a field split in two: spec.endpoint "host:port" -> spec.host + spec.port
NEW_MODE = "Legacy"


def _up(spec: dict) -> None:
    if OLD_FIELD in spec:
        spec[NEW_FIELD] = spec.pop(OLD_FIELD)
    zones = {new: spec.pop(old) for old, new in (("primaryZone", "primary"), ("backupZone", "backup")) if old in spec}
    if zones:
        spec["zones"] = zones
    if "mode" in spec:
        spec["legacyMode"] = spec.pop("mode")
        spec["mode"] = NEW_MODE
    if isinstance(spec.get("ports"), list):
        spec["ports"] = [{("portName" if k == "name" else k): v for k, v in p.items()} for p in spec["ports"]]
    if "endpoint" in spec:
        host, sep, port = str(spec.pop("endpoint")).partition(":")
        spec["host"] = host
        if sep:
            spec["port"] = port


def _down(spec: dict) -> None:
    if NEW_FIELD in spec:
        spec[OLD_FIELD] = spec.pop(NEW_FIELD)
    zones = spec.pop("zones", None) or {}
    for old, new in (("primaryZone", "primary"), ("backupZone", "backup")):
        if new in zones:
            spec[old] = zones[new]
    if "legacyMode" in spec or "mode" in spec:
        spec.pop("mode", None)
        if "legacyMode" in spec:
            spec["mode"] = spec.pop("legacyMode")
    if isinstance(spec.get("ports"), list):
        spec["ports"] = [{("name" if k == "portName" else k): v for k, v in p.items()} for p in spec["ports"]]
    if "host" in spec:
        host, port = spec.pop("host"), spec.pop("port", None)
        spec["endpoint"] = f"{host}:{port}" if port is not None else host


def convert_object(obj: dict, desired: str) -> dict:
    out = copy.deepcopy(obj)
    group, _sep, version = out["apiVersion"].partition("/")
    spec = out.get("spec") or {}
    target = desired.split("/")[-1]
    if target != version and target == "v1beta1":
        _up(spec)
    elif target != version and target == "v1alpha1":
        _down(spec)
    out["apiVersion"] = desired if "/" in desired else f"{group}/{desired}"
    return out


def _obj(**props) -> dict:
    return {"type": "object", "properties": props}


STR, INT = {"type": "string"}, {"type": "integer"}


def widget_schemas() -> dict[str, dict]:
    """openAPIV3Schema of v1alpha1 and v1beta1 for the conversion above (structural, with a list-map)."""
    def ports(key: str) -> dict:
        return {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key],
                "items": {**_obj(**{key: STR, "number": INT}), "required": [key]}}
    old = _obj(size=INT, color=STR, primaryZone=STR, backupZone=STR, mode=STR, endpoint=STR, ports=ports("name"),
               labels={"type": "object", "additionalProperties": STR})
    new = _obj(replicas=INT, color=STR, zones=_obj(primary=STR, backup=STR), mode=STR, legacyMode=STR, host=STR,
               port=STR, ports=ports("portName"), labels={"type": "object", "additionalProperties": STR})
    return {v: _obj(apiVersion=STR, kind=STR, metadata={"type": "object"}, spec=spec)
            for v, spec in (("v1alpha1", old), ("v1beta1", new))}


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *_args) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.owner.calls[self.path] = self.server.owner.calls.get(self.path, 0) + 1
        if self.path.startswith("/convert"):
            req = body["request"]
            converted = [convert_object(o, req["desiredAPIVersion"]) for o in req["objects"]]
            reply = {"apiVersion": body["apiVersion"], "kind": "ConversionReview",
                     "response": {"uid": req["uid"], "convertedObjects": converted, "result": {"status": "Success"}}}
        elif self.path.startswith("/deny-updates"):
            req = body["request"]
            allowed = req["operation"] != "UPDATE"
            reply = {"apiVersion": body["apiVersion"], "kind": "AdmissionReview",
                     "response": {"uid": req["uid"], "allowed": allowed}}
            if not allowed:
                reply["response"]["status"] = {"code": 403, "message": self.server.owner.deny_message}
        else:
            self.send_error(404)
            return
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "WebhookServer"


class WebhookServer:
    """Serve /convert and /deny-updates on 127.0.0.1 with a cert from the cluster's CA."""

    def __init__(self, pki: Pki, folder: Path, port: int = 0,
                 deny_message: str = "crdops-test: updates of this resource are frozen"):
        self.pki = pki
        self.folder = folder
        self.port = port or free_port()
        self.deny_message = deny_message
        self.calls: dict[str, int] = {}
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.cert, self.key = folder / "webhook.crt", folder / "webhook.key"
        if not self.cert.exists():
            folder.mkdir(parents=True, exist_ok=True)
            _sign(pki, self.key, self.cert, "/CN=crdops-test-webhook",
                  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                  "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
                  "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.pki.ca_cert.read_bytes()).decode()

    def client_config(self, path: str) -> dict:
        return {"url": f"https://127.0.0.1:{self.port}{path}", "caBundle": self.ca_bundle}

    def start(self) -> "WebhookServer":
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.owner = self
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.cert), str(self.key))
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None


def conversion_spec(server: WebhookServer) -> dict:
    return {"strategy": "Webhook",
            "webhook": {"clientConfig": server.client_config("/convert"), "conversionReviewVersions": ["v1"]}}


def deny_updates_webhook(name: str, server: WebhookServer, group: str, plural: str) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.crdops.test", "clientConfig": server.client_config("/deny-updates"),
                          "rules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["UPDATE"],
                                     "resources": [plural], "scope": "*"}],
                          "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                          "timeoutSeconds": 5}]}


def deny_updates_policy(name: str, group: str, plural: str, message: str) -> list[dict]:
    """A ValidatingAdmissionPolicy (CEL, no server) and its binding that refuse every UPDATE."""
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"],
                                                               "operations": ["UPDATE"], "resources": [plural]}]},
                       "validations": [{"expression": "false", "message": message}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    return [policy, binding]

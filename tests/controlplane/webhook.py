"""A real HTTPS webhook server for tests: CRD conversion and validating admission.

The apiserver calls it over TLS like any production webhook (a `url:` client config, the cluster CA
in caBundle). Stopping it makes the apiserver's calls fail with connection refused: the "webhook down"
fault, produced for real rather than faked.
"""
from __future__ import annotations

import base64
import copy
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

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
# - a field renamed inside an atomic struct (x-kubernetes-map-type: atomic, only in widget_schemas(atomic_tls=True)):
#   spec.tls.secret -> spec.tls.secretName, spec.tls.issuer kept
# - a move that depends on another field's presence (only in widget_schemas(presence_dependent=True)): spec.weight
#   goes to spec.mass.value when spec.unit is set (and unit to spec.mass.unit), else to spec.legacyWeight
NEW_MODE = "Legacy"
TLS_RENAMES = (("secret", "secretName"),)


def _rename_keys(value: object, renames: tuple[tuple[str, str], ...]) -> object:
    if not isinstance(value, dict):
        return value
    table = dict(renames)
    return {table.get(k, k): v for k, v in value.items()}


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
    if "tls" in spec:
        spec["tls"] = _rename_keys(spec["tls"], TLS_RENAMES)
    if "weight" in spec:
        weight = spec.pop("weight")
        if "unit" in spec:
            spec["mass"] = {"value": weight, "unit": spec.pop("unit")}
        else:
            spec["legacyWeight"] = weight


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
    if "tls" in spec:
        spec["tls"] = _rename_keys(spec["tls"], tuple((new, old) for old, new in TLS_RENAMES))
    mass = spec.pop("mass", None)
    if isinstance(mass, dict):
        spec.update({k: mass[m] for k, m in (("weight", "value"), ("unit", "unit")) if m in mass})
    if "legacyWeight" in spec:
        spec["weight"] = spec.pop("legacyWeight")


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


def convert_dropping_empty_objects(obj: dict, desired: str) -> dict:
    """``convert_object``, then every ``{}`` member of spec left out, as a webhook that normalises empty objects away
    does (Go's ``omitempty`` does it for maps): ``/convert-drop-empty``."""
    out = convert_object(obj, desired)
    if isinstance(out.get("spec"), dict):
        out["spec"] = {k: v for k, v in out["spec"].items() if v != {}}
    return out


def _obj(**props) -> dict:
    return {"type": "object", "properties": props}


STR, INT = {"type": "string"}, {"type": "integer"}


def widget_schemas(atomic_tls: bool = False, presence_dependent: bool = False) -> dict[str, dict]:
    """openAPIV3Schema of v1alpha1 and v1beta1 for the conversion above (structural, with a list-map); with
    ``atomic_tls`` also the atomic struct spec.tls whose inner field the conversion renames; with
    ``presence_dependent`` also spec.weight, whose place at v1beta1 depends on spec.unit."""
    def ports(key: str) -> dict:
        return {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key],
                "items": {**_obj(**{key: STR, "number": INT}), "required": [key]}}
    old = _obj(size=INT, color=STR, primaryZone=STR, backupZone=STR, mode=STR, endpoint=STR, ports=ports("name"),
               labels={"type": "object", "additionalProperties": STR})
    new = _obj(replicas=INT, color=STR, zones=_obj(primary=STR, backup=STR), mode=STR, legacyMode=STR, host=STR,
               port=STR, ports=ports("portName"), labels={"type": "object", "additionalProperties": STR})
    if atomic_tls:
        old["properties"]["tls"] = {**_obj(secret=STR, issuer=STR), "x-kubernetes-map-type": "atomic"}
        new["properties"]["tls"] = {**_obj(secretName=STR, issuer=STR), "x-kubernetes-map-type": "atomic"}
    if presence_dependent:
        old["properties"].update(weight=INT, unit=STR)
        new["properties"].update(mass=_obj(value=INT, unit=STR), legacyWeight=INT)
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
            convert = convert_dropping_empty_objects if self.path.startswith("/convert-drop-empty") else convert_object
            converted = [convert(o, req["desiredAPIVersion"]) for o in req["objects"]]
            reply = {"apiVersion": body["apiVersion"], "kind": "ConversionReview",
                     "response": {"uid": req["uid"], "convertedObjects": converted, "result": {"status": "Success"}}}
        elif self.path.startswith("/hold-updates"):
            req = body["request"]
            allowed = self.server.owner.holds.admit(req)  # blocks while the update is held
            reply = {"apiVersion": body["apiVersion"], "kind": "AdmissionReview",
                     "response": {"uid": req["uid"], "allowed": allowed}}
            if not allowed:
                reply["response"]["status"] = {"code": 429, "message": "crdops-test: held too long, refused"}
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


def storage_version(crd: dict) -> str | None:
    """The name of the CRD object's storage version (None when none is marked)."""
    for version in (crd.get("spec") or {}).get("versions") or []:
        if version.get("storage"):
            return version.get("name")
    return None


def _labels(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


class Holds:
    """A slow validating webhook, on cue: an UPDATE that sets the label ``HOLD_LABEL`` to a gate name is held
    until that gate opens (at most ``max_hold`` s, below the webhook's timeoutSeconds, then it is refused), the way
    a webhook under load holds requests (the label value may end in ``-w<n>``, a wave of updates held by the same
    gate: waves keep updates in flight for as long as a test waits for a flip it does not control; or the updates
    start inside the flip's own admission, ``before_storage_change``). The request
    began before it was held, so it keeps the storage the CRD
    had then for its whole life; the apiserver calls the webhook again when it retries the update, and the hold
    then ends at once (the gate is open). Gates open at a time (``open_at``) or when the webhook has seen the n-th
    no-op UPDATE (labels unchanged) of a trigger object (``open_on_noop``): the re-store's own passes. With
    ``before_it``, that no-op is itself let through only once the updates the gate let go have stopped calling
    (QUIET_S without a call about the object): they committed first, so the pass's write finds the object changed
    however slowly a loaded machine lets them commit."""

    QUIET_S = 1.0

    HOLD_LABEL = "crdops-test-hold"

    def __init__(self, max_hold: float = 26.0):
        self.max_hold = max_hold
        self._cond = threading.Condition()
        self.opened: dict[str, float] = {}  # gate -> monotonic time it opened
        self.held = 0  # updates waiting now
        self.released = 0
        self.expired = 0  # refused after max_hold: never committed
        self.noops: dict[str, int] = {}  # object name -> no-op UPDATEs seen
        self._triggers: list[tuple[str, str, int, bool]] = []  # (gate, object name, count, before_it)
        self._held_by: dict[str, int] = {}  # gate -> updates it holds now
        self._storage_hooks: dict[str, Callable[[], None]] = {}  # CRD name -> called once before its storage flips
        self._last_update: dict[str, float] = {}  # object name -> monotonic time of its last labelled UPDATE call

    def open(self, gate: str) -> None:
        with self._cond:
            self.opened.setdefault(gate, time.monotonic())
            self._cond.notify_all()

    def open_at(self, gate: str, when: float) -> None:
        """Open ``gate`` at monotonic time ``when``."""
        timer = threading.Timer(max(0.0, when - time.monotonic()), self.open, (gate,))
        timer.daemon = True
        timer.start()

    def open_on_noop(self, gate: str, name: str, count: int, before_it: bool = False) -> None:
        with self._cond:
            self._triggers.append((gate, name, count, before_it))

    def before_storage_change(self, crd_name: str, then: Callable[[], None]) -> None:
        """Call ``then()`` inside the admission of the first update of CRD ``crd_name`` that changes its storage
        version (dry runs aside), before that update commits: whatever ``then`` starts began under the old storage.
        Needs the webhook configuration's CRD rule (hold_updates_webhook's ``crd_name``)."""
        with self._cond:
            self._storage_hooks[crd_name] = then

    def _crd_update(self, req: dict) -> bool:
        new, old = req.get("object") or {}, req.get("oldObject") or {}
        name = (new.get("metadata") or {}).get("name", "")
        if req.get("dryRun") or storage_version(new) == storage_version(old):
            return True
        with self._cond:
            then = self._storage_hooks.pop(name, None)
        if then is not None:
            then()
        return True

    def wait_held(self, count: int, timeout: float = 30.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.held >= count, timeout):
                raise AssertionError(f"only {self.held} of {count} updates reached the webhook")

    def admit(self, req: dict) -> bool:
        """Allow (True) or, held past ``max_hold`` without its gate opening, refuse (False)."""
        if req.get("operation") != "UPDATE":
            return True
        if (req.get("resource") or {}).get("resource") == "customresourcedefinitions":
            return self._crd_update(req)
        new, old = _labels(req.get("object")), _labels(req.get("oldObject"))
        value = new.get(self.HOLD_LABEL)
        if new == old:
            if req.get("dryRun"):  # a preflight's dry-run is not one of the pass's writes
                return True
            self._count_noop(((req.get("object") or {}).get("metadata") or {}).get("name", ""))
            return True
        if not value or value == old.get(self.HOLD_LABEL):
            return True
        gate = value.rsplit("-w", 1)[0]  # "<gate>-w<n>": the n-th wave of updates held by one gate
        deadline = time.monotonic() + self.max_hold
        name = ((req.get("object") or {}).get("metadata") or {}).get("name", "")
        with self._cond:
            self.held += 1
            self._held_by[gate] = self._held_by.get(gate, 0) + 1
            self._last_update[name] = time.monotonic()
            self._cond.notify_all()
            opened = self._cond.wait_for(lambda: gate in self.opened, max(0.0, deadline - time.monotonic()))
            self.held -= 1
            self._held_by[gate] -= 1
            self._last_update[name] = time.monotonic()
            if opened:
                self.released += 1
            else:
                self.expired += 1
            self._cond.notify_all()
        return opened

    def _count_noop(self, name: str) -> None:
        with self._cond:
            self.noops[name] = self.noops.get(name, 0) + 1
            waits = []
            for gate, trigger, count, before_it in self._triggers:
                if trigger == name and self.noops[name] >= count:
                    if gate not in self.opened and before_it:
                        waits.append(gate)
                    self.opened.setdefault(gate, time.monotonic())
            self._cond.notify_all()
            for gate in waits:
                self._wait_committed(gate, name)

    def _wait_committed(self, gate: str, name: str) -> None:
        """Until ``gate`` holds nothing and ``name`` had no labelled UPDATE call for QUIET_S (its released
        updates, their retries included, are through); at most max_hold."""
        deadline = time.monotonic() + self.max_hold
        while time.monotonic() < deadline:
            quiet_since = time.monotonic() - self._last_update.get(name, 0.0)
            if self._held_by.get(gate, 0) == 0 and quiet_since >= self.QUIET_S:
                return
            self._cond.wait(max(0.05, self.QUIET_S - quiet_since))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: "WebhookServer"


class WebhookServer:
    """Serve /convert (and /convert-drop-empty), /hold-updates and /deny-updates on 127.0.0.1 (or ``host``) with a
    cert from the cluster's CA."""

    def __init__(self, pki: Pki, folder: Path, port: int = 0,
                 deny_message: str = "crdops-test: updates of this resource are frozen", host: str = "127.0.0.1",
                 service: tuple[str, str] | None = None):
        self.pki = pki
        self.folder = folder
        self.host = host
        self.port = port or free_port()
        self.deny_message = deny_message
        self.calls: dict[str, int] = {}
        self.holds = Holds()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        # a `service:` webhook is verified by the apiserver against <name>.<namespace>.svc
        dns = f",DNS:{service[1]}.{service[0]}.svc" if service else ""
        suffix = "" if host == "127.0.0.1" and not service else "-%s%s" % (host, dns.replace(",DNS:", "-"))
        self.cert, self.key = folder / f"webhook{suffix}.crt", folder / f"webhook{suffix}.key"
        if not self.cert.exists():
            folder.mkdir(parents=True, exist_ok=True)
            _sign(pki, self.key, self.cert, "/CN=crdops-test-webhook",
                  "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                  f"extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:{host},DNS:localhost{dns}\n"
                  "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n")

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.pki.ca_cert.read_bytes()).decode()

    def client_config(self, path: str) -> dict:
        return {"url": f"https://127.0.0.1:{self.port}{path}", "caBundle": self.ca_bundle}

    def start(self) -> "WebhookServer":
        server = _Server((self.host, self.port), _Handler)
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


def conversion_spec(server: WebhookServer, service: tuple[str, str] | None = None) -> dict:
    """``url:`` client config, or ``service: (namespace, name)`` (see ``publish_as_service``)."""
    config = server.client_config("/convert")
    if service is not None:
        config = {"service": {"namespace": service[0], "name": service[1], "path": "/convert", "port": 443},
                  "caBundle": server.ca_bundle}
    return {"strategy": "Webhook", "webhook": {"clientConfig": config, "conversionReviewVersions": ["v1"]}}


def widget_crd(group: str, server: WebhookServer, storage: str, served: tuple[str, ...] = ("v1alpha1", "v1beta1"),
               service: tuple[str, str] | None = None, **schema_options: bool) -> dict:
    """The namespaced Widget CRD (plural ``widgets``) at ``served`` versions with ``storage`` storing, converted by
    ``server``; ``schema_options`` as for ``widget_schemas``."""
    schemas = widget_schemas(**schema_options)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                     "versions": [{"name": v, "served": True, "storage": v == storage,
                                   "schema": {"openAPIV3Schema": schemas[v]}} for v in served],
                     "conversion": conversion_spec(server, service)}}


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine other than loopback (the apiserver refuses to proxy to loopback
    endpoints), or None; no packet is sent (a UDP socket's connect only picks the route)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith(("127.", "169.254.", "0.")) else address


def publish_as_service(kube, server: WebhookServer, namespace: str, name: str) -> None:
    """A selector-less Service ``namespace/name`` (port 443) whose one endpoint is ``server`` (its own address and
    port), as Endpoints and as an EndpointSlice, so that both the apiserver's service proxy and its webhook
    client (with ``--enable-aggregator-routing``) reach it without kube-proxy. The service proxy only goes to an
    endpoint whose targetRef is a Pod holding that IP (kube-apiserver's service storage, isValidAddress), so a Pod
    object (never run: there is no kubelet) gets the address in its status."""
    kube.ensure_namespace(namespace)
    pod = f"{name}-0"
    kube.post(f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod},
        "spec": {"containers": [{"name": "webhook", "image": "crdops.test/none"}]}})
    kube.merge_patch(f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
                     {"status": {"podIP": server.host, "podIPs": [{"ip": server.host}]}})
    port = {"name": "https", "port": server.port, "protocol": "TCP"}
    kube.post(f"/api/v1/namespaces/{namespace}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": server.port, "protocol": "TCP"}]}})
    kube.post(f"/api/v1/namespaces/{namespace}/endpoints", {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
        "subsets": [{"addresses": [{"ip": server.host, "targetRef": {"kind": "Pod", "name": pod,
                                                                     "namespace": namespace}}], "ports": [port]}]})
    kube.post(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{name}-1", "labels": {"kubernetes.io/service-name": name}},
        "addressType": "IPv4", "ports": [port],
        "endpoints": [{"addresses": [server.host], "conditions": {"ready": True},
                       "targetRef": {"kind": "Pod", "name": pod, "namespace": namespace}}]})


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


def hold_updates_webhook(name: str, server: WebhookServer, group: str, plural: str, timeout_seconds: int = 30,
                         crd_name: str | None = None) -> dict:
    """A validating webhook (failurePolicy Fail) that holds chosen UPDATEs (see :class:`Holds`); with ``crd_name``,
    it also sees that CRD's updates (failurePolicy Ignore: a CRD is never blocked by this test server's absence),
    for Holds.before_storage_change."""
    hooks = [{"name": f"{name}.crdops.test", "clientConfig": server.client_config("/hold-updates"),
              "rules": [{"apiGroups": [group], "apiVersions": ["*"], "operations": ["UPDATE"],
                         "resources": [plural], "scope": "*"}],
              "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
              "timeoutSeconds": timeout_seconds}]
    if crd_name:
        hooks.append({"name": f"crd-{name}.crdops.test", "clientConfig": server.client_config("/hold-updates"),
                      "rules": [{"apiGroups": ["apiextensions.k8s.io"], "apiVersions": ["v1"],
                                 "operations": ["UPDATE"], "resources": ["customresourcedefinitions"],
                                 "scope": "Cluster"}],
                      "matchConditions": [{"name": "this-crd", "expression": f"object.metadata.name == '{crd_name}'"}],
                      "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
                      "timeoutSeconds": timeout_seconds})
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name}, "webhooks": hooks}

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Helm releases whose stored manifest still declares a custom resource at a version the next release removes.

``helm upgrade`` builds Kubernetes objects from the *current* release's stored manifest before it diffs
against the new chart. When that manifest names an apiVersion the cluster no longer serves, the build fails
("unable to build kubernetes objects from current release manifest", helm/helm#7361) and every later upgrade
of that release fails with it, whatever the new chart says. Removing a CRD version therefore breaks those
releases for good; ``helm-mapkubeapis`` exists to repair them after the fact. This module names them before
the removal and, when the caller opts in, rewrites the stored manifest the way that plugin does.

Where Helm keeps it (Helm v4's Secret storage driver, ``pkg/storage/driver/secrets.go`` and ``util.go``): one
Secret per revision, named ``sh.helm.release.v1.<release>.v<revision>``, in the release's namespace, type
``helm.sh/release.v1``, labels ``owner=helm``, ``name``, ``status``, ``version``. Its ``data.release`` holds
base64(gzip(JSON of the release)); the API adds its own base64 for Secret data, so two layers come off. Helm
decompresses only when the gzip magic ``1f 8b 08`` leads (releases stored before compression was introduced
are plain JSON), and so does this module. With ``HELM_DRIVER=configmap`` (``cfgmaps.go``) each revision is a
ConfigMap of the same name and labels whose ``data.release`` is Helm's base64 text itself (one layer less). Helm's
``sql`` driver keeps releases outside the cluster: such a release cannot be read here.

Which releases are read: every release Secret and ConfigMap of the cluster where listing them in all namespaces
is allowed, and, for the releases the objects name (``meta.helm.sh/release-name`` and ``-namespace``) that those
lists did not show, the release's own revisions in its namespace (label ``name=<release>``). A release that
cannot be read that way (forbidden, not found, SQL) is "not checked", with the permission that would let it be.

Which revision matters: ``helm upgrade`` (``pkg/action/upgrade.go``) takes the latest ``deployed`` revision as
the current release, or, when none is deployed, the latest revision if it is ``failed`` or ``superseded``; it
refuses to run at all while the latest revision is pending. The scan reads exactly that revision. An
uninstalled release (``--keep-history``) has no current manifest for an upgrade and is not read. A pending
latest revision (an operation running, or one that was killed) does not change which manifest is read, but it
is reported as ``blocked`` and the rewrite refuses it: Helm would overwrite the Secret when it finishes.

The rewrite stores the moved manifest as a new revision, as helm-mapkubeapis does: revision n+1 ``deployed``,
with a description that says what moved, and revision n ``superseded``, in the release's own driver with Helm's
labels and encoding. ``helm history`` lists it, ``helm upgrade`` reads it and ``helm rollback`` to it works; a
rollback to revision n or earlier still declares the removed version and fails, as after helm-mapkubeapis.

The rewrite is meant for CRDs whose conversion strategy is None: the same object is then served at every
version with the same fields, so changing the ``apiVersion:`` line is the whole conversion. With a webhook the
rendered fields may differ between versions, and rewriting that line alone would misstate the object.

Secret contents (values, manifests, chart files) never leave this module: results carry kind, namespace,
name and apiVersion of the affected documents, and errors name the Secret, never its data.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
import time
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..kube.errors import ApiError, ConflictError, CrdOpsError, RefusalError
from ..kube.transport import JSON, Transport, dumps, error_from_response

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

SECRETS_PATH = "/api/v1/secrets"
CONFIGMAPS_PATH = "/api/v1/configmaps"
OWNER_SELECTOR = "owner=helm"
# Helm's storage drivers this module reads and writes: HELM_DRIVER=secret (the default) and HELM_DRIVER=configmap
SECRET, CONFIGMAP = "Secret", "ConfigMap"
RESOURCES = {SECRET: "secrets", CONFIGMAP: "configmaps"}
RELEASE_SECRET_TYPE = "helm.sh/release.v1"
# Helm's util.go: decompress only when these lead, for releases stored before compression
GZIP_MAGIC = b"\x1f\x8b\x08"
DEPLOYED = "deployed"
SUPERSEDED = "superseded"
# with no deployed revision, Helm's upgrade diffs against the latest one when it has one of these statuses
FALLBACK_STATUSES = ("failed", "superseded")
PENDING_STATUSES = ("pending-install", "pending-upgrade", "pending-rollback")
FIELD_MANAGER = "crdops-migration"
RBAC_NOTE = ("not checked: listing Secrets is forbidden (HTTP %d); grant list on secrets in all namespaces to "
             "name Helm releases that still declare a removed version (docs/rbac.md)")
# A YAML document separator as Helm writes it between rendered templates (``---`` alone on its line)
_SEPARATOR = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.M)
# A top-level ``apiVersion:`` line: the value alone, maybe quoted, maybe followed by a comment
_API_LINE = re.compile(r"^(apiVersion:[ \t]*)(['\"]?)([^'\"\s#]+)\2([ \t]*(?:#[^\r\n]*)?)(\r?)$", re.M)
# CRD name -> (group, kind, versions the next release removes)
CrdTargets = Mapping[str, Tuple[str, str, List[str]]]


@dataclass
class HelmObject:
    """One document of a release's manifest that declares a custom resource at a version being removed."""

    kind: str
    namespace: str  # as the document declares it; "" when it names none (Helm then uses the release's)
    name: str
    api_version: str  # group/version as declared
    crd: str  # plural.group
    version: str  # the declared version, one the next release removes

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name,
                "apiVersion": self.api_version, "crd": self.crd, "version": self.version}


@dataclass
class HelmRelease:
    """The revision of one release that ``helm upgrade`` would read, and its documents at removed versions."""

    namespace: str
    name: str
    revision: int
    secret: str  # sh.helm.release.v1.<name>.v<revision>
    resource_version: str  # of that Secret when read: the rewrite's optimistic lock
    objects: List[HelmObject] = field(default_factory=list)
    status: str = DEPLOYED  # of that revision
    blocked: Optional[str] = None  # why a rewrite is refused now (a pending latest revision), else None
    driver: str = SECRET  # where Helm stores it: SECRET or CONFIGMAP (``secret`` then names a ConfigMap)

    @property
    def label(self) -> str:
        return "%s/%s" % (self.namespace, self.name)

    def to_dict(self) -> Dict[str, Any]:
        return {"release": self.label, "namespace": self.namespace, "name": self.name, "revision": self.revision,
                "status": self.status, "secret": self.secret, "driver": self.driver, "blocked": self.blocked,
                "objects": [o.to_dict() for o in self.objects]}


@dataclass
class HelmScan:
    """What the scan found; ``checked`` is False when the Secrets could not be listed in all namespaces (``note``
    says why). ``not_checked``: release (namespace/name) -> why it could not be read, with the permission that
    would let it be: each such release holds release N+1 back for the CRDs whose objects name it."""

    checked: bool
    note: Optional[str]
    releases: List[HelmRelease] = field(default_factory=list)
    scanned: int = 0  # release revisions decoded
    unreadable: List[str] = field(default_factory=list)  # namespace/secret whose payload did not decode
    seen: List[str] = field(default_factory=list)  # releases (namespace/name) the lists of all namespaces showed
    configmaps_checked: bool = False  # the ConfigMaps of all namespaces could be listed (HELM_DRIVER=configmap)
    looked_up: List[str] = field(default_factory=list)  # releases named by objects, read in their namespace
    not_checked: Dict[str, str] = field(default_factory=dict)
    rewrite: List[str] = field(default_factory=list)  # releases the run will rewrite as a new revision (opt-in)

    def to_dict(self) -> Dict[str, Any]:
        return {"checked": self.checked, "note": self.note, "scanned": self.scanned,
                "unreadable": list(self.unreadable), "releases": [r.to_dict() for r in self.releases],
                "configmaps_checked": self.configmaps_checked, "looked_up": list(self.looked_up),
                "not_checked": dict(self.not_checked), "rewrite": list(self.rewrite)}

    def for_crd(self, name: str) -> List[HelmRelease]:
        """The releases with documents of CRD ``name``, each narrowed to those documents."""
        out = []
        for rel in self.releases:
            mine = [o for o in rel.objects if o.crd == name]
            if mine:
                out.append(replace(rel, objects=mine))
        return out


# ---------------------------------------------------------------------------------------------- the payload


class PayloadError(ValueError):
    """A release payload that is not Helm's encoding; the message names the layer, never the content."""


def decode_payload(data: str, driver: str = SECRET) -> bytes:
    """The release JSON from ``data.release`` as the API returns it: base64 of Helm's base64 in a Secret,
    Helm's base64 itself in a ConfigMap."""
    try:
        helm_text = base64.b64decode(data, validate=True) if driver == SECRET else data.encode("ascii")
        raw = base64.b64decode(helm_text, validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise PayloadError("not base64") from None
    if len(raw) > 3 and raw[:3] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise PayloadError("not a complete gzip stream") from None
    return raw


def encode_payload(release_json: bytes, driver: str = SECRET) -> str:
    """Helm's ``encodeRelease`` (gzip at best compression, base64), then, for a Secret, its data's own base64.

    The deflate bytes differ from Go's compressor; Helm reads any gzip stream, and the header (no name, mtime
    0, best-compression flag) matches what Go's gzip writer sets."""
    compressed = gzip.compress(release_json, compresslevel=9, mtime=0)
    helm_text = base64.b64encode(compressed)
    return (base64.b64encode(helm_text) if driver == SECRET else helm_text).decode("ascii")


def go_json_string(value: str) -> str:
    """``value`` as Go's ``json.Marshal`` writes a string (HTML-safe escapes), so an unchanged manifest
    re-encodes to the bytes Helm stored."""
    text = json.dumps(value, ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escape)
    return text


def manifest_span(release_json: str) -> Tuple[int, int, str]:
    """Start and end of the top-level ``manifest`` value in the release JSON, and its decoded text.

    Walking the top-level object (rather than loading and dumping it) lets the rewrite replace that one
    value and keep every other byte of the release (values, chart, hooks) exactly as Helm wrote it."""
    decoder = json.JSONDecoder()
    pos = _skip_ws(release_json, 0)
    if release_json[pos:pos + 1] != "{":
        raise PayloadError("release JSON is not an object")
    pos = _skip_ws(release_json, pos + 1)
    while release_json[pos:pos + 1] == '"':
        try:
            key, pos = decoder.raw_decode(release_json, pos)
            pos = _skip_ws(release_json, pos)
            if release_json[pos:pos + 1] != ":":
                raise PayloadError("release JSON is malformed")
            start = _skip_ws(release_json, pos + 1)
            value, end = decoder.raw_decode(release_json, start)
        except json.JSONDecodeError:
            raise PayloadError("release JSON is malformed") from None
        if key == "manifest":
            if not isinstance(value, str):
                raise PayloadError("release manifest is not a string")
            return start, end, value
        pos = _skip_ws(release_json, end)
        if release_json[pos:pos + 1] == ",":
            pos = _skip_ws(release_json, pos + 1)
    raise PayloadError("release has no manifest")


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def release_manifest(secret: Mapping[str, Any], driver: str = SECRET) -> Tuple[str, Tuple[int, int, str]]:
    """The release JSON text of a Helm release Secret (or ConfigMap) and where its manifest lies in it."""
    data = (secret.get("data") or {}).get("release")
    if not isinstance(data, str) or not data:
        raise PayloadError("the %s has no data.release" % driver)
    raw = decode_payload(data, driver)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PayloadError("release JSON is not UTF-8") from None
    return text, manifest_span(text)


# ---------------------------------------------------------------------------------------------- the manifest


def documents(manifest: str) -> Iterator[Tuple[int, int]]:
    """Start and end offsets of each YAML document of a rendered manifest (``---`` lines separate them)."""
    start = 0
    for sep in _SEPARATOR.finditer(manifest):
        if sep.start() > start:
            yield start, sep.start()
        start = sep.end()
    if start < len(manifest):
        yield start, len(manifest)


def _head(text: str) -> Optional[Tuple[str, str, str, str]]:
    """apiVersion, kind, namespace and name of one document, or None when it is not a mapping of that shape.

    Parsed with YAML's safe loader rather than read line by line: templates may quote values or reorder
    keys, and only a real parse tells a top-level ``kind`` from one nested in a spec."""
    if not HAS_YAML:  # pragma: no cover - PyYAML is a requirement of the collection
        raise CrdOpsError("PyYAML is required to read Helm release manifests")
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        return None  # Helm's own build would fail on it too; not a document we can name
    if not isinstance(doc, dict):
        return None
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    api, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        return None
    return api, kind, str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _lookup(crds: CrdTargets) -> Dict[Tuple[str, str], Tuple[str, str]]:
    """(group/version, kind) -> (CRD name, version) for every removed version."""
    out = {}
    for crd, (group, kind, removed) in crds.items():
        for version in removed:
            out[("%s/%s" % (group, version), kind)] = (crd, version)
    return out


def find_objects(manifest: str, crds: CrdTargets) -> List[HelmObject]:
    """The documents of ``manifest`` that declare a kind of ``crds`` at a version it removes."""
    lookup = _lookup(crds)
    apis = {api for api, _kind in lookup}
    found = []
    for start, end in documents(manifest):
        text = manifest[start:end]
        if not any(api in text for api in apis):  # cheap: most documents are not ours
            continue
        head = _head(text)
        if head is None or (head[0], head[1]) not in lookup:
            continue
        crd, version = lookup[(head[0], head[1])]
        found.append(HelmObject(kind=head[1], namespace=head[2], name=head[3], api_version=head[0], crd=crd,
                                version=version))
    return found


def rewrite_manifest(manifest: str, targets: Sequence[Tuple[HelmObject, str]]) -> Tuple[str, List[HelmObject]]:
    """``manifest`` with the ``apiVersion:`` line of each target document set to ``group/<new version>``.

    Only the version in that one line changes; quotes, comments, line ends and every other byte stay. Returns
    the new text and the targets that no document matched (the manifest changed under us, or never had it)."""
    wanted = {(o.api_version, o.kind, o.namespace, o.name): (o, new) for o, new in targets}
    pieces: List[str] = []
    last = 0
    for start, end in documents(manifest):
        text = manifest[start:end]
        if not any(api in text for api, _k, _ns, _n in wanted):
            continue
        head = _head(text)
        hit = wanted.pop(head, None) if head is not None else None
        if hit is None:
            continue
        obj, new_version = hit
        pieces += [manifest[last:start], _set_version(text, obj, new_version)]
        last = end
    pieces.append(manifest[last:])
    return "".join(pieces), [o for o, _new in wanted.values()]


def _set_version(text: str, obj: HelmObject, new_version: str) -> str:
    lines = [m for m in _API_LINE.finditer(text) if m.group(3) == obj.api_version]
    if len(lines) != 1:
        raise RefusalError(
            "the manifest declares %s %s at %s, but not on one line of its own ('apiVersion: %s'); rewrite "
            "this release by hand or with helm-mapkubeapis" % (obj.kind, obj.name, obj.api_version, obj.api_version),
            crd=obj.crd)
    m = lines[0]
    group = obj.api_version.rsplit("/", 1)[0]
    value = m.group(1) + m.group(2) + "%s/%s" % (group, new_version) + m.group(2) + m.group(4) + m.group(5)
    return text[:m.start()] + value + text[m.end():]


# ---------------------------------------------------------------------------------------------- the scan


class _ListRefused(Exception):
    """A list answered 401/403: the scan reports "not checked" instead of failing the run."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class _Candidates:
    """Per release, the only two revisions the choice of revision needs, so memory stays per release."""

    deployed: Optional[Dict[str, Any]] = None
    latest: Optional[Dict[str, Any]] = None
    driver: str = SECRET

    def add(self, item: Dict[str, Any]) -> None:
        rev = _revision(item)
        if self.latest is None or rev > _revision(self.latest):
            self.latest = item
        if _labels(item).get("status") == DEPLOYED and (self.deployed is None or rev > _revision(self.deployed)):
            self.deployed = item


def _labels(item: Mapping[str, Any]) -> Mapping[str, Any]:
    return (item.get("metadata") or {}).get("labels") or {}


def _revision(item: Mapping[str, Any]) -> int:
    try:
        return int(_labels(item).get("version", ""))
    except ValueError:
        return -1


def _is_release_item(item: Mapping[str, Any], driver: str = SECRET) -> bool:
    """Helm's own release Secrets (ConfigMaps); another one labelled owner=helm is none of ours."""
    if driver == SECRET and item.get("type") != RELEASE_SECRET_TYPE:
        return False
    return bool(_labels(item).get("name")) and _revision(item) >= 0


def _pages(transport: Transport, path: str, page_size: int, what: str) -> Iterator[List[Dict[str, Any]]]:
    """The Helm release objects at ``path``, a page at a time (a page holds whole payloads, so keep it small)."""
    token: Optional[str] = None
    while True:
        query = [("labelSelector", OWNER_SELECTOR), ("limit", str(page_size))] + ([("continue", token)] if token else [])
        resp = transport.request("GET", path, query=query, accept=JSON)
        if resp.status in (401, 403):
            raise _ListRefused(resp.status)
        if resp.status == 410 and token:
            # the continue token expired: the Status carries one that resumes at a newer snapshot, which is
            # enough here, as a rewrite re-reads its revision under its resourceVersion anyway
            token = str((resp.status_body().get("metadata") or {}).get("continue") or "")
            if token:
                continue
        if not resp.ok:
            raise error_from_response(resp, "listing Helm release %s" % what, cluster=transport.cluster_label)
        body = resp.json()
        yield list(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return


def _collect(transport: Transport, page_size: int, driver: str = SECRET) -> Dict[Tuple[str, str], _Candidates]:
    """(namespace, release) -> its latest deployed revision and its latest revision of any status."""
    path = SECRETS_PATH if driver == SECRET else CONFIGMAPS_PATH
    out: Dict[Tuple[str, str], _Candidates] = {}
    for page in _pages(transport, path, page_size, RESOURCES[driver]):
        for item in page:
            if _is_release_item(item, driver):
                key = (str((item.get("metadata") or {}).get("namespace") or ""), str(_labels(item)["name"]))
                out.setdefault(key, _Candidates(driver=driver)).add(item)
    return out


def choose_revision(cand: _Candidates) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The revision ``helm upgrade`` treats as the current release (``pkg/action/upgrade.go``), and why a
    rewrite is refused now, if it is: the latest deployed revision, else the latest when failed or superseded."""
    latest = cand.latest
    blocked = None
    if latest is not None and _labels(latest).get("status") in PENDING_STATUSES:
        blocked = ("revision %d is %s: a Helm operation is running or was interrupted; let it finish or roll it "
                   "back, then run again" % (_revision(latest), _labels(latest).get("status")))
    if cand.deployed is not None:
        return cand.deployed, blocked
    if latest is not None and _labels(latest).get("status") in FALLBACK_STATUSES:
        return latest, blocked
    return None, blocked


def _release_of(item: Mapping[str, Any], objects: List[HelmObject], blocked: Optional[str],
                driver: str = SECRET) -> HelmRelease:
    meta = item.get("metadata") or {}
    return HelmRelease(namespace=str(meta.get("namespace") or ""), name=str(_labels(item)["name"]),
                       revision=_revision(item), secret=str(meta.get("name") or ""),
                       resource_version=str(meta.get("resourceVersion") or ""), objects=objects,
                       status=str(_labels(item).get("status") or ""), blocked=blocked, driver=driver)


def _read_current(cand: _Candidates, crds: CrdTargets) -> Tuple[Optional[HelmRelease], Optional[str]]:
    """(the current revision with its documents at removed versions, or None when it has none; None), or (None,
    the object whose payload did not decode)."""
    item, blocked = choose_revision(cand)
    if item is None:
        return None, None  # uninstalled, or only pending: no current manifest for an upgrade to build
    try:
        _text, (_start, _end, manifest) = release_manifest(item, cand.driver)
    except PayloadError:
        meta = item.get("metadata") or {}
        return None, "%s/%s" % (meta.get("namespace"), meta.get("name"))
    objects = find_objects(manifest, crds)
    return (_release_of(item, objects, blocked, cand.driver) if objects else None), None


def _scan_driver(scan: HelmScan, candidates: Mapping[Tuple[str, str], _Candidates], crds: CrdTargets) -> None:
    for key in sorted(candidates):
        label = "%s/%s" % key
        if label in scan.seen:
            continue  # the same release in both drivers: Helm reads one driver only, the first list wins
        scan.seen.append(label)
        release, unreadable = _read_current(candidates[key], crds)
        if unreadable:
            scan.unreadable.append(unreadable)
            continue
        scan.scanned += 1 if choose_revision(candidates[key])[0] is not None else 0
        if release is not None:
            scan.releases.append(release)


def scan_helm_releases(transport: Transport, crds: CrdTargets, page_size: int = 100) -> HelmScan:
    """Name every Helm release (Secret or ConfigMap storage) whose current revision declares a kind of ``crds``
    at a version that ``crds`` says the next release removes.

    A 401/403 on a list is a "not checked" with a note, never an exception: the run goes on, and the releases
    the objects name are looked up one by one (:func:`look_up_releases`). Payloads that do not decode are named in
    ``unreadable`` (Helm skips them too)."""
    if page_size < 1:
        raise CrdOpsError("page_size must be >= 1, got %r" % page_size)
    if not any(removed for _g, _k, removed in crds.values()):
        return HelmScan(checked=True, note=None, configmaps_checked=True)  # no version is removed: nothing breaks
    scan = HelmScan(checked=True, note=None)
    try:
        _scan_driver(scan, _collect(transport, page_size, SECRET), crds)
    except _ListRefused as exc:
        scan.checked, scan.note = False, RBAC_NOTE % exc.status
    try:
        _scan_driver(scan, _collect(transport, page_size, CONFIGMAP), crds)
        scan.configmaps_checked = True
    except _ListRefused:
        pass  # HELM_DRIVER=configmap is rare: the releases the objects name are looked up in their namespace
    if scan.unreadable:
        scan.note = "; ".join(n for n in (scan.note, "%d release Secret(s) could not be decoded, so their releases "
                                          "are not checked: %s" % (len(scan.unreadable), ", ".join(scan.unreadable)))
                              if n)
    return scan


# ---------------------------------------------------------------------------------------------- one release


def _release_items(transport: Transport, namespace: str, name: str, driver: str) -> List[Dict[str, Any]]:
    """Every revision of one release in one driver (label selector ``owner=helm,name=<release>``)."""
    query = [("labelSelector", "%s,name=%s" % (OWNER_SELECTOR, name))]
    path = "/api/v1/namespaces/%s/%s" % (namespace, RESOURCES[driver])
    resp = transport.request("GET", path, query=query, accept=JSON)
    if resp.status in (401, 403):
        raise _ListRefused(resp.status)
    if not resp.ok:
        raise error_from_response(resp, "listing the revisions of Helm release %s/%s" % (namespace, name),
                                  cluster=transport.cluster_label)
    return [i for i in resp.json().get("items") or []
            if _is_release_item(i, driver) and _labels(i).get("name") == name]


def _unchecked_why(namespace: str, refused: List[str]) -> str:
    if len(refused) == 2:
        return ("listing Secrets and ConfigMaps in namespace %s is forbidden; grant list on secrets in namespace %s "
                "(on configmaps there for HELM_DRIVER=configmap) to check it (docs/rbac.md)" % (namespace, namespace))
    if refused:
        other = CONFIGMAP if refused[0] == SECRET else SECRET
        return ("no release %s found in namespace %s and listing %ss there is forbidden; grant list on %s in "
                "namespace %s to check it (docs/rbac.md)" % (other, namespace, refused[0], RESOURCES[refused[0]],
                                                             namespace))
    return ("no release Secret or ConfigMap found in namespace %s (stored with HELM_DRIVER=sql, or uninstalled "
            "with its objects kept); check it by hand, then accept it by name" % namespace)


def look_up_release(transport: Transport, label: str, crds: CrdTargets) -> Tuple[Optional[HelmRelease], Optional[str]]:
    """Read one release (``namespace/name``) in its namespace, Secrets first, then ConfigMaps, as Helm's drivers
    store it. (its current revision when that declares a removed version, else None; None), or (None, why it
    could not be read, naming the permission that would let it be)."""
    namespace, _sep, name = label.partition("/")
    if not namespace or namespace == "?" or not name:
        return None, "its objects name no release namespace (meta.helm.sh/release-namespace)"
    refused: List[str] = []
    for driver in (SECRET, CONFIGMAP):
        try:
            items = _release_items(transport, namespace, name, driver)
        except _ListRefused:
            refused.append(driver)
            continue
        except CrdOpsError as exc:
            return None, "listing its revisions failed: %s" % (exc.api_message or exc.message)
        if items:
            cand = _Candidates(driver=driver)
            for item in items:
                cand.add(item)
            release, unreadable = _read_current(cand, crds)
            return (None, "its %s %s does not decode" % (driver, unreadable)) if unreadable else (release, None)
    return None, _unchecked_why(namespace, refused)


def look_up_releases(transport: Transport, scan: HelmScan, labels: Sequence[str], crds: CrdTargets) -> HelmScan:
    """Read each release of ``labels`` (named by the objects) that the lists of all namespaces did not show, and
    add it to ``scan``: its documents at removed versions to ``releases``, or why not to ``not_checked``."""
    for label in sorted(set(labels)):
        if label in scan.seen or label in scan.looked_up:
            continue
        scan.looked_up.append(label)
        release, why = look_up_release(transport, label, crds)
        if why is not None:
            scan.not_checked[label] = why
            continue
        scan.scanned += 1
        if release is not None:
            scan.releases.append(release)
    return scan


# ---------------------------------------------------------------------------------------------- the rewrite


@dataclass
class RewriteChange:
    """One document whose ``apiVersion:`` line the rewrite changes."""

    obj: HelmObject
    to_api_version: str

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.obj.to_dict(), to_apiVersion=self.to_api_version)


@dataclass
class RewritePlan:
    """What :func:`rewrite_release` would write: revision ``revision`` (deployed, the moved manifest) and, when the
    revision read was deployed, that one superseded. The stored objects and payloads are kept for the write only:
    no ``repr`` or ``to_dict`` shows them."""

    release: HelmRelease
    changes: List[RewriteChange]
    revision: int = 0  # the new revision: the latest one + 1, as helm upgrade numbers it
    description: str = ""
    stored: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    payload: str = field(default="", repr=False, compare=False)  # the new revision's data.release
    superseded: str = field(default="", repr=False, compare=False)  # the old one's, "" when it is not deployed

    def to_dict(self) -> Dict[str, Any]:
        return {"release": self.release.label, "secret": self.release.secret, "driver": self.release.driver,
                "revision": self.release.revision, "new_revision": self.revision, "description": self.description,
                "changes": [c.to_dict() for c in self.changes]}


def _targets(release: HelmRelease, storage_versions: Mapping[str, str]) -> List[Tuple[HelmObject, str]]:
    out = []
    for obj in release.objects:
        new = storage_versions.get(obj.crd)
        if not new or new == obj.version:
            raise RefusalError("no storage version to rewrite %s %s to in Helm release %s (given: %r)"
                               % (obj.kind, obj.name, release.label, new), crd=obj.crd)
        out.append((obj, new))
    return out


def _object_path(release: HelmRelease, name: str = "") -> str:
    base = "/api/v1/namespaces/%s/%s" % (release.namespace, RESOURCES[release.driver])
    return base + ("/" + name if name else "")


def _latest_revision(transport: Transport, release: HelmRelease) -> int:
    """The release's latest revision number; refused while it is pending (Helm rewrites it when it finishes)."""
    try:
        items = _release_items(transport, release.namespace, release.name, release.driver)
    except _ListRefused as exc:
        why = ("Helm release %s: listing its revisions is forbidden (HTTP %d); grant list on %s in namespace %s "
               "(docs/rbac.md)" % (release.label, exc.status, RESOURCES[release.driver], release.namespace))
        raise RefusalError(why, cluster=transport.cluster_label) from None
    latest = max(items, key=_revision, default=None)
    if latest is not None and _labels(latest).get("status") in PENDING_STATUSES:
        raise RefusalError("Helm release %s: %s" % (release.label, choose_revision(_Candidates(latest=latest))[1]),
                           cluster=transport.cluster_label)
    return max(_revision(latest) if latest is not None else 0, release.revision)


def _read_stored(transport: Transport, release: HelmRelease) -> Dict[str, Any]:
    """The revision read by the scan, as long as it is the one the scan read (same resourceVersion)."""
    what = "%s %s" % (release.driver, release.secret)
    resp = transport.request("GET", _object_path(release, release.secret), accept=JSON)
    if resp.status == 404:
        raise ConflictError("Helm release %s: %s is gone since the scan; run again" % (release.label, what),
                            cluster=transport.cluster_label)
    if not resp.ok:
        raise error_from_response(resp, "reading Helm release %s in %s" % (what, release.namespace),
                                  cluster=transport.cluster_label)
    stored: Dict[str, Any] = resp.json()
    rv = str((stored.get("metadata") or {}).get("resourceVersion") or "")
    if rv != release.resource_version:
        raise ConflictError("Helm release %s: %s changed since the scan (resourceVersion %s, scanned %s); run again"
                            % (release.label, what, rv, release.resource_version), cluster=transport.cluster_label)
    return stored


def describe_move(changes: Sequence[RewriteChange]) -> str:
    """The new revision's ``info.description``: what moved, shown by ``helm history``."""
    moves: Dict[Tuple[str, str, str], List[str]] = {}
    for c in changes:
        moves.setdefault((c.obj.kind, c.obj.api_version, c.to_api_version.rsplit("/", 1)[1]), []).append(c.obj.name)
    parts = ["%s %s%s from %s to %s" % (kind, ", ".join(names[:3]), " (+%d)" % (len(names) - 3) if len(names) > 3
                                        else "", api, new) for (kind, api, new), names in sorted(moves.items())]
    return "crdops.migration: moved %s (a CRD version is removed; do not roll back past this revision)" % (
        "; ".join(parts))


def _go_dumps(release: Mapping[str, Any]) -> bytes:
    """The release JSON as Go's encoding/json writes it (compact, HTML-safe), for Helm's json.Unmarshal."""
    text = json.dumps(release, separators=(",", ":"), ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)
    return text.encode("utf-8")


def _now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _revisions(text: str, new_manifest: str, revision: int, description: str,
               supersede: bool) -> Tuple[bytes, Optional[bytes]]:
    """The new revision's release JSON (the moved manifest, deployed, numbered, described) and, when the old
    revision was deployed, the old one marked superseded."""
    try:
        new = json.loads(text)
        old = json.loads(text) if supersede else None
    except ValueError:
        raise PayloadError("release JSON is malformed") from None
    if not isinstance(new, dict) or not isinstance(new.get("info"), dict):
        raise PayloadError("release JSON has no info")
    new.update(manifest=new_manifest, version=revision)
    new["info"].update(status=DEPLOYED, description=description, last_deployed=_now_rfc3339())
    if old is not None:
        old["info"]["status"] = SUPERSEDED
    return _go_dumps(new), (_go_dumps(old) if old is not None else None)


def plan_rewrite(transport: Transport, release: HelmRelease, storage_versions: Mapping[str, str]) -> RewritePlan:
    """Read the release's revision again and work out the new revision, writing nothing (check mode stops here).

    Refuses, before anything is written, when the revision changed since the scan, when a Helm operation is
    pending, or when a document's apiVersion cannot be changed by editing its one line."""
    targets = _targets(release, storage_versions)
    latest = _latest_revision(transport, release)
    stored = _read_stored(transport, release)
    what = "Helm release %s (%s %s)" % (release.label, release.driver, release.secret)
    changes = [RewriteChange(obj, "%s/%s" % (obj.api_version.rsplit("/", 1)[0], new)) for obj, new in targets]
    plan = RewritePlan(release=release, changes=changes, revision=latest + 1, description=describe_move(changes),
                       stored=stored)
    try:
        text, (_start, _end, manifest) = release_manifest(stored, release.driver)
        new_manifest, missing = rewrite_manifest(manifest, targets)
        if missing:  # same resourceVersion, yet not there: the scan and this read disagree, so touch nothing
            raise ConflictError("%s no longer declares %s; run again" % (
                what, ", ".join("%s %s" % (o.kind, o.name) for o in missing)), cluster=transport.cluster_label)
        if new_manifest == manifest:
            return plan
        new, old = _revisions(text, new_manifest, plan.revision, plan.description,
                              _labels(stored).get("status") == DEPLOYED)
    except PayloadError as exc:
        raise ApiError("%s: the payload does not decode: %s" % (what, exc), cluster=transport.cluster_label) from None
    except CrdOpsError as exc:
        exc.with_context(cluster=transport.cluster_label, obj=release.label)
        raise
    plan.payload = encode_payload(new, release.driver)
    plan.superseded = encode_payload(old, release.driver) if old is not None else ""
    return plan


def _new_object(plan: RewritePlan) -> Dict[str, Any]:
    """Revision ``plan.revision`` as Helm's driver creates it: the old one's labels (custom ones included), with
    ``version``, ``status`` and ``createdAt`` of the new one."""
    rel, stored = plan.release, plan.stored
    labels = dict(_labels(stored))
    labels.pop("modifiedAt", None)
    labels.update(version=str(plan.revision), status=DEPLOYED, createdAt=str(int(time.time())))
    obj: Dict[str, Any] = {"apiVersion": "v1", "kind": rel.driver,
                           "metadata": {"name": "sh.helm.release.v1.%s.v%d" % (rel.name, plan.revision),
                                        "namespace": rel.namespace, "labels": labels},
                           "data": {"release": plan.payload}}
    if rel.driver == SECRET:
        obj["type"] = stored.get("type") or RELEASE_SECRET_TYPE
    return obj


def _superseded_object(plan: RewritePlan) -> Dict[str, Any]:
    """The old revision as Helm's ``Update`` leaves it: status superseded, ``modifiedAt``; its resourceVersion kept."""
    stored = plan.stored
    meta = dict(stored.get("metadata") or {})
    meta["labels"] = dict(_labels(stored), status=SUPERSEDED, modifiedAt=str(int(time.time())))
    meta.pop("managedFields", None)
    return dict(stored, metadata=meta, data=dict(stored.get("data") or {}, release=plan.superseded))


def _write(transport: Transport, plan: RewritePlan, method: str, body: Mapping[str, Any], dry_run: bool) -> str:
    """POST (create) or PUT (update, under the resourceVersion in ``body``); the new resourceVersion."""
    rel = plan.release
    name = str(body["metadata"]["name"])
    query = [("fieldManager", FIELD_MANAGER)] + ([("dryRun", "All")] if dry_run else [])
    path = _object_path(rel) if method == "POST" else _object_path(rel, name)
    resp = transport.request(method, path, body=dumps(body), content_type=JSON, accept=JSON, query=query)
    verb = "creating" if method == "POST" else "updating"
    if resp.status in (401, 403):
        raise RefusalError("Helm release %s: %s %s %s%s is forbidden (HTTP %d): grant %s on %s in namespace %s "
                           "(docs/rbac.md)" % (rel.label, verb, rel.driver, name, " (dry-run)" if dry_run else "",
                                               resp.status, "create" if method == "POST" else "update",
                                               RESOURCES[rel.driver], rel.namespace), cluster=transport.cluster_label)
    if resp.status == 409:
        raise ConflictError("Helm release %s: %s %s %s: %s; run again" % (
            rel.label, verb, rel.driver, name, "it exists already" if method == "POST" else "it changed since the "
            "scan"), cluster=transport.cluster_label)
    if not resp.ok:
        raise error_from_response(resp, "%s Helm release %s %s/%s%s" % (verb, rel.driver, rel.namespace, name,
                                                                        " (dry-run)" if dry_run else ""),
                                  cluster=transport.cluster_label, obj=rel.label)
    return str((resp.json().get("metadata") or {}).get("resourceVersion") or "")


def rewrite_release(transport: Transport, release: HelmRelease, storage_versions: Mapping[str, str]) -> HelmRelease:
    """Store ``release``'s manifest, its affected documents' ``apiVersion:`` line moved to the storage version
    given per CRD, as a new revision, so that the next ``helm upgrade`` can build the current release again.

    Both writes are first sent as a dry-run, so that a missing permission or a revision that exists refuses
    before anything is stored. Then the old revision is marked superseded under the resourceVersion the scan
    read, and the new one created (a create fails when it exists). Between the two no revision is deployed, and
    ``helm upgrade`` reads the latest one, the superseded revision, which still holds what was deployed; never two
    revisions are deployed. When the create fails, the old revision is put back as it was. Returns the new
    revision with no objects left."""
    plan = plan_rewrite(transport, release, storage_versions)
    if not plan.payload:
        return replace(release, objects=[])
    new_obj = _new_object(plan)
    old_obj = _superseded_object(plan) if plan.superseded else None
    old_rv = ""
    _write(transport, plan, "POST", new_obj, dry_run=True)
    if old_obj is not None:
        _write(transport, plan, "PUT", old_obj, dry_run=True)
        old_rv = _write(transport, plan, "PUT", old_obj, dry_run=False)
    try:
        new_rv = _write(transport, plan, "POST", new_obj, dry_run=False)
    except CrdOpsError as exc:
        if old_obj is not None:
            _put_back(transport, plan, old_rv, exc)
        raise
    return replace(release, revision=plan.revision, secret=new_obj["metadata"]["name"], resource_version=new_rv,
                   status=DEPLOYED, objects=[])


def _put_back(transport: Transport, plan: RewritePlan, old_rv: str, exc: CrdOpsError) -> None:
    """After a failed create: the old revision deployed again, as it was (its resourceVersion after our update)."""
    meta = dict(plan.stored.get("metadata") or {}, resourceVersion=old_rv)
    meta.pop("managedFields", None)
    try:
        _write(transport, plan, "PUT", dict(plan.stored, metadata=meta), dry_run=False)
    except CrdOpsError as undo:
        exc.message += ("; revision %d stays superseded, as putting it back failed too (%s): helm upgrade still "
                        "reads it" % (plan.release.revision, undo.api_message or undo.message))

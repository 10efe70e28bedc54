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
are plain JSON), and so does this module.

Which revision matters: ``helm upgrade`` (``pkg/action/upgrade.go``) takes the latest ``deployed`` revision as
the current release, or, when none is deployed, the latest revision if it is ``failed`` or ``superseded``; it
refuses to run at all while the latest revision is pending. The scan reads exactly that revision. An
uninstalled release (``--keep-history``) has no current manifest for an upgrade and is not read. A pending
latest revision (an operation running, or one that was killed) does not change which manifest is read, but it
is reported as ``blocked`` and the rewrite refuses it: Helm would overwrite the Secret when it finishes.

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
import zlib
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..kube.errors import ApiError, ConflictError, CrdOpsError, RefusalError
from ..kube.transport import ACCEPT_PARTIAL_LIST, JSON, ApiResponse, Transport, dumps, error_from_response

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

SECRETS_PATH = "/api/v1/secrets"
OWNER_SELECTOR = "owner=helm"
RELEASE_SECRET_TYPE = "helm.sh/release.v1"
# Helm's util.go: decompress only when these lead, for releases stored before compression
GZIP_MAGIC = b"\x1f\x8b\x08"
DEPLOYED = "deployed"
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

    @property
    def label(self) -> str:
        return "%s/%s" % (self.namespace, self.name)

    def to_dict(self) -> Dict[str, Any]:
        return {"release": self.label, "namespace": self.namespace, "name": self.name, "revision": self.revision,
                "status": self.status, "secret": self.secret, "blocked": self.blocked,
                "objects": [o.to_dict() for o in self.objects]}


@dataclass
class HelmScan:
    """What the scan found; ``checked`` is False when the Secrets could not be listed (``note`` says why)."""

    checked: bool
    note: Optional[str]
    releases: List[HelmRelease] = field(default_factory=list)
    scanned: int = 0  # release Secrets decoded
    unreadable: List[str] = field(default_factory=list)  # namespace/secret whose payload did not decode

    def to_dict(self) -> Dict[str, Any]:
        return {"checked": self.checked, "note": self.note, "scanned": self.scanned,
                "unreadable": list(self.unreadable), "releases": [r.to_dict() for r in self.releases]}

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


def decode_payload(data: str) -> bytes:
    """The release JSON from a Secret's ``data.release`` as the API returns it (base64 of Helm's base64)."""
    try:
        helm_text = base64.b64decode(data, validate=True)
        raw = base64.b64decode(helm_text, validate=True)
    except (binascii.Error, ValueError):
        raise PayloadError("not base64") from None
    if len(raw) > 3 and raw[:3] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise PayloadError("not a complete gzip stream") from None
    return raw


def encode_payload(release_json: bytes) -> str:
    """Helm's ``encodeRelease`` (gzip at best compression, base64), then the Secret data's own base64.

    The deflate bytes differ from Go's compressor; Helm reads any gzip stream, and the header (no name, mtime
    0, best-compression flag) matches what Go's gzip writer sets."""
    compressed = gzip.compress(release_json, compresslevel=9, mtime=0)
    helm_text = base64.b64encode(compressed)
    return base64.b64encode(helm_text).decode("ascii")


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


def release_manifest(secret: Mapping[str, Any]) -> Tuple[str, Tuple[int, int, str]]:
    """The release JSON text of a Helm release Secret and where its manifest lies in it."""
    data = (secret.get("data") or {}).get("release")
    if not isinstance(data, str) or not data:
        raise PayloadError("the Secret has no data.release")
    raw = decode_payload(data)
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
    """The Secrets list answered 401/403: the scan reports "not checked" instead of failing the run."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class _Candidates:
    """Per release, the only two Secrets the choice of revision needs, so memory stays per release."""

    deployed: Optional[Dict[str, Any]] = None
    latest: Optional[Dict[str, Any]] = None


def _labels(item: Mapping[str, Any]) -> Mapping[str, Any]:
    return (item.get("metadata") or {}).get("labels") or {}


def _revision(item: Mapping[str, Any]) -> int:
    try:
        return int(_labels(item).get("version", ""))
    except ValueError:
        return -1


def _is_release_secret(item: Mapping[str, Any]) -> bool:
    """Helm's own release Secrets; another Secret labelled owner=helm is none of ours."""
    return item.get("type") == RELEASE_SECRET_TYPE and bool(_labels(item).get("name")) and _revision(item) >= 0


def _secret_pages(transport: Transport, page_size: int) -> Iterator[List[Dict[str, Any]]]:
    """The release Secrets of every namespace, a page at a time (a page holds whole payloads, so keep it small)."""
    token: Optional[str] = None
    while True:
        query = [("labelSelector", OWNER_SELECTOR), ("limit", str(page_size))] + ([("continue", token)] if token else [])
        resp = transport.request("GET", SECRETS_PATH, query=query, accept=JSON)
        if resp.status in (401, 403):
            raise _ListRefused(resp.status)
        if resp.status == 410 and token:
            # the continue token expired: the Status carries one that resumes at a newer snapshot, which is
            # enough here, as a rewrite re-reads its Secret under its resourceVersion anyway
            token = str((resp.status_body().get("metadata") or {}).get("continue") or "")
            if token:
                continue
        if not resp.ok:
            raise error_from_response(resp, "listing Helm release Secrets", cluster=transport.cluster_label)
        body = resp.json()
        yield list(body.get("items") or [])
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return


def _collect(transport: Transport, page_size: int) -> Dict[Tuple[str, str], _Candidates]:
    """(namespace, release) -> its latest deployed Secret and its latest Secret of any status."""
    out: Dict[Tuple[str, str], _Candidates] = {}
    for page in _secret_pages(transport, page_size):
        for item in page:
            if not _is_release_secret(item):
                continue
            key = (str((item.get("metadata") or {}).get("namespace") or ""), str(_labels(item)["name"]))
            cand = out.setdefault(key, _Candidates())
            rev = _revision(item)
            if cand.latest is None or rev > _revision(cand.latest):
                cand.latest = item
            if _labels(item).get("status") == DEPLOYED and (cand.deployed is None or rev > _revision(cand.deployed)):
                cand.deployed = item
    return out


def choose_revision(cand: _Candidates) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """The Secret ``helm upgrade`` treats as the current release (``pkg/action/upgrade.go``), and why a
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


def _release_of(item: Mapping[str, Any], objects: List[HelmObject], blocked: Optional[str]) -> HelmRelease:
    meta = item.get("metadata") or {}
    return HelmRelease(namespace=str(meta.get("namespace") or ""), name=str(_labels(item)["name"]),
                       revision=_revision(item), secret=str(meta.get("name") or ""),
                       resource_version=str(meta.get("resourceVersion") or ""), objects=objects,
                       status=str(_labels(item).get("status") or ""), blocked=blocked)


def scan_helm_releases(transport: Transport, crds: CrdTargets, page_size: int = 100) -> HelmScan:
    """Name every Helm release (Secret storage) whose current revision declares a kind of ``crds`` at a
    version that ``crds`` says the next release removes.

    A 401/403 on the list is a "not checked" with a note, never an exception: the run goes on, and the
    report shows the doubt. Payloads that do not decode are named in ``unreadable`` (Helm skips them too)."""
    if page_size < 1:
        raise CrdOpsError("page_size must be >= 1, got %r" % page_size)
    if not any(removed for _g, _k, removed in crds.values()):
        return HelmScan(checked=True, note=None)  # no version is removed: no release can break
    try:
        candidates = _collect(transport, page_size)
    except _ListRefused as exc:
        return HelmScan(checked=False, note=RBAC_NOTE % exc.status)
    scan = HelmScan(checked=True, note=None)
    for key in sorted(candidates):
        item, blocked = choose_revision(candidates[key])
        if item is None:
            continue
        try:
            _text, (_start, _end, manifest) = release_manifest(item)
        except PayloadError:
            scan.unreadable.append("%s/%s" % (key[0], (item.get("metadata") or {}).get("name")))
            continue
        scan.scanned += 1
        objects = find_objects(manifest, crds)
        if objects:
            scan.releases.append(_release_of(item, objects, blocked))
    if scan.unreadable:
        scan.note = ("%d release Secret(s) could not be decoded, so their releases are not checked: %s"
                     % (len(scan.unreadable), ", ".join(scan.unreadable)))
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
    """What :func:`rewrite_release` would write. The Secret and its new payload are kept for the write
    only: no ``repr`` or ``to_dict`` shows them."""

    release: HelmRelease
    changes: List[RewriteChange]
    secret: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    payload: str = field(default="", repr=False, compare=False)

    def to_dict(self) -> Dict[str, Any]:
        return {"release": self.release.label, "secret": self.release.secret, "revision": self.release.revision,
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


def _secret_path(namespace: str, name: str) -> str:
    return "/api/v1/namespaces/%s/secrets/%s" % (namespace, name)


def _refuse_pending(transport: Transport, release: HelmRelease) -> None:
    """Refuse while the release's latest revision is pending: Helm rewrites the Secret when it finishes."""
    query = [("labelSelector", "%s,name=%s" % (OWNER_SELECTOR, release.name))]
    resp = transport.request("GET", "/api/v1/namespaces/%s/secrets" % release.namespace, query=query,
                             accept=ACCEPT_PARTIAL_LIST)
    if not resp.ok:
        raise error_from_response(resp, "listing the revisions of Helm release %s" % release.label,
                                  cluster=transport.cluster_label)
    items = [i for i in resp.json().get("items") or [] if _labels(i).get("name") == release.name]
    latest = max(items, key=_revision, default=None)
    if latest is not None and _labels(latest).get("status") in PENDING_STATUSES:
        raise RefusalError("Helm release %s: %s" % (release.label, choose_revision(_Candidates(latest=latest))[1]),
                           cluster=transport.cluster_label)


def _read_secret(transport: Transport, release: HelmRelease) -> Dict[str, Any]:
    """The release Secret, as long as it is the one the scan read (same resourceVersion)."""
    resp = transport.request("GET", _secret_path(release.namespace, release.secret), accept=JSON)
    if resp.status == 404:
        raise ConflictError("Helm release %s: Secret %s is gone since the scan; run again"
                            % (release.label, release.secret), cluster=transport.cluster_label)
    if not resp.ok:
        raise error_from_response(resp, "reading Helm release Secret %s/%s" % (release.namespace, release.secret),
                                  cluster=transport.cluster_label)
    secret: Dict[str, Any] = resp.json()
    rv = str((secret.get("metadata") or {}).get("resourceVersion") or "")
    if rv != release.resource_version:
        raise ConflictError("Helm release %s: Secret %s changed since the scan (resourceVersion %s, scanned %s); "
                            "run again" % (release.label, release.secret, rv, release.resource_version),
                            cluster=transport.cluster_label)
    return secret


def plan_rewrite(transport: Transport, release: HelmRelease, storage_versions: Mapping[str, str]) -> RewritePlan:
    """Read the release Secret again and work out the rewrite, writing nothing (check mode stops here).

    Refuses, before anything is written, when the Secret changed since the scan, when a Helm operation is
    pending, or when a document's apiVersion cannot be changed by editing its one line."""
    targets = _targets(release, storage_versions)
    _refuse_pending(transport, release)
    secret = _read_secret(transport, release)
    what = "Helm release %s (Secret %s)" % (release.label, release.secret)
    try:
        text, (start, end, manifest) = release_manifest(secret)
        new_manifest, missing = rewrite_manifest(manifest, targets)
    except PayloadError as exc:
        raise ApiError("%s: the payload does not decode: %s" % (what, exc), cluster=transport.cluster_label) from None
    except CrdOpsError as exc:
        exc.with_context(cluster=transport.cluster_label, obj=release.label)
        raise
    if missing:  # same resourceVersion, yet not there: the scan and this read disagree, so touch nothing
        raise ConflictError("%s no longer declares %s; run again" % (
            what, ", ".join("%s %s" % (o.kind, o.name) for o in missing)), cluster=transport.cluster_label)
    changes = [RewriteChange(obj, "%s/%s" % (obj.api_version.rsplit("/", 1)[0], new)) for obj, new in targets]
    payload = ""
    if new_manifest != manifest:
        new_text = text[:start] + go_json_string(new_manifest) + text[end:]
        payload = encode_payload(new_text.encode("utf-8"))
    return RewritePlan(release=release, changes=changes, secret=secret, payload=payload)


def rewrite_release(transport: Transport, release: HelmRelease, storage_versions: Mapping[str, str]) -> HelmRelease:
    """Rewrite the ``apiVersion:`` line of ``release``'s affected documents to the storage version given per
    CRD, so that the next ``helm upgrade`` can build the current release again.

    The Secret is PUT back with the resourceVersion the scan read (the apiserver answers 409 if Helm or anyone
    wrote it since); revision, labels, status and every other byte of the release stay as they were. Returns the
    release with its new resourceVersion and no objects left."""
    plan = plan_rewrite(transport, release, storage_versions)
    if not plan.payload:
        return replace(release, objects=[])
    body = dict(plan.secret, data=dict(plan.secret.get("data") or {}, release=plan.payload))
    resp = transport.request("PUT", _secret_path(release.namespace, release.secret), body=dumps(body),
                             content_type=JSON, accept=JSON, query=[("fieldManager", FIELD_MANAGER)])
    if resp.status == 409:
        raise ConflictError("Helm release %s: Secret %s changed since the scan; run again"
                            % (release.label, release.secret), cluster=transport.cluster_label)
    if not resp.ok:
        raise _write_error(resp, release, transport.cluster_label)
    new_rv = str((resp.json().get("metadata") or {}).get("resourceVersion") or "")
    return replace(release, resource_version=new_rv, objects=[])


def _write_error(resp: ApiResponse, release: HelmRelease, cluster: str) -> CrdOpsError:
    return error_from_response(resp, "writing Helm release Secret %s/%s" % (release.namespace, release.secret),
                               cluster=cluster, obj=release.label)

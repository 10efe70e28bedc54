# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The one reader of CRD manifests, for the role (through a filter plugin) and every module.

A release is usually shipped as one file holding its CRDs next to a Namespace, a Deployment and RBAC:
documents that are not CRDs are skipped and reported, never an error. A CRD at
``apiextensions.k8s.io/v1beta1`` is an error: the apiserver stopped serving that API in Kubernetes 1.22,
so such a manifest cannot be the release being applied.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .errors import BadInputError

try:
    import yaml

    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

CRD_KIND = "CustomResourceDefinition"
# this collection's own annotations on a live CRD (the migration record, the resume checkpoint, a repair's note):
# they describe that one CRD, and a manifest carries them only when exported from a live cluster
OWN_ANNOTATION_PREFIX = "migration.crdops.io/"
CRD_API_VERSION = "apiextensions.k8s.io/v1"
_GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class Skipped:
    """A document that is not a CRD: where it is and what it is."""

    source: str
    index: str
    kind: str

    def as_dict(self) -> Dict[str, str]:
        return {"file": self.source, "index": self.index, "kind": self.kind}

    def __str__(self) -> str:
        return "%s document %s (%s)" % (self.source, self.index, self.kind)


@dataclass(frozen=True)
class Stripped:
    """A CRD document that carried this collection's annotations, and which ones were dropped before applying it."""

    source: str
    index: str
    name: str
    annotations: Tuple[str, ...]

    def as_dict(self) -> Dict[str, Any]:
        return {"file": self.source, "index": self.index, "name": self.name, "annotations": list(self.annotations)}

    def __str__(self) -> str:
        return "%s document %s (%s: %s)" % (self.source, self.index, self.name, ", ".join(self.annotations))


@dataclass(frozen=True)
class Manifest:
    """One CRD document, its ``status`` removed (a manifest's status is never applied)."""

    doc: Dict[str, Any]
    source: str
    index: str

    @property
    def name(self) -> str:
        return str(self.doc["metadata"]["name"])

    @property
    def label(self) -> str:
        return "%s document %s" % (self.source, self.index)


@dataclass
class ManifestSet:
    files: List[str] = field(default_factory=list)
    crds: List[Manifest] = field(default_factory=list)
    skipped: List[Skipped] = field(default_factory=list)
    stripped: List[Stripped] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        return {"files": list(self.files), "crds": [m.doc for m in self.crds],
                "skipped": [s.as_dict() for s in self.skipped], "stripped": [s.as_dict() for s in self.stripped]}


def _is_glob(path: str) -> bool:
    return any(c in path for c in _GLOB_CHARS)


def _resolve(path: str, base_dir: Optional[str]) -> str:
    path = os.path.expanduser(path)
    if base_dir and not os.path.isabs(path):
        path = os.path.join(base_dir, path)
    # absolute: a file named in a result or a message is the one read, whoever reads it from where
    return os.path.abspath(path)


def expand_paths(paths: Sequence[str], base_dir: Optional[str] = None) -> List[str]:
    """Paths and globs to files, in the given order; a glob's matches sorted. Relative to ``base_dir``."""
    out: List[str] = []
    for item in paths:
        path = _resolve(str(item), base_dir)
        if _is_glob(path):
            out.extend(sorted(p for p in glob.glob(path) if os.path.isfile(p)))
        else:
            out.append(path)
    return out


def _searched_dir(pattern: str) -> str:
    """The directory a glob searches: its longest leading part without a glob character."""
    head = pattern
    while _is_glob(head):
        head = os.path.dirname(head)
    return os.path.abspath(head or ".")


def _not_found(label: str, given: str, path: str, base_dir: Optional[str]) -> BadInputError:
    """A path or glob that names no file: what was given, where it was looked for, and against what."""
    relative = not os.path.isabs(os.path.expanduser(given))
    where = ("; a relative path resolves against %s" % (
        "the working directory of the run, %s" % os.getcwd() if base_dir is None else base_dir)) if relative else ""
    if _is_glob(path):
        searched = _searched_dir(path)
        state = "" if os.path.isdir(searched) else ", which does not exist"
        return BadInputError("%s: %s matches no file in %s%s%s" % (label, given, searched, state, where))
    return BadInputError("%s: %s: no such file (looked for %s%s)" % (label, given, os.path.abspath(path), where))


def _load_file(path: str) -> List[Any]:
    if not HAS_YAML:
        raise BadInputError("PyYAML is required to read CRD manifest files (%s)" % path)
    try:
        with open(path, encoding="utf-8") as fh:
            # libyaml's parser when PyYAML has it: the same safe constructors, a release bundle parsed ~10x faster
            return list(yaml.load_all(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except OSError as exc:
        raise BadInputError("cannot read CRD manifest %s: %s" % (path, exc.strerror or exc)) from exc
    except yaml.YAMLError as exc:
        raise BadInputError("CRD manifest %s is not valid YAML: %s" % (path, exc)) from exc


def _documents(docs: Sequence[Any]) -> Iterator[Tuple[str, Any]]:
    """(index, document) of a file's documents; the items of a ``kind: List`` document count one each."""
    for i, doc in enumerate(docs):
        if doc is None:
            continue  # an empty document, e.g. after a trailing ---
        if isinstance(doc, dict) and doc.get("kind") == "List":
            for j, item in enumerate(doc.get("items") or []):
                yield "%d.items[%d]" % (i, j), item
        else:
            yield str(i), doc


def _is_crd(doc: Any, where: str) -> bool:
    """True for a CRD at apiextensions.k8s.io/v1, False for any other document; an error for an old CRD."""
    if not isinstance(doc, dict) or doc.get("kind") != CRD_KIND:
        return False
    api_version = doc.get("apiVersion")
    if api_version != CRD_API_VERSION:
        raise BadInputError(
            "%s: CustomResourceDefinition at apiVersion %r, not %s (apiextensions.k8s.io/v1beta1 is not served "
            "since Kubernetes 1.22): use the release's apiextensions.k8s.io/v1 manifests" % (where, api_version,
                                                                                             CRD_API_VERSION))
    if not (doc.get("metadata") or {}).get("name"):
        raise BadInputError("%s: CustomResourceDefinition without metadata.name" % where)
    return True


def _drop_own_annotations(crd: Dict[str, Any]) -> Tuple[str, ...]:
    """Remove this collection's annotations from a CRD document (copying what it changes); the names removed.

    A record, checkpoint or repair note in a manifest was exported from some live CRD; applied here it would claim
    that CRD's migration for this one."""
    meta = crd.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("annotations"), dict):
        return ()
    annotations: Dict[str, Any] = meta["annotations"]
    own = tuple(sorted(k for k in annotations if str(k).startswith(OWN_ANNOTATION_PREFIX)))
    if own:
        kept = dict((k, v) for k, v in annotations.items() if k not in own)
        crd["metadata"] = dict(meta, annotations=kept) if kept else dict(
            (k, v) for k, v in meta.items() if k != "annotations")
    return own


def stripped_summary(stripped: Sequence[Stripped]) -> str:
    """One sentence naming the CRD documents whose crdops annotations were dropped; empty when none."""
    if not stripped:
        return ""
    plural = "" if len(stripped) == 1 else "s"
    return ("crdops annotations dropped from %d CRD document%s before applying (exported from a live CRD, they "
            "describe that CRD, not this cluster's): %s" % (len(stripped), plural, "; ".join(str(s) for s in stripped)))


def _kind_of(doc: Any) -> str:
    if isinstance(doc, dict):
        return str(doc.get("kind") or "no kind")
    return "not a mapping: %s" % type(doc).__name__


class ManifestReader:
    """Reads files and inline CRD dicts into one ManifestSet; ``label`` names the option in messages."""

    def __init__(self, label: str = "manifests", base_dir: Optional[str] = None) -> None:
        self.label = label
        self.base_dir = base_dir
        self.result = ManifestSet()

    def add_doc(self, doc: Any, source: str, index: str) -> None:
        if _is_crd(doc, "%s document %s" % (source, index)):
            crd = dict((k, v) for k, v in doc.items() if k != "status")
            dropped = _drop_own_annotations(crd)
            if dropped:
                self.result.stripped.append(Stripped(source, index, str(crd["metadata"]["name"]), dropped))
            self.result.crds.append(Manifest(doc=crd, source=source, index=index))
        else:
            self.result.skipped.append(Skipped(source=source, index=index, kind=_kind_of(doc)))

    def add_file(self, path: str) -> None:
        self.result.files.append(path)
        for index, doc in _documents(_load_file(path)):
            self.add_doc(doc, path, index)

    def add_path(self, given: str) -> None:
        """A file or a glob; one that names no file is an error that says where it was looked for."""
        path = _resolve(given, self.base_dir)
        files = expand_paths([path])
        if not files or not (_is_glob(path) or os.path.exists(path)):
            raise _not_found(self.label, given, path, self.base_dir)
        for file in files:
            self.add_file(file)

    def read(self, items: Sequence[Any]) -> ManifestSet:
        for position, item in enumerate(items or ()):
            if isinstance(item, dict):
                self.add_doc(item, "%s[%d]" % (self.label, position), "0")
            elif isinstance(item, str):
                self.add_path(item)
            else:
                raise BadInputError("%s[%d]: expected a file path, a glob or a CRD as a dictionary, got %s"
                                    % (self.label, position, type(item).__name__))
        if items and not self.result.crds:
            raise BadInputError("%s: no CustomResourceDefinition in %s%s" % (
                self.label, ", ".join(str(i) if isinstance(i, str) else "an inline document" for i in items),
                ("; skipped: " + ", ".join(str(s) for s in self.result.skipped)) if self.result.skipped else ""))
        return self.result


def read_manifests(items: Sequence[Any], label: str = "manifests", base_dir: Optional[str] = None) -> ManifestSet:
    """Read CRD manifests: file paths, globs (relative ones against ``base_dir``) and CRDs as dicts.

    Multi-document files and ``kind: List`` documents are read; documents that are not CRDs are skipped
    and listed in ``skipped``. Errors (BadInputError) name the file and document: a file that cannot be
    read or is not YAML, a CRD that is not ``apiextensions.k8s.io/v1``, or no CRD at all in a non-empty
    ``items``.
    """
    return ManifestReader(label, base_dir).read(items)


def skipped_summary(skipped: Sequence[Skipped]) -> str:
    """``N documents skipped (not CRDs): <file> document <i> (<kind>), ...``; empty when none."""
    if not skipped:
        return ""
    plural = "" if len(skipped) == 1 else "s"
    return "%d document%s skipped (not CRDs): %s" % (len(skipped), plural, ", ".join(str(s) for s in skipped))

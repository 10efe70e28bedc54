# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""managedFields entries recorded at a version being removed, and the JSON patch that fixes them.

An object server-side applied at an old version keeps ``managedFields`` entries with ``apiVersion: <group>/<old>``.
Once the old version is removed from the CRD, every server-side apply to the object fails with HTTP 500
"request to convert CR to an invalid group/version" (kubernetes/kubernetes#111937), because apply converts the
object to each entry's version. The re-store pass fixes that in its one write per object: a JSON patch, guarded by
a ``test`` of the listed resourceVersion, that

- sets each such entry's ``apiVersion`` to the storage version when the versions share field paths (conversion
  strategy ``None``), which keeps ownership (conflicts still name the original manager);
- under a conversion webhook, *translates* the entry: its ``fieldsV1`` is rewritten into the storage version's
  paths (field_mapping.py), manager, operation, subresource and time kept. Paths the conversion is not shown to
  map are dropped from that entry alone and named; an entry of which nothing maps is kept as it is, and the
  result says that removing its version must be refused (an object is never left with no managedFields: the
  apiserver would then credit every field to ``before-first-apply`` and a non-forced apply would conflict);
- removes an ``Update`` entry whose rewrite would duplicate another entry of the same manager (the apiserver keys
  Update managers with their apiVersion and would merge the two, losing one set).

A translation is held against its own object when the caller has it (the re-store lists whole objects at the storage
version when it translates, so this costs no request): the mapping's rules were checked on a sample only, and a
conversion that depends on another field may put this object's value elsewhere (target_presence.py). An entry that
would own a path the object lacks is kept as the apiserver left it, counted and named, and its version is reported
not removable like an entry of which nothing maps.

Which entries: those at the versions the target release removes (``fix_versions``). Without that list, conversion
``None`` fixes every version other than the storage version (paths are identical, nothing is lost), and a webhook
conversion leaves every entry untouched and reports it. Entries at a version that stays served are never touched.

``keep_declared``: an ``Apply`` entry, and kubectl's last-applied annotation, at a version being removed that the CRD
still serves are left as they are. They are their applier's declaration that its source still says that version
(client_evidence.py): the check before the next release reads them, a rerun reads them again, and they vanish when
the applier applies at a version that stays. The apiserver converts them while the version is served; the passes
around the next release's apply translate them (without this flag) once that release is going to be applied.
``keep_written_since`` (the apiserver time the run began) does the same for any entry at such a version written since:
a controller still writing there, whose evidence would otherwise be relabelled before the check looks.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Tuple

from ..ha.server_clock import parse_time
from ..kube.crd_schema import ANY_NODE
from .field_mapping import FieldMapping, readable, walk_members
from .last_applied import LAST_APPLIED, POINTER, LastAppliedFix, applied_version, fix_last_applied
from .target_presence import paths_not_in_object


# what the pass does to an entry at another version of the group
REWRITTEN = "rewritten"  # apiVersion set to the storage version (conversion None)
TRANSLATED = "translated"  # apiVersion and fieldsV1 rewritten through the field mapping (webhook)
DROPPED = "dropped"  # removed: its rewrite would duplicate another entry's identity
KEPT_UNMAPPABLE = "kept_unmappable"  # nothing of it maps (or no mapping): kept, removal of its version refused
# translated, it would own a path its object (read at the storage version) lacks: kept, removal of its version refused
KEPT_NOT_IN_OBJECT = "kept_not_in_object"
UNTOUCHED = "untouched"  # its version stays served (or no removed versions given under a webhook)
CHANGES = (REWRITTEN, TRANSLATED, DROPPED)


class EntryFix(NamedTuple):
    """One entry at another version of the group and what the pass does to it."""

    position: int  # in metadata.managedFields
    action: str
    manager: str
    operation: str
    subresource: str
    version: str
    entry: Optional[Dict[str, Any]] = None  # the entry to write (rewritten, translated)
    dropped_paths: Tuple[str, ...] = ()  # owned paths lost (translated, dropped)
    note: str = ""  # why kept or dropped
    missing_paths: Tuple[str, ...] = ()  # kept_not_in_object: the translated paths its object lacks


class StaleFields(NamedTuple):
    """The entries of one object's ``metadata.managedFields`` at other versions of the group, as listed."""

    indices: Tuple[int, ...]  # positions of the entries the patch changes, ascending
    total: int  # number of entries the object has
    collide: FrozenSet[int] = frozenset()  # entries whose rewrite would duplicate another entry's identity
    fixes: Tuple[EntryFix, ...] = ()  # every entry at another version, changed or not
    policy: Optional[ManagedFieldsPolicy] = None  # to classify a fresh read the same way
    last_applied: Optional[LastAppliedFix] = None  # kubectl's annotation at a version being removed

    @property
    def writes(self) -> bool:
        """Whether the object's write changes anything besides re-storing it."""
        return bool(self.indices) or self.translates_annotation

    @property
    def annotation_text(self) -> Optional[str]:
        """The last-applied annotation this write sets; None when it leaves it as it is."""
        return self.last_applied.text if self.last_applied is not None else None

    @property
    def translates_annotation(self) -> bool:
        return self.annotation_text is not None

    @property
    def field_manager(self) -> Optional[str]:
        """The manager to send the write as: the annotation's owner when it is rewritten (else the default)."""
        return self.last_applied.owner if self.last_applied is not None and self.translates_annotation else None

    @property
    def changes(self) -> Tuple[EntryFix, ...]:
        return tuple(f for f in self.fixes if f.action in CHANGES)

    @property
    def kept(self) -> Tuple[EntryFix, ...]:
        return tuple(f for f in self.fixes if f.action not in CHANGES)


class PatchPlan(NamedTuple):
    ops: List[Dict[str, Any]]
    rewritten: int  # entries whose apiVersion is set to the storage version
    dropped: int  # entries removed
    translated: int = 0  # entries whose field paths were translated
    last_applied: int = 0  # last-applied annotations rewritten (0 or 1)


def _split(api_version: str) -> Tuple[str, str]:
    group, _sep, version = api_version.rpartition("/")
    return group, version


def _identity(entry: Dict[str, Any], api_version: str) -> Tuple[Any, ...]:
    """How the apiserver keys managers (BuildManagerIdentifier): an Update entry includes its apiVersion,
    an Apply entry does not. Two entries with one identity would be merged by the apiserver, one set lost."""
    operation = entry.get("operation")
    return (entry.get("manager"), operation, entry.get("subresource") or "",
            api_version if operation == "Update" else "")


def owned_paths(fields_v1: Any) -> Tuple[str, ...]:
    if not isinstance(fields_v1, dict):
        return ()
    return tuple(readable(m.keys) for m in walk_members(fields_v1, ANY_NODE))


MappingFor = Callable[[str], FieldMapping]


class ManagedFieldsPolicy:
    """Which entries of an object to fix and how, for one CRD and pass.

    ``fix_versions``: versions whose entries are fixed (the versions the target release removes); None when
    not given. ``mapping_for``: the field mapping from a version to the storage version (webhook conversion)."""

    def __init__(self, group: str, storage_version: Optional[str], conversion_strategy: str = "None",
                 fix_versions: Optional[FrozenSet[str]] = None, mapping_for: Optional[MappingFor] = None,
                 served: Optional[FrozenSet[str]] = None, keep_declared: bool = False,
                 keep_written_since: Optional[float] = None) -> None:
        self.group = group
        self.keep_declared = keep_declared
        self.keep_written_since = keep_written_since
        self.storage_version = storage_version or ""
        self.translate = conversion_strategy != "None"
        self.fix_versions = fix_versions
        self.mapping_for = mapping_for
        self.served = served

    @property
    def reads_objects(self) -> bool:
        """Whether classify wants each object's own fields (``obj``): it translates entries through a field mapping,
        and a translation is written only where the object has every path it names."""
        return self.translate and self.mapping_for is not None

    def keeps_declaration(self, entry: Any, version: str) -> bool:
        """An applier's declaration, or a write since the run began, at a version still served: evidence left for the
        check before the next release."""
        if self.served is None or version not in self.served or not isinstance(entry, dict):
            return False
        if self.keep_declared and entry.get("operation") == "Apply":
            return True
        written = parse_time(entry.get("time"))
        return self.keep_written_since is not None and written is not None and written >= self.keep_written_since

    def fixes(self, version: str) -> bool:
        if self.fix_versions is None:
            return not self.translate  # conversion None: every other version; webhook: none without the list
        # a version the CRD no longer serves breaks server-side apply already (kubernetes#111937): fixed too
        return version in self.fix_versions or (self.served is not None and version not in self.served)

    def classify(self, managed_fields: Any, annotations: Any = None,
                 obj: Optional[Mapping[str, Any]] = None) -> Optional[StaleFields]:
        """The object's entries at other versions of the group and what to do with each, and its last-applied
        annotation when that names a version being removed; None when there are none. ``obj``: the whole object as
        read at the storage version (see ``reads_objects``); without it a translation is not held against it."""
        entries = list(managed_fields or ()) if isinstance(managed_fields, list) else []
        if not self.storage_version:
            return None
        fixes = [self.decide(i, e, obj) for i, e in enumerate(entries) if self.at_other_version(e)]
        annotation = self.last_applied(annotations, entries, obj)
        if not fixes:
            return StaleFields((), len(entries), policy=self, last_applied=annotation) if annotation else None
        target = "%s/%s" % (self.group, self.storage_version)
        changing = set(f.position for f in fixes if f.action in CHANGES)
        # identities that exist after the fix: the entries that stay, then each rewritten one in turn
        taken = set(_identity(e, str(e.get("apiVersion") or "")) for i, e in enumerate(entries)
                    if i not in changing and isinstance(e, dict))
        collide = set()
        for n, fix in enumerate(fixes):
            if fix.position not in changing:
                continue
            ident = _identity(entries[fix.position], target)
            if ident in taken:
                collide.add(fix.position)
                fixes[n] = fix._replace(action=DROPPED, entry=None, note="duplicate of this manager's entry at %s"
                                        % target, dropped_paths=owned_paths(entries[fix.position].get("fieldsV1")))
            taken.add(ident)
        return StaleFields(tuple(sorted(changing)), len(entries), frozenset(collide), tuple(fixes), self, annotation)

    def last_applied(self, annotations: Any, entries: List[Any],
                     obj: Optional[Mapping[str, Any]] = None) -> Optional[LastAppliedFix]:
        """kubectl's last-applied annotation, translated when it was applied at a version being removed under a
        webhook conversion (conversion None keeps the names, so it is left as it is). With ``obj``, a translation
        naming a path that object lacks is not written (the sampled rules do not hold for it)."""
        if not self.translate or self.mapping_for is None or not isinstance(annotations, dict):
            return None
        text = annotations.get(LAST_APPLIED)
        found = applied_version(text, self.group)
        if found is None or found[1] == self.storage_version or not self.fixes(found[1]):
            return None
        if self.keeps_declaration({"operation": "Apply"}, found[1]):  # the client-side applier's declaration
            return None
        manifest, version = found
        return fix_last_applied(str(text), manifest, version, self.group, self.storage_version,
                                self.mapping_for(version), entries, obj)

    def at_other_version(self, entry: Any) -> bool:
        if not isinstance(entry, dict):
            return False
        grp, ver = _split(str(entry.get("apiVersion") or ""))
        return grp == self.group and bool(ver) and ver != self.storage_version

    def decide(self, index: int, entry: Dict[str, Any], obj: Optional[Mapping[str, Any]] = None) -> EntryFix:
        version = _split(str(entry.get("apiVersion")))[1]
        fix = EntryFix(index, UNTOUCHED, str(entry.get("manager") or ""), str(entry.get("operation") or ""),
                       str(entry.get("subresource") or ""), version)
        if not self.fixes(version):
            return fix
        if self.keeps_declaration(entry, version):
            return fix._replace(note="its client still uses %s (kept while it is served)" % version)
        new_entry = dict(entry, apiVersion="%s/%s" % (self.group, self.storage_version))
        if not self.translate:
            return fix._replace(action=REWRITTEN, entry=new_entry)
        if entry.get("fieldsType", "FieldsV1") != "FieldsV1" or self.mapping_for is None:
            return fix._replace(action=KEPT_UNMAPPABLE, note="no field mapping")
        mapping = self.mapping_for(version)
        result = mapping.translate(entry.get("fieldsV1") or {})
        if result.dropped and not result.mapped:
            return fix._replace(action=KEPT_UNMAPPABLE, dropped_paths=result.dropped,
                                note="no owned path maps to %s (%s mapping)" % (self.storage_version, mapping.method))
        missing = paths_not_in_object(result.fields, obj) if obj is not None else ()
        if missing:  # the sampled rules do not hold for this object: crediting its owner would be a guess
            return fix._replace(action=KEPT_NOT_IN_OBJECT, missing_paths=missing,
                                note="translated, it would own %s, which the object does not have at %s (%s mapping)"
                                % (", ".join(missing[:5]), self.storage_version, mapping.method))
        new_entry["fieldsV1"] = result.fields
        return fix._replace(action=TRANSLATED, entry=new_entry, dropped_paths=result.dropped)


def stale_entries(managed_fields: Any, group: str, storage_version: Optional[str]) -> Optional[StaleFields]:
    """Entries to fix under conversion None with no removed versions given: every version but the storage one."""
    found = ManagedFieldsPolicy(group, storage_version).classify(managed_fields)
    return found if found is not None and found.writes else None


def plan_patch(resource_version: str, stale: StaleFields) -> PatchPlan:
    """The JSON patch for one object: resourceVersion test, then replacements, then removals (descending).
    Never empties managedFields: only duplicates are removed, and their twin stays."""
    ops: List[Dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}]
    counts = {REWRITTEN: 0, TRANSLATED: 0, DROPPED: 0}
    for fix in stale.changes:  # replacements first, at the listed indices, before any removal shifts them
        if fix.action == REWRITTEN and fix.entry is not None:
            ops.append({"op": "replace", "path": "/metadata/managedFields/%d/apiVersion" % fix.position,
                        "value": fix.entry["apiVersion"]})
        elif fix.action == TRANSLATED and fix.entry is not None:
            ops.append({"op": "replace", "path": "/metadata/managedFields/%d" % fix.position, "value": fix.entry})
        counts[fix.action] += 1
    for fix in sorted((f for f in stale.changes if f.action == DROPPED), key=lambda f: -f.position):
        ops.append({"op": "remove", "path": "/metadata/managedFields/%d" % fix.position})
    if stale.annotation_text is not None:
        ops.append({"op": "replace", "path": POINTER, "value": stale.annotation_text})
    return PatchPlan(ops, counts[REWRITTEN], counts[DROPPED], counts[TRANSLATED], int(stale.translates_annotation))


def removed_for(crd_name: str, removed_versions: Optional[Tuple[str, ...]]) -> Optional[FrozenSet[str]]:
    """The versions ``removed_versions`` names for one CRD (``<crd name>/<version>``, or ``<version>`` for every
    CRD); None when the option was not given."""
    if removed_versions is None:
        return None
    out = set()
    for item in removed_versions:
        name, _sep, version = str(item).rpartition("/")
        if not name or name == crd_name:
            out.add(version)
    return frozenset(out)


def check_removed_versions(crd: Any, removed_versions: Optional[Tuple[str, ...]], cluster: Optional[str]) -> None:
    """Refuse a removed version that is the storage version: its entries are the ones every other is fixed to."""
    from ..kube.errors import BadInputError

    removed = removed_for(crd.name, removed_versions) or frozenset()
    for item in removed_versions or ():
        if "/" in str(item) and not str(item).rpartition("/")[2]:
            raise BadInputError("removed_versions item %r names no version (use <crd name>/<version> or <version>)"
                                % item, cluster=cluster, crd=crd.name)
    if crd.storage_version in removed:
        raise BadInputError(
            "removed_versions names %s, the storage version: the storage version is never removed (change the "
            "storage version first, or drop it from removed_versions)" % crd.storage_version,
            cluster=cluster, crd=crd.name)


def keeps_ownership(conversion_strategy: str) -> bool:
    """Field paths are identical across versions only without a converting webhook."""
    return conversion_strategy == "None"

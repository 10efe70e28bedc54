# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The role's inputs, read and checked once before anything talks to a cluster: the names of the variables
set, the release manifests (the modules' own reader) and the CRD names.

Bad input is returned as ``errors`` (not raised): the role fails with them in one task, so each is said
once, with the variable or file and the fix, instead of inside ansible-core's wrappers of a failed
``set_fact``. Documented in crd_upgrade_inputs.yml.
"""

from __future__ import annotations

import difflib
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.manifests import (
    Skipped, Stripped, read_manifests, skipped_summary, stripped_summary)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.report_runs import keep_count

ROLE_DOC = "ansible-doc -t role crdops.migration.crd_upgrade"
NOTHING_SELECTED = ("no CRDs selected: set crd_upgrade_crd_names or crd_upgrade_release_manifests / "
                    "crd_upgrade_target_manifests")


def known_variables(spec: Optional[Mapping[str, Any]], own: Iterable[str] = ()) -> List[str]:
    """Every option of every entry point of the role's argument spec, and the names the playbooks and the
    role's results use (``own``; one ending in ``*`` stands for every name that starts with it)."""
    names = set(own)
    for entry_point in ((spec or {}).get("argument_specs") or {}).values():
        names.update((entry_point or {}).get("options") or {})
    return sorted(names)


def unknown_variables(variables: Iterable[str], known: Sequence[str]) -> List[str]:
    """One message for the variables set that the role does not know, each with the nearest real name."""
    prefixes = tuple(k[:-1] for k in known if k.endswith("*"))
    exact = [k for k in known if not k.endswith("*")]
    unknown = []
    for name in sorted(set(variables)):
        if name in exact or (prefixes and name.startswith(prefixes)):
            continue
        nearest = difflib.get_close_matches(name, exact, n=1, cutoff=0.6)
        hint = "did you mean %s?" % nearest[0] if nearest else "no variable of the role is close to it"
        unknown.append("%s (%s)" % (name, hint))
    if not unknown:
        return []
    return ["unknown variable%s %s: correct or remove %s; every variable: %s" % (
        "s" if len(unknown) > 1 else "", ", ".join(unknown), "them" if len(unknown) > 1 else "it", ROLE_DOC)]


def plain(value: Any) -> Any:
    """``value`` with every mapping a dict and every sequence a list. The validator deep-copies what it checks, and a
    template engine's lazy container copies its engine along (plugin loaders, each warning on the way): for the role's
    few list and dict variables that was about a third of a CPU-second per cluster on ansible-core 2.19+."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def invalid_values(values: Mapping[str, Any], spec: Optional[Mapping[str, Any]], entry_point: str) -> List[str]:
    """The role's argument spec checks of the values set, one short message: the setting, what is wrong and
    where the spec is (not ansible-core's validation task, whose failure prints the whole spec)."""
    options = ((((spec or {}).get("argument_specs") or {}).get(entry_point) or {}).get("options")) or {}
    given = {name: plain(value) for name, value in (values or {}).items() if name in options}
    if not given:
        return []
    # only the options set: the role's defaults hold the rest, and `required` is checked for what is set
    checked = {name: dict(options[name], required=False) for name in given}
    messages = ArgumentSpecValidator(checked).validate(given).error_messages
    if not messages:
        return []
    return ["%s - see %s" % ("; ".join(messages), ROLE_DOC)]


def report_keep_error(values: Mapping[str, Any]) -> List[str]:
    """crd_upgrade_report_keep must be a whole number >= 0: the argument spec's int takes -3, and a negative
    count of run folders to keep has no meaning (the folders are then never pruned, and this says why)."""
    if "crd_upgrade_report_keep" not in values or keep_count(values["crd_upgrade_report_keep"]) is not None:
        return []
    return ["crd_upgrade_report_keep: %r is not a number of run folders to keep: set a whole number, 0 or more "
            "(0 keeps every run folder; default 30)" % (values["crd_upgrade_report_keep"],)]


def _storage_versions(docs: Sequence[Mapping[str, Any]]) -> Dict[str, Optional[str]]:
    """``{CRD name: storage version}`` of CRD manifests (None for a CRD without a storage version)."""
    out: Dict[str, Optional[str]] = {}
    for doc in docs:
        versions = (doc.get("spec") or {}).get("versions") or []
        out[doc["metadata"]["name"]] = next((v.get("name") for v in versions if v.get("storage")), None)
    return out


def _names(given: Any, docs: Sequence[Mapping[str, Any]]) -> List[str]:
    """The CRDs given (a list, or survey text split on commas, spaces and new lines), or every CRD of ``docs``."""
    if isinstance(given, str):
        given = given.replace(",", " ").split()
    if given:
        return [str(n) for n in given]
    return sorted(set(doc["metadata"]["name"] for doc in docs))


def _read(items: Any, label: str, errors: List[str]) -> Dict[str, Any]:
    if isinstance(items, str):
        items = [items]
    try:
        return read_manifests(list(items or []), label=label).as_dict()
    except BadInputError as exc:
        errors.append(str(exc))
        return {"files": [], "crds": [], "skipped": [], "stripped": []}


def _skipped_line(label: str, skipped: Sequence[Mapping[str, str]]) -> str:
    summary = skipped_summary([Skipped(source=s["file"], index=s["index"], kind=s["kind"]) for s in skipped])
    return "%s: %s" % (label, summary) if summary else ""


def _stripped_line(label: str, stripped: Sequence[Mapping[str, Any]]) -> str:
    summary = stripped_summary([Stripped(source=s["file"], index=s["index"], name=s["name"],
                                         annotations=tuple(s["annotations"])) for s in stripped])
    return "%s: %s" % (label, summary) if summary else ""


def argument_spec_of(spec: Any) -> Optional[Mapping[str, Any]]:
    """The role's argument spec: as given, or read from the file a string names. A path keeps the spec out of the
    template engine: handed over as a parsed mapping, each of its few hundred strings is checked for a template
    when the validator copies it, about a third of a CPU-second per cluster on ansible-core 2.19+."""
    if not isinstance(spec, str):
        return spec
    with open(spec, encoding="utf-8") as fh:
        loaded: Mapping[str, Any] = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return loaded


def crd_upgrade_inputs(variables: Iterable[str], release: Any = (), target: Any = (), crd_names: Any = (),
                       spec: Any = None, own: Iterable[str] = (),
                       values: Optional[Mapping[str, Any]] = None, entry_point: str = "main",
                       installed: Any = (), require_crds: bool = False) -> Dict[str, Any]:
    """Everything init needs from the role's variables, and ``errors`` (empty when all is well); with
    ``require_crds``, no CRD selected is one of them. ``spec`` is the argument spec or the path of its file."""
    spec = argument_spec_of(spec)
    errors = unknown_variables(variables, known_variables(spec, own))
    keep_errors = report_keep_error(values or {})
    # said once: the spec's own int check would name the same variable again
    checked = {k: v for k, v in (values or {}).items() if not (keep_errors and k == "crd_upgrade_report_keep")}
    errors += keep_errors + invalid_values(checked, spec, entry_point)
    rel = _read(release, "crd_upgrade_release_manifests", errors)
    tgt = _read(target, "crd_upgrade_target_manifests", errors)
    # the release in place before the run: what it declares and release N drops is removed after the flip
    before = _read(installed, "crd_upgrade_installed_manifests", errors)
    skipped = [_skipped_line("crd_upgrade_release_manifests", rel["skipped"]),
               _skipped_line("crd_upgrade_target_manifests", tgt["skipped"])]
    names = _names(crd_names, rel["crds"] + tgt["crds"])
    if require_crds and not names and not errors:  # a manifest that could not be read says so itself
        errors.append(NOTHING_SELECTED)
    return {
        "errors": errors,
        "release_files": rel["files"], "release_docs": rel["crds"],
        "target_files": tgt["files"], "target_docs": tgt["crds"],
        "installed_docs": before["crds"],
        "release_storage": _storage_versions(rel["crds"]),
        "names": names,
        "skipped": [line for line in skipped if line],
        "stripped": [line for line in (_stripped_line("crd_upgrade_release_manifests", rel["stripped"]),
                                       _stripped_line("crd_upgrade_target_manifests", tgt["stripped"])) if line],
    }


class FilterModule:
    """Registers nothing: these are steps of the crd_upgrade role, reached through its one filter
    crdops.migration.crd_upgrade_step (role_step.py), so that they are not an API of their own."""

    def filters(self):
        return {}

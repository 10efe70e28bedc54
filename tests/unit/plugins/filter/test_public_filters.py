# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every filter a collection registers is public (`ansible-doc -t filter` lists it): the registered ones are the
ones a playbook calls, plus the role's one entry to its own steps."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.crdops.migration.plugins.filter.role_step import STEPS, AnsibleFilterError, crd_upgrade_step

REPO = Path(__file__).resolve().parents[4]
PUBLIC = {
    "crd_upgrade_manifests",      # read CRD manifests as the modules do
    "crd_upgrade_waves", "crd_upgrade_percent",  # survey answers for serial / max_fail_percentage
    "crd_upgrade_step",           # the role's own steps, one entry
}


def registered() -> dict[str, str]:
    out = {}
    for path in sorted((REPO / "plugins" / "filter").glob("*.py")):
        module = importlib.import_module(f"ansible_collections.crdops.migration.plugins.filter.{path.stem}")
        for name in module.FilterModule().filters():
            assert name not in out, f"{name} registered twice"
            out[name] = path.stem
    return out


def test_the_registered_filters_are_the_public_ones_and_each_is_documented():
    names = registered()
    assert set(names) <= PUBLIC, sorted(set(names) - PUBLIC)
    docs = {p.stem for p in (REPO / "plugins" / "filter").glob("*.yml")}
    assert docs == set(names), (sorted(docs - set(names)), sorted(set(names) - docs))


def test_the_step_filter_documents_every_step_and_no_other():
    doc = yaml.safe_load((REPO / "plugins" / "filter" / "crd_upgrade_step.yml").read_text())["DOCUMENTATION"]
    listed = re.findall(r"C\(([a-z_]+)\)", " ".join(d for d in doc["description"] if d.startswith("Steps of")))
    assert sorted(listed) == sorted(STEPS), (sorted(set(STEPS) - set(listed)), sorted(set(listed) - set(STEPS)))
    assert len(listed) == len(set(listed))


def test_every_step_the_role_calls_exists():
    called = set()
    for path in (REPO / "roles").rglob("*.yml"):
        called |= set(re.findall(r"crdops\.migration\.crd_upgrade_step\('([a-z_]+)'", path.read_text()))
    assert called and called <= set(STEPS), sorted(called - set(STEPS))
    # no role, playbook or scenario file calls a helper by its old name (it would fail only when that task runs)
    for path in [p for top in ("roles", "playbooks", "extensions") for p in (REPO / top).rglob("*.yml")]:
        used = set(re.findall(r"\| *crdops\.migration\.([a-z_]+)", path.read_text()))
        assert used <= registered().keys(), (path, sorted(used - registered().keys()))


def test_a_step_is_the_function_of_that_name_with_the_arguments_given():
    plan = [{"name": "a.io", "removed_versions": ["v1"]}, {"name": "b.io"}]
    migrated = [{"name": "a.io", "unmappable_entries": [
        {"version": "v1", "objects": 2, "manager": "m", "operation": "Apply", "examples": ["ns/x"], "why": "w"}]}]
    assert crd_upgrade_step(plan, "removed_versions") == ["a.io/v1"]
    assert crd_upgrade_step(migrated, "unmappable", plan) == STEPS["unmappable"](migrated, plan) == [
        "a.io: 2 objects keep m's Apply entry at v1 (e.g. ns/x): w"]
    assert crd_upgrade_step(migrated, "unmappable", plan=[]) == []   # keyword arguments reach the step too
    # an entry kept because, translated, it would own paths its object lacks holds release N+1 back the same way
    migrated[0]["entries_not_in_object"] = [{"version": "v1", "objects": 1, "manager": "d", "operation": "Apply",
                                             "examples": ["ns/z"], "paths_missing": [".spec.mass.value"]}]
    assert crd_upgrade_step(migrated, "unmappable", plan)[1] == (
        "a.io: 1 objects keep d's Apply entry at v1 (e.g. ns/z): translated, it would own .spec.mass.value, which "
        "those objects do not have")
    with pytest.raises(AnsibleFilterError, match="crd_upgrade_step: no step 'nope'; the steps are access_checks, "):
        crd_upgrade_step([], "nope")

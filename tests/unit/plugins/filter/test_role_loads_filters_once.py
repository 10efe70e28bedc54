# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role loads its filters and tests once, in ansible-playbook's own process, before the first task's worker.

ansible-core's linear strategy templates each task's name in its own process; every task then runs in a worker
forked from it. A filter or test that process never looked up is loaded again by each worker that meets it: for a
collection filter, every file of the collection's plugins/filter is imported. The role's first task's name therefore
renders `_crd_upgrade_plugins_loaded`, whose template names the filters and tests the role's tasks use. (Measured
side by side by `benchmarks/cluster_cost.py --compare`; this test keeps the wiring in place.)
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from jinja2 import Environment, nodes

REPO = Path(__file__).resolve().parents[4]
ROLE = REPO / "roles" / "crd_upgrade"
WARM = "_crd_upgrade_plugins_loaded"


def first_task_name() -> str:
    main = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    first_import = main[0]["block"][0]["ansible.builtin.import_tasks"]
    return yaml.safe_load((ROLE / "tasks" / first_import).read_text())[0]["name"]


def warm_template() -> nodes.Template:
    text = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())[WARM]
    return Environment().parse(text)


def collection_filters_the_role_uses() -> set[str]:
    text = "\n".join(p.read_text() for p in (ROLE / "tasks").glob("*.yml"))
    return set(re.findall(r"\|\s*(crdops\.migration\.[a-z_]+)", text))


def test_the_first_task_name_renders_the_loading_variable():
    assert first_task_name().endswith("{{ %s }}" % WARM), first_task_name()


def test_the_loading_variable_names_every_collection_filter_the_role_uses_and_ansibles_own():
    tree = warm_template()
    filters = {f.name for f in tree.find_all(nodes.Filter)}
    tests = {t.name for t in tree.find_all(nodes.Test)}
    used = collection_filters_the_role_uses()
    assert used and used <= filters, used - filters
    jinja_own = set(Environment().filters)
    assert filters - used - jinja_own, "no filter of ansible-core's own: its filters stay unloaded"
    assert tests - set(Environment().tests), "no test of ansible-core's own: its tests stay unloaded"


def test_the_loading_variable_renders_empty_and_is_not_folded_away():
    """A constant condition would let Jinja's optimiser drop the branch with the filters before it looks them up."""
    cond = next(iter(warm_template().find_all(nodes.CondExpr)))
    assert not isinstance(cond.test, nodes.Const)
    assert isinstance(cond.expr1, nodes.Const) and cond.expr1.value == ""

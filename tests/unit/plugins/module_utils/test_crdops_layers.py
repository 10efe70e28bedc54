# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The engine's folders are floors: a folder imports only the folders below it, never a private name of another
folder, and nothing of Ansible."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List

import pytest

ENGINE = Path(__file__).resolve().parents[4] / "plugins" / "module_utils" / "_crdops"
# bottom first; the same order as the table in _crdops/README.md
FLOORS = ["kube", "record", "ha", "ownership", "restore", "proof", "repair", "release", "report", "run"]


def target_of(node: ast.ImportFrom, folder: str) -> str:
    """The folder a relative import inside ``folder`` reaches: ``.x`` is its own, ``..other.x`` another."""
    if node.level == 1:
        return folder
    if node.level == 2 and node.module:
        return node.module.split(".")[0]
    return "(%s%s)" % ("." * node.level, node.module or "")


def violations(sources: Dict[str, str]) -> List[str]:
    """Every import of the ``folder/module.py`` sources that goes upwards, across to a private name, out of the
    engine by absolute path, or to Ansible."""
    out = []
    for rel, text in sorted(sources.items()):
        folder = rel.split("/")[0]
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                out += ["%s: imports %s" % (rel, a.name) for a in node.names if a.name.split(".")[0] == "ansible"]
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level == 0:
                if (node.module or "").startswith(("ansible", "ansible_collections")):
                    out.append("%s: imports %s (the engine imports itself relatively, and no Ansible)"
                               % (rel, node.module))
                continue
            target = target_of(node, folder)
            if target not in FLOORS:
                out.append("%s: imports %s, outside the floors" % (rel, target))
            elif FLOORS.index(target) > FLOORS.index(folder):
                out.append("%s: imports %s.%s, a floor above %s" % (rel, target, node.module, folder))
            elif target != folder:
                out += ["%s: imports %s from %s, private to its folder" % (rel, a.name, target)
                        for a in node.names if a.name.startswith("_")]
    return out


def same_folder_imports(rel: str, text: str) -> List[str]:
    """The modules of its own folder that ``folder/module.py`` imports (at any depth of the file: a function's own
    import closes a circle as surely as one at the top, only later)."""
    folder = rel.split("/")[0]
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            out += ["%s/%s.py" % (folder, name) for name in names]
    return out


def circles(sources: Dict[str, str]) -> List[str]:
    """Every import circle between the modules of one folder, each as ``a -> b -> a`` from its smallest name."""
    graph = {rel: [t for t in same_folder_imports(rel, text) if t in sources] for rel, text in sources.items()}
    found = set()

    def walk(path: List[str]) -> None:
        for nxt in graph.get(path[-1], []):
            if nxt == path[0]:
                start = path.index(min(path))
                found.add(" -> ".join(path[start:] + path[:start] + [min(path)]))
            elif nxt not in path and nxt > path[0]:
                walk(path + [nxt])

    for rel in sorted(graph):
        walk([rel])
    return sorted(found)


def engine_sources() -> Dict[str, str]:
    return {str(p.relative_to(ENGINE)): p.read_text() for p in ENGINE.glob("*/*.py")}


def test_every_engine_module_lives_in_a_floor():
    assert sorted(p.name for p in ENGINE.glob("*.py")) == ["__init__.py"]
    assert sorted(p.name for p in ENGINE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(FLOORS)
    # ansible-core 2.16's empty-init sanity test: module_utils packages are empty files
    assert [str(p.relative_to(ENGINE)) for p in ENGINE.rglob("__init__.py") if p.stat().st_size] == []


def floor_table() -> Dict[str, List[str]]:
    """The README's table, floor by floor in its order: the floors it says each one imports."""
    rows = [line.split("|") for line in (ENGINE / "README.md").read_text().splitlines() if line.startswith("| `")]
    return {cells[1].strip().strip("`/"): [f.strip() for f in cells[3].split(",") if f.strip() != "(nothing)"]
            for cells in rows if cells[2].strip()}


def imported_floors(folder: str) -> List[str]:
    found = set()
    for path in (ENGINE / folder).glob("*.py"):
        found |= {target_of(node, folder) for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.ImportFrom) and node.level}
    return [f for f in FLOORS if f in found and f != folder]


def test_the_readme_says_what_each_floor_holds_and_imports_in_order():
    table = floor_table()
    assert list(table) == FLOORS
    assert {f: imported_floors(f) for f in FLOORS} == table


def test_imports_only_go_downwards_and_never_to_a_private_name_across():
    assert violations(engine_sources()) == []


def test_no_two_modules_of_a_folder_import_each_other():
    assert circles(engine_sources()) == []


def test_a_circle_inside_a_folder_is_named_even_through_a_late_import():
    sources = {"ha/apiservers.py": "from .barrier import BarrierPlan\n",
               "ha/barrier.py": "def f():\n    from .apiservers import server_now\n",
               "ha/drain.py": "from .apiservers import x\nfrom . import barrier\n"}
    assert circles(sources) == ["ha/apiservers.py -> ha/barrier.py -> ha/apiservers.py"]


@pytest.mark.parametrize("rel, text, expected", [
    ("kube/transport.py", "from ..restore.pace import Gate\n", "a floor above kube"),
    ("restore/pace.py", "def f():\n    from ..run.discover import x\n", "a floor above restore"),
    ("report/words.py", "from ..kube.errors import _helper\n", "private to its folder"),
    ("kube/crd.py", "from ansible.module_utils.basic import AnsibleModule\n", "no Ansible"),
    ("kube/crd.py", "import ansible\n", "imports ansible"),
])
def test_a_bad_import_is_named(rel, text, expected):
    found = violations({rel: text})
    assert len(found) == 1 and expected in found[0] and rel in found[0]


def test_downward_and_sideways_imports_pass():
    assert violations({"run/discover.py": "from ..kube.crd import Crd\nfrom .nothing_to_do import decide\n",
                       "kube/crd.py": "from .errors import _private_but_same_folder\n"}) == []

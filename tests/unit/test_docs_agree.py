# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The docs agree with the code: every module is named where README lists them, every default a docs table gives
for a role or playbook variable is the one the code uses, and every variable the fleet playbooks read is
documented."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE_DEFAULTS = yaml.safe_load((REPO / "roles" / "crd_upgrade" / "defaults" / "main.yml").read_text())
# set by the playbooks themselves for the role, not by users
PLAYBOOK_INTERNAL = {"crd_upgrade_report_hosts", "crd_upgrade_report_on_failure", "crd_upgrade_percent"}


def table_rows(path: Path, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table after the line containing ``heading``."""
    text = path.read_text().split(heading, 1)[1]
    rows, started = [], False
    for line in text.splitlines():
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif started:
            break
    return rows[1:]  # the header row aside


def literal(cell: str):
    """A default as a docs cell writes it (`8`, `true`, `[1, "10%", "100%"]`, empty), as YAML reads it."""
    if cell.strip() == "empty":
        return []
    found = re.fullmatch(r"`([^`]*)`|(\d+)", cell.strip())
    return yaml.safe_load(found.group(1) or found.group(2)) if found else cell.strip()


def playbook_defaults() -> dict:
    """Each user-facing variable the fleet playbooks read, with the ``default(...)`` they give it."""
    out = {}
    for playbook in (REPO / "playbooks").glob("fleet_*.yml"):
        for name, default in re.findall(r"(crd_upgrade_\w+) \| default\(([^()]*(?:\([^()]*\))?[^()]*)\)",
                                        playbook.read_text()):
            out.setdefault(name, yaml.safe_load(default) if default else None)
        for name in re.findall(r"\b(crd_upgrade_\w+)\b", playbook.read_text()):
            out.setdefault(name, None)
    return {k: v for k, v in out.items() if k not in PLAYBOOK_INTERNAL and not k.endswith("_")}


def test_readme_names_every_module():
    listed = next(line for line in (REPO / "README.md").read_text().splitlines() if line.startswith("| `plugins/modules/`"))
    missing = [p.stem for p in (REPO / "plugins" / "modules").glob("crd_*.py") if f"`{p.stem}`" not in listed]
    assert not missing, f"README's module list leaves out {missing}"


def test_the_awx_survey_defaults_are_the_roles():
    for cells in table_rows(REPO / "docs" / "awx.md", "Survey (answers become extra vars"):
        match = re.fullmatch(r"`(crd_upgrade_\w+)`", cells[1])
        if match and match.group(1) in ROLE_DEFAULTS:
            assert literal(cells[3]) == ROLE_DEFAULTS[match.group(1)], (cells, ROLE_DEFAULTS[match.group(1)])


def test_every_playbook_variable_is_documented_with_the_default_the_playbook_uses():
    rows = {literal(cells[0]): cells for cells in table_rows(REPO / "docs" / "runbook.md", "Playbook variables")}
    spec = yaml.safe_load((REPO / "roles" / "crd_upgrade" / "meta" / "argument_specs.yml").read_text())
    role_options = set(spec["argument_specs"]["main"]["options"])
    for name, default in playbook_defaults().items():
        if name in role_options:
            continue  # documented with the role (ansible-doc -t role)
        assert name in rows, f"docs/runbook.md's playbook variables leave out {name}"
        if default is not None and rows[name][2] != "none":
            assert literal(rows[name][2]) == default, (name, rows[name], default)


def test_the_execution_environment_is_built_and_described_the_same_way_everywhere():
    command = "ansible-builder build -f docs/execution-environment.yml"
    for doc in ("README.md", "docs/awx.md", "docs/execution-environment.yml"):
        text = (REPO / doc).read_text()
        assert "ansible-builder build" not in text.replace(command, ""), f"{doc} builds the EE another way"
    wanted = [line.split(">=")[0].split("<")[0].strip() for line in
              (REPO / "meta" / "ee-requirements.txt").read_text().splitlines() if line and not line.startswith("#")]
    awx = (REPO / "docs" / "awx.md").read_text().split("## 1. Execution environment", 1)[1].split("## 2.", 1)[0]
    assert all(f"`{name}`" in awx for name in wanted), (wanted, "docs/awx.md names other EE requirements")


def test_the_engine_table_names_every_file_in_its_folder():
    engine = REPO / "plugins" / "module_utils" / "_crdops"
    rows = table_rows(REPO / "docs" / "how-it-works.md", "The engine, by folder, from the bottom up.")
    documented = {row[0].strip("`/"): set(re.findall(r"`(\w+)\.py`", row[1])) for row in rows}
    actual = {d.name: {p.stem for p in d.glob("*.py")} - {"__init__"}
              for d in engine.iterdir() if d.is_dir() and d.name != "__pycache__"}
    assert documented == actual


def _holder_fix(source: str) -> str:
    """The fix holders_table gives a source of the kind a docs row names (the version that stays: v2)."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.holders_table import holders_table
    what, _sep, note = source.partition(", ")
    record = {"crd": "w.x.io", "version": "v1", "stays": "v2", "held": True, "manager": "op", "objects": 1,
              "seen_in": "managedFields", "kind": "not checked (Helm release)" if note else "declares",
              "source": {"what": what, "ref": "ns/name", "says": None}}
    if what == "field manager":
        record["source"] = None
    if what == "readers (request counters)":
        record = {"crd": "w.x.io", "version": "v1", "stays": "v2", "seen_in": "metrics", "requests": 3}
    cluster = {"cluster": "c", "broken_clients": [record], "held_back": [{"crd": "w.x.io"}]}
    (row,) = holders_table([cluster])["rows"]
    return row["fix"]


def test_the_report_doc_says_the_holders_table_as_the_code_prints_it():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.report import holders_table as table
    doc = REPO / "docs" / "report.md"
    text = doc.read_text()
    assert f"\n## {table.HEADING}\n" in text and f"`{table.ACCEPTED_HEADING}`" in " ".join(text.split())
    columns = [cells[0].strip("`") for cells in table_rows(doc, "The columns, in the Markdown and the HTML:")]
    assert columns == list(table.COLUMNS)
    # every key of a row and of the table, as the code builds them, and no other
    built = table.holders_table([{"cluster": "c", "held_back": [{"crd": "w.x.io"}], "broken_clients": [
        {"crd": "w.x.io", "version": "v1", "manager": "op", "objects": 1, "held": True}]}])
    documented = set(re.findall(r"`(\w+)`", " ".join(
        cells[0] for cells in table_rows(doc, "Each row in the JSON (`holders.rows[]`"))))
    assert documented == set(built["rows"][0])
    keys_line = " ".join(text.split()).split("Each row in the JSON (`holders.rows[]`", 1)[1].split("):", 1)[0]
    assert all(f"`{key}`" in keys_line for key in set(built) - {"rows", "accepted"}), keys_line
    # the fix by kind of source: the words the docs quote are how the code's fix begins
    fixes = table_rows(doc, "The fix, by the kind of source")
    assert len(fixes) == 6
    for source, fix in fixes:
        quoted = re.match(r"`([^`]+)`", fix).group(1).replace("<stays>", "v2").replace("<manager>", "op")
        assert _holder_fix(source).startswith(quoted), (source, quoted, _holder_fix(source))


def as_tuple(version: str) -> tuple:
    return tuple(int(part) for part in str(version).split(".") if part)


def test_nothing_is_added_in_a_version_after_the_one_galaxy_yml_releases():
    # everything new before the first release is new in that release: a later version_added is one that never was
    release = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    later = []
    for path in sorted(list((REPO / "plugins").rglob("*.py")) + list((REPO / "roles").rglob("*.yml"))):
        for found in re.findall(r"version_added:\s*['\"]?([0-9][0-9.]*)", path.read_text()):
            if as_tuple(found) > as_tuple(release):
                later.append("%s: %s" % (path.relative_to(REPO), found))
    assert not later, "version_added later than galaxy.yml's %s: %s" % (release, later)


def test_the_reliability_page_says_what_writes_it_and_cites_only_rows_it_has():
    page = (REPO / "docs" / "reliability.md").read_text()
    assert "Generated by `make docs-reliability`" in page
    assert "CRDOPS_WRITE_DOCS=1" in (REPO / "Makefile").read_text().split("docs-reliability:", 1)[1].split("\n\n")[0]
    scenarios = [row[0] for row in table_rows(REPO / "docs" / "reliability.md", "# Reliability under faults")]
    cited = re.findall(r'the row "([^"]+)"', page)
    assert [c for c in cited if not any(s.startswith(c) for s in scenarios)] == []


def test_the_readme_says_what_the_shipped_priority_level_gives():
    level = yaml.safe_load((REPO / "docs" / "rbac" / "prioritylevel.yaml").read_text())["spec"]["limited"]
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "%d nominal concurrency shares" % level["nominalConcurrencyShares"] in readme
    assert ("never borrowing" in readme) == (level["borrowingLimitPercent"] == 0)
    assert "behind everyone" not in readme

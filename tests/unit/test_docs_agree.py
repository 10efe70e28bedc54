# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The docs agree with the code: every module is named where README lists them, every default a docs table gives
for a role or playbook variable is the one the code uses, and every variable the fleet playbooks read is
documented. Claims a page makes of the code (what a name accepts, what a release stops serving, what a report
says, what a cluster waits) are checked by running that code, so that each test fails when page and code part."""
from __future__ import annotations

import ast
import json
import re
import shlex
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


def section(path: Path, heading: str) -> str:
    """The text of a Markdown section: ``heading`` up to the next heading of its level."""
    level = heading.split(" ", 1)[0]
    return path.read_text().split("\n" + heading + "\n", 1)[1].split("\n" + level + " ", 1)[0]


def words(text: str) -> str:
    return " ".join(text.split())


def _source_forms() -> dict:
    """How the run names each kind of source for crd_upgrade_accept_broken_clients (client_evidence.sources_of), from
    objects whose labels and annotations name it NS/NAME: {"Flux Kustomization": "NS/NAME", ...}."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release import client_evidence as ev
    metas = [{"labels": {ev.FLUX_NAME: "NAME", ev.FLUX_NAMESPACE: "NS"}},
             {"annotations": {ev.HELM_NAME: "NAME", ev.HELM_NAMESPACE: "NS"}},
             {"annotations": {ev.ARGO_TRACKING: "NAME:example.com/Widget:NS/w-0"}}]
    return dict((s.what, s.ref) for meta in metas for s in ev.sources_of(meta))


def _accepting(names: list, accept):
    """The client check of one CRD whose objects the names of the page's example name: a ``NS/NAME`` name is a Flux
    Kustomization applying its objects, ``requests`` requests counted at the removed version, any other name a
    field manager applying objects that name no source."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release import client_evidence as ev
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release import writers
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.flux_inventory import (
        FLUX_MANAGER, Kustomization)
    check = writers.CrdWriters("widgets.example.com", "example.com", ["v1"], storage_version="v2", kind="Widget")
    source = re.compile(re.escape(_source_forms()[ev.FLUX_KUSTOMIZATION]).replace("NS", "(?P<ns>[^/]+)")
                        .replace("NAME", "(?P<name>[^/]+)"))
    for i, name in enumerate(names):
        found = source.fullmatch(name)
        if name == writers.REQUESTS:
            check.traffic.append(writers.Traffic("https://10.0.0.1:6443", True, requests={"v1": 3}))
            continue
        labels = {ev.FLUX_NAME: found.group("name"), ev.FLUX_NAMESPACE: found.group("ns")} if found else {}
        check.add({"namespace": "apps", "name": "w-%d" % i, "labels": labels, "managedFields": [
            {"manager": FLUX_MANAGER if found else name, "operation": "Apply", "apiVersion": "example.com/v1",
             "time": "2026-01-01T00:00:00Z"}]}, 0.0)
    check.resolve_flux(type("Inventories", (), {"get": lambda self, ref: Kustomization(ref, not_asked="not found")})())
    return writers.WritersResult([check], 0.0, 0.0, 30.0, "measured", accept=accept)


def test_the_clients_page_accepts_clients_by_the_names_the_code_matches():
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.flux_inventory import FLUX_MANAGER
    text = section(REPO / "docs" / "clients.md", "## Accepting a client that breaks")
    page = words(text)
    # the forms the page gives each kind of source are the references the run names them by
    kinds = re.search(r"A list names sources as the run names them \(([^)]*)\)", page).group(1).split(", ")
    for what, form in _source_forms().items():
        part = next(p for p in kinds if what.split(" (")[0] in p)
        written = re.search(r"`([^`]+)`", part).group(1) if "`" in part else "NAME" if part.endswith("by name") else part
        assert written.replace("namespace", "NS").replace("name", "NAME") == form, (what, part, form)
    # the page's example list: its sources are written as the code names them, and it accepts every client it names
    settings = [yaml.safe_load(line) for line in text.split("```yaml", 1)[1].split("```", 1)[0].splitlines() if line]
    example = next(s["crd_upgrade_accept_broken_clients"] for s in settings
                   if isinstance(s["crd_upgrade_accept_broken_clients"], list))
    flux = re.escape(_source_forms()["Flux Kustomization"]).replace("NS", "[^/]+").replace("NAME", "[^/]+")
    assert any(re.fullmatch(flux, name) for name in example), (example, "no name of the form the code gives a source")
    run = _accepting(example, example)
    assert run.held_back == [] and run.unmatched_accepts() == [], (example, run.to_dict("c"))
    assert all(client["held"] is False for client in run.broken_clients("c"))
    assert "`crd_upgrade_result.broken_clients` with `held: false`" in page
    # a field manager's name accepts none of the objects that name a source, and is said to accept nothing
    manager = re.search(r"so accepting `([^`]+)` does not accept the objects of any Kustomization", page).group(1)
    assert manager == FLUX_MANAGER
    sources = [name for name in example if re.fullmatch(flux, name)]
    run = _accepting(sources, [manager])
    assert run.held_back and run.unmatched_accepts() == [manager], run.to_dict("c")
    assert "(`writers.unmatched_accepts`)" in page and "unmatched_accepts" in run.to_dict("c")


def _cert_manager_crds(release: str) -> list:
    """The CRDs of a cert-manager release, as the walkthrough's test applies them (tests/data/fixtures/cert-manager)."""
    folder = REPO / "tests" / "data" / "fixtures" / "cert-manager"
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob(release + "-*/*.yaml"))]


def _role_template(path: str, pick, **variables) -> str:
    """A Jinja expression of the role's task file ``path`` (``pick`` finds it in the parsed file), rendered."""
    import jinja2
    tasks = yaml.safe_load((REPO / "roles" / "crd_upgrade" / "tasks" / path).read_text())
    return jinja2.Environment().from_string(pick(tasks)).render(**variables).strip()


def test_the_cert_manager_walkthrough_says_what_v1_6_1_stops_serving_and_what_the_run_keeps_served():
    from ansible_collections.crdops.migration.plugins.filter.serving import (
        crd_upgrade_kept_served, crd_upgrade_unserving)
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release import writers
    text = words((REPO / "docs" / "cert-manager.md").read_text())
    before_n = text.split("**Before v1.6.1 (release N).**", 1)[1].split("**Before v1.7.1", 1)[0]
    named = re.findall(r"`(\w+)`", re.search(r"v1\.6\.1 lists (.*?) with `served: false`", before_n).group(1))
    # what v1.6.1 stops serving on a cluster at v1.5.4 (every CRD of the test), as the role computes it
    live = [{"name": d["metadata"]["name"], "versions": d["spec"]["versions"]} for d in _cert_manager_crds("v1.5.4")]
    unserving = crd_upgrade_unserving(_cert_manager_crds("v1.6.1"), live)
    assert len(unserving) == 3 and all(versions == named for versions in unserving.values()), (unserving, named)
    row = next(cells for cells in table_rows(REPO / "docs" / "cert-manager.md", "## The releases") if cells[0] == "v1.6.1")
    assert re.findall(r"`(v\w+)`", row[1].split("but", 1)[1]) == named and "`served: false`" in row[1], row
    # a client left: the whole set stays served (kept_served), the console says so, the cluster ends held back
    crd = sorted(unserving)[0]
    check = writers.CrdWriters(crd, "cert-manager.io", unserving[crd], storage_version="v1", kind="Certificate")
    check.add({"namespace": "ns", "name": "c-0", "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                                                    "apiVersion": "cert-manager.io/v1alpha2"}]}, 0.0)
    kept = crd_upgrade_kept_served([check.to_dict(False)])
    assert kept == {crd: named} and "`crd_upgrade_result.kept_served` maps the CRD to those three versions" in before_n
    said = _role_template("unserving.yml", lambda ts: next(t for t in ts if "ansible.builtin.debug" in t)[
        "ansible.builtin.debug"]["msg"], _crd_upgrade_check=False, item=dict(check.to_dict(False), name=crd))
    quoted = next(q for q in re.findall(r"`([^`]*)`", before_n) if "applied with" in q)
    assert all(part.strip().replace("<crd>", crd) in said for part in quoted.split("...")), (quoted, said)
    status = _role_template("result.yml", lambda ts: ts[0]["ansible.builtin.set_fact"]["crd_upgrade_result"]["status"],
                            _error="", _crd_upgrade_check=False, ansible_check_mode=False, _crd_upgrade_kept_served=kept)
    assert status == "held back" and "the cluster ends `held back`" in before_n
    # the test accepts every client: nothing is kept served, v1.6.1 goes on as shipped
    assert '"crd_upgrade_accept_broken_clients": True' in (REPO / "tests" / "integration" / "test_cert_manager.py").read_text()
    assert crd_upgrade_kept_served([check.to_dict(True)]) == {} and "and `kept_served` is empty" in text


def test_the_managed_cluster_page_shows_the_example_inventorys_host_with_what_its_table_asks():
    doc = REPO / "docs" / "managed-clusters.md"
    part = section(doc, "## Variables you set")
    host = re.search(r"host `([\w-]+)` of `playbooks/inventory\.example\.yml`", words(part)).group(1)
    hosts = yaml.safe_load((REPO / "playbooks" / "inventory.example.yml").read_text())["all"]["children"]["clusters"]
    assert host in hosts["hosts"], (host, list(hosts["hosts"]))
    example = dict((k, v) for k, v in hosts["hosts"][host].items() if k.startswith("crd_upgrade_"))
    ((shown_host, shown),) = yaml.safe_load(part.split("```yaml", 1)[1].split("```", 1)[0]).items()
    assert shown_host == host and dict((k, v) for k, v in shown.items() if k.startswith("crd_upgrade_")) == example
    # each default the table gives is the role's; what it says a managed cluster sets, the example host sets
    for name, default, managed in ((literal(c[0]), c[1], c[2]) for c in table_rows(doc, "## Variables you set")):
        assert literal(default) == ROLE_DEFAULTS[name], (name, default, ROLE_DEFAULTS[name])
        value = re.match(r"`([^`]+)`", managed)
        if value:
            assert example.get(name) == yaml.safe_load(value.group(1)), (name, managed, example.get(name))
        elif managed.startswith(("leave", "keep")):
            assert name not in example, (name, managed)
        elif managed.startswith("raise"):
            assert example.get(name, ROLE_DEFAULTS[name]) >= ROLE_DEFAULTS[name], (name, example.get(name))
    # the integration test that runs it: that host, with only the settle the page says changed
    test = (REPO / "tests" / "integration" / "test_ha_loadbalancer.py").read_text().split("def managed_example", 1)[1]
    assert re.search(r'\["hosts"\]\["([\w-]+)"\]', test).group(1) == host
    settle = re.search(r"crd_upgrade_barrier_fallback_settle=(\d+)", test).group(1)
    assert "with a settle of %s s instead of %s" % (settle, example["crd_upgrade_barrier_fallback_settle"]) in words(part)


class _Forbidden:
    """A cluster where the run may list no Secret and no ConfigMap, in any namespace."""

    cluster_label = "c"

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        return type("Answer", (), {"status": 403, "ok": False})()


def _render_report(template: str, report: dict) -> str:
    """A report template as the role's `template` task renders it (jinja2, with the Ansible filter it uses)."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / "crd_upgrade" / "templates")),
                             trim_blocks=True)
    env.filters["dict2items"] = lambda d: [{"key": k, "value": v} for k, v in d.items()]
    return env.get_template(template).render(_crd_upgrade_report=report)


def test_the_rbac_page_quotes_what_the_run_and_the_report_say_of_a_helm_release_not_checked():
    from ansible_collections.crdops.migration.plugins.filter.crd_upgrade import crd_upgrade_held_back_entry
    from ansible_collections.crdops.migration.plugins.filter.fleet import crd_upgrade_fleet_report
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.release import helm_releases, writers
    page = words((REPO / "docs" / "rbac.md").read_text())
    assert 'the release is "not checked" and **holds release N+1 back**' in page
    quoted = re.search(r"the run, the held-back entries and the report name the permission \(`([^`]+)`\)", page).group(1)
    # the objects name Helm release shop/widgets; neither Secrets nor ConfigMaps may be listed, there or anywhere
    targets = {"widgets.example.com": ("example.com", "Widget", ["v1"])}
    scan = helm_releases.scan_helm_releases(_Forbidden(), targets)
    helm_releases.look_up_releases(_Forbidden(), scan, ["shop/widgets"], targets)
    check = writers.CrdWriters("widgets.example.com", "example.com", ["v1"], storage_version="v2", kind="Widget")
    names_release = {"meta.helm.sh/release-name": "widgets", "meta.helm.sh/release-namespace": "shop"}
    check.add({"namespace": "shop", "name": "w-0", "annotations": names_release}, 0.0)
    check.add_unchecked_helm("shop/widgets", scan.not_checked["shop/widgets"])
    run = writers.WritersResult([check], 0.0, 0.0, 30.0, "measured", helm=scan)
    held = [crd_upgrade_held_back_entry(c) for c in run.to_dict("c")["crds"] if c["held_back"]]
    cluster = {"cluster": "c", "status": "held back", "duration_s": 60.0, "readers_checked": True,
               "crds": [{"name": "widgets.example.com", "removed_versions": ["v1"], "trimmed": True}],
               "held_back": held, "broken_clients": run.broken_clients("c"), "helm_releases": run.helm_sentence(),
               "totals": {"objects": 1, "rewritten": 1, "unchanged": 0, "failed": 0}}
    report = crd_upgrade_fleet_report([cluster], "t", "2026-01-01T00:00:00+00:00")
    said = {"the run": run.helm_sentence(), "the held-back entry": " ".join(held[0]["clients"]),
            "the Markdown report": _render_report("report.md.j2", report),
            "the HTML report": _render_report("report.html.j2", report)}
    for where, text in said.items():
        assert "not checked" in text and quoted.replace("X", "shop") in text, (where, quoted, text[-3000:])


def test_the_report_pages_json_example_is_what_the_report_code_writes():
    from tools import report_example
    page = (REPO / "docs" / "report.md").read_text()
    target = (REPO / "Makefile").read_text().split("\ndocs-report:", 1)[1].split("\n\n", 1)[0]
    assert "`make docs-report`" in page and "tools/report_example.py --write" in target
    assert report_example.page_block(page) == report_example.block(), \
        "docs/report.md's JSON example is not what the report code writes: run make docs-report"
    # what the page says of the example holds of it
    shown = json.loads(report_example.page_block(page).split("```json", 1)[1].split("```", 1)[0])
    assert [c["cluster"] for c in shown["clusters"]] == [report_example.SHOWN]
    assert "where only %s is kept" % report_example.SHOWN in words(page)
    assert "longer than %d characters is cut" % report_example.LONGEST in words(page)


def tables(text: str) -> list:
    """Every Markdown table in ``text``: a list of rows of cells, the header row first."""
    out, rows = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            out.append(rows)
            rows = []
    return out


def number(cell: str) -> float:
    return float(re.search(r"`([0-9.]+)`", cell).group(1))


def _waits(column: str, d: dict, fallback_settle: float) -> dict:
    """A cluster's waits by the code: the barrier before each pass (barrier.py: polls 0.5 s apart, then the settle;
    apiservers.py: how many polls the settle fallback needs), the drain once (its window counts from no later than the
    first barrier's start), the writers window once where the counters can be read."""
    from ansible_collections.crdops.migration.plugins.module_utils._crdops.ha import apiservers, barrier
    if column.startswith("settle fallback"):
        alive = int(re.search(r"(\d+) apiservers", column).group(1))
        polls = max(apiservers.FALLBACK_MIN_POLLS, apiservers.FALLBACK_POLLS_PER_APISERVER * alive)
        each, window = (polls - 1) * barrier.POLL_EVERY_S + max(d["crd_upgrade_settle_seconds"], fallback_settle), 0
    else:  # every apiserver answers the first round
        polls, each, window = 1, d["crd_upgrade_settle_seconds"], d["crd_upgrade_writers_window"]
    first = max(d["crd_upgrade_drain_window"], each)
    return {"polls": polls, "barrier": each, "first": first, "writers": window, "one": first + window,
            "ten": first + 9 * each + window}


def test_the_managed_cluster_page_adds_up_a_whole_clusters_waits_from_the_role_defaults():
    part = section(REPO / "docs" / "managed-clusters.md", "### A whole cluster")
    used, waits = tables(part)[:2]
    d = dict((literal(name), literal(value)) for name, value in used[1:])
    assert d == dict((k, ROLE_DEFAULTS[k]) for k in d) and len(d) == 5, (d, "the role's defaults differ")
    rows = dict((cells[0].strip("*"), cells[1:]) for cells in waits[1:])
    for index, column in enumerate(waits[0][1:]):
        want = _waits(column, d, d["crd_upgrade_barrier_fallback_settle"])
        said = {"barrier": number(rows["barrier, before each CRD's pass"][index]),
                "first": number(rows["first CRD: barrier and drain"][index]),
                "writers": number(rows["writers window"][index]), "one": number(rows["one CRD"][index]),
                "ten": number(rows["ten CRDs"][index])}
        assert said == dict((k, want[k]) for k in said), (column, said, want)
        assert ("%d polls" % want["polls"] in rows["barrier, before each CRD's pass"][index]) == (want["polls"] > 1)
    text = words(part)
    assert "`max(w, b) + (n - 1) × b + m` for `n` CRDs" in text
    assert "(1 to %d;" % d["crd_upgrade_confirm_passes"] in text
    # the example host's longer settle (the host "Variables you set" names)
    name = re.search(r"host `([\w-]+)` of `playbooks/inventory\.example\.yml`",
                     words(section(REPO / "docs" / "managed-clusters.md", "## Variables you set"))).group(1)
    host = yaml.safe_load((REPO / "playbooks" / "inventory.example.yml").read_text())["all"]["children"]["clusters"][
        "hosts"][name]["crd_upgrade_barrier_fallback_settle"]
    longer = [_waits(c, d, host) for c in waits[0][1:3]]
    said = re.search(r"example host's `crd_upgrade_barrier_fallback_settle: (\d+)`.*?ten CRDs wait `[0-9.]+` s or "
                     r"`[0-9.]+` s", text)
    assert int(said.group(1)) == host, (said.group(1), "the example host's settle is", host)
    said = said.group(0)
    assert [float(n) for n in re.findall(r"`([0-9.]+)` s", said)] == [w["barrier"] for w in longer] + [
        w["ten"] for w in longer], said


def script_options(path: Path) -> set[str]:
    """The ``--options`` a script's argparse accepts, read from its ``add_argument`` calls (the script is not run:
    starting it would start a control plane)."""
    calls = (node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument")
    return {arg.value for call in calls for arg in call.args
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("--")}


def test_the_managed_cluster_page_names_the_command_that_measures_a_whole_clusters_waits():
    """The measured figures of "A whole cluster" name the benchmark that reproduces them: a script that exists, with
    the options and the case the page shows (the measurement is a benchmark, not a test run on demand)."""
    text = words(section(REPO / "docs" / "managed-clusters.md", "### A whole cluster"))
    measured = text.split("Measured behind HAProxy", 1)[1]
    commands = [c.split(";", 1)[1] for c in re.findall(r"`(\. tools/env\.sh;[^`]+)`", measured)]
    assert commands, "the measured figures name no command that reproduces them"
    argv = shlex.split(commands[0])
    assert argv[0] == "python" and argv[1].startswith("benchmarks/"), argv
    script = REPO / argv[1]
    assert script.is_file(), f"{argv[1]} does not exist"
    shown = [a for a in argv[2:] if a.startswith("--")] + re.findall(r"`(--[\w-]+)", measured)
    assert set(shown) <= script_options(script), (shown, script_options(script))
    # a case the page names is one the script has (its cases are written out as Case("<name>", ...))
    for case in re.findall(r"`--only ([\w,-]+)`", measured):
        assert all('Case("%s",' % name in script.read_text() for name in case.split(",")), case

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from pathlib import Path

import yaml

from ansible_collections.crdops.migration.plugins.filter.inputs import crd_upgrade_inputs, plain
from tests.unit.crdops_fakes import make_crd

REPO = Path(__file__).resolve().parents[4]
SPEC = yaml.safe_load((REPO / "roles" / "crd_upgrade" / "meta" / "argument_specs.yml").read_text())
OWN = yaml.safe_load((REPO / "roles" / "crd_upgrade" / "vars" / "main.yml").read_text())["_crd_upgrade_own_variables"]
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gw"}}


def test_a_misspelled_variable_names_the_nearest_real_one():
    got = crd_upgrade_inputs(["crd_upgrade_pase", "crd_upgrade_upgrad", "crd_upgrade_workers"], spec=SPEC, own=OWN)
    assert got["errors"] == [
        "unknown variables crd_upgrade_pase (did you mean crd_upgrade_pace?), crd_upgrade_upgrad (did you mean "
        "crd_upgrade_upgrade?): correct or remove them; every variable: ansible-doc -t role crdops.migration.crd_upgrade"]
    assert crd_upgrade_inputs(["crd_upgrade_zzzzzzzzzzzzzzzzzz"], spec=SPEC, own=OWN)["errors"] == [
        "unknown variable crd_upgrade_zzzzzzzzzzzzzzzzzz (no variable of the role is close to it): correct or remove "
        "it; every variable: ansible-doc -t role crdops.migration.crd_upgrade"]


def test_options_of_every_entry_point_the_playbooks_variables_and_the_results_are_known():
    options = [name for entry in SPEC["argument_specs"].values() for name in entry["options"]]
    playbook = ["crd_upgrade_hosts", "crd_upgrade_waves", "crd_upgrade_max_fail_percentage"]
    results = ["crd_upgrade_result", "crd_upgrade_repair_result", "crd_upgrade_summary", "crd_upgrade_failed_clusters",
               "crd_upgrade_not_run_clusters", "crd_upgrade_report__1", "crd_upgrade_report__a-slice"]
    assert crd_upgrade_inputs(options + playbook + results, spec=SPEC, own=OWN)["errors"] == []
    # without the role's own list, the playbooks' variables are unknown: the list is what allows them
    assert "crd_upgrade_waves" in crd_upgrade_inputs(playbook, spec=SPEC)["errors"][0]


def test_manifests_names_and_storage_versions(tmp_path, monkeypatch):
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "bundle.yaml").write_text(
        "---\n" + yaml.safe_dump(NAMESPACE) + "---\n"
        + yaml.safe_dump(make_crd(name="b.example.com", versions=(("v1", True, False), ("v2", True, True)))))
    (tmp_path / "next.yaml").write_text(yaml.safe_dump(make_crd(name="a.example.com", versions=(("v1", True, True),))))
    monkeypatch.chdir(tmp_path)
    got = crd_upgrade_inputs([], release="n/*.yaml", target=["next.yaml"], crd_names="", spec=SPEC, own=OWN)
    bundle = str(tmp_path / "n" / "bundle.yaml")
    assert got["errors"] == [] and got["release_files"] == [bundle] and got["target_files"] == [str(tmp_path / "next.yaml")]
    assert got["release_storage"] == {"b.example.com": "v2"}
    assert got["names"] == ["a.example.com", "b.example.com"]  # every CRD of both releases, sorted
    assert got["skipped"] == ["crd_upgrade_release_manifests: 1 document skipped (not CRDs): %s document 0 (Namespace)"
                              % bundle]
    assert crd_upgrade_inputs([], release="n/*.yaml", crd_names="x.io, y.io\nz.io")["names"] == ["x.io", "y.io", "z.io"]
    assert crd_upgrade_inputs([], crd_names=["z.io"])["names"] == ["z.io"]


def test_bad_manifests_are_returned_not_raised(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = crd_upgrade_inputs(["crd_upgrade_pase"], release=["releases/n/*.yaml"], target=["next.yaml"], spec=SPEC,
                             own=OWN)
    assert [e.split(":", maxsplit=1)[0] for e in got["errors"]] == [
        "unknown variable crd_upgrade_pase (did you mean crd_upgrade_pace?)", "crd_upgrade_release_manifests",
        "crd_upgrade_target_manifests"]
    assert "releases/n/*.yaml matches no file in %s/releases/n" % tmp_path in got["errors"][1]
    assert got["release_files"] == [] and got["names"] == []


def test_values_are_checked_against_the_entry_points_spec_in_one_short_message():
    got = crd_upgrade_inputs(["crd_upgrade_pace"], spec=SPEC, own=OWN,
                             values={"crd_upgrade_pace": "fast", "crd_upgrade_workers": "4", "other": "x"})
    assert got["errors"] == ["value of crd_upgrade_pace must be one of: gentle, max, got: fast - see ansible-doc -t "
                             "role crdops.migration.crd_upgrade"]
    assert len(got["errors"][0]) < 200   # not the argument spec
    assert crd_upgrade_inputs([], spec=SPEC, values={"crd_upgrade_pace": "max", "crd_upgrade_workers": "4"})[
        "errors"] == []   # survey text "4" is an int
    # the entry point's own options: repair's crd_upgrade_repair_versions is a list
    assert crd_upgrade_inputs([], spec=SPEC, entry_point="repair", values={"crd_upgrade_repair_versions": {"a": 1}})[
        "errors"][0].startswith("argument 'crd_upgrade_repair_versions' is of type ")   # dict (2.16: <class 'dict'>)


def test_report_keep_is_a_known_whole_number_said_once():
    for entry_point in ("main", "report", "report_merge"):
        assert crd_upgrade_inputs(["crd_upgrade_report_keep"], spec=SPEC, own=OWN, entry_point=entry_point,
                                  values={"crd_upgrade_report_keep": "5"})["errors"] == []   # -e text is an int
    assert crd_upgrade_inputs([], spec=SPEC, values={"crd_upgrade_report_keep": 0})["errors"] == []
    for bad in (-3, "-3", "abc", 2.5, True):
        errors = crd_upgrade_inputs(["crd_upgrade_report_keep"], spec=SPEC, own=OWN,
                                    values={"crd_upgrade_report_keep": bad})["errors"]
        assert errors == ["crd_upgrade_report_keep: %r is not a number of run folders to keep: set a whole number, "
                          "0 or more (0 keeps every run folder; default 30)" % (bad,)], errors


def test_no_crd_selected_is_an_error_of_the_upgrade_only_when_nothing_else_is_wrong(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nothing = ("no CRDs selected: set crd_upgrade_crd_names or crd_upgrade_release_manifests / "
               "crd_upgrade_target_manifests")
    assert crd_upgrade_inputs([], spec=SPEC, own=OWN, require_crds=True)["errors"] == [nothing]
    assert crd_upgrade_inputs([], spec=SPEC, own=OWN)["errors"] == []   # the report entry points select no CRD
    assert crd_upgrade_inputs([], crd_names="a.example.com", spec=SPEC, own=OWN, require_crds=True)["errors"] == []
    # a manifest that cannot be read is the error, not the empty selection it leaves
    got = crd_upgrade_inputs([], release=["missing/*.yaml"], spec=SPEC, own=OWN, require_crds=True)["errors"]
    assert len(got) == 1 and "matches no file" in got[0], got


def test_the_spec_is_read_from_its_file_and_values_are_checked_as_plain_data():
    path = str(REPO / "roles" / "crd_upgrade" / "meta" / "argument_specs.yml")
    given = {"crd_upgrade_barrier_fallback": "wait", "crd_upgrade_auth": {"context": "a"},
             "crd_upgrade_crd_names": ("a.example.com",)}
    got = crd_upgrade_inputs(list(given), spec=path, own=OWN, values=given, crd_names=["a.example.com"])
    assert got["errors"] == ["value of crd_upgrade_barrier_fallback must be one of: fail, settle, got: wait - see "
                             "ansible-doc -t role crdops.migration.crd_upgrade"]
    assert got["errors"] == crd_upgrade_inputs(list(given), spec=SPEC, own=OWN, values=given,
                                               crd_names=["a.example.com"])["errors"]


def test_plain_data_has_dicts_and_lists_only():
    class Lazy(dict):
        def __deepcopy__(self, memo):
            raise AssertionError("copied a lazy container")

    value = plain({"a": Lazy(b=(1, Lazy(c=[2]))), "d": "x"})
    assert value == {"a": {"b": [1, {"c": [2]}]}, "d": "x"}
    assert not isinstance(value["a"], Lazy) and not isinstance(value["a"]["b"][1], Lazy)

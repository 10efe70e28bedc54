# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest
import yaml

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd import Crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError, SelectionError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.run.discover import describe_crd
from ansible_collections.crdops.migration.plugins.module_utils._crdops.release.removal_plan import load_targets, plan_for
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import Selection, select_crds
from tests.unit.crdops_fakes import FakeCluster, make_crd

NAME = "crontabs.stable.example.com"


def target(versions, name=NAME):
    return make_crd(name=name, versions=versions)


def test_blocked_removals_from_dict_and_yaml(tmp_path):
    current = Crd.from_api(make_crd(stored=("v1", "v2")))
    f = tmp_path / "crds.yaml"
    f.write_text("---\n" + yaml.safe_dump(target((("v2", True, False), ("v3", True, True)))) + "---\n"
                 + yaml.safe_dump(target((("v1", True, True),), name="other.stable.example.com")) + "---\n")
    targets = load_targets([str(f)])
    p = plan_for(current, targets)
    assert p["blocked_removals"] == ["v1"] and p["target_storage_version"] == "v3" and p["removed_versions"] == ["v1"]
    ok = load_targets([target((("v1", True, False), ("v2", True, True)))])
    assert plan_for(current, ok)["blocked_removals"] == []
    assert plan_for(current, {})["target_found"] is False


def test_documents_that_are_not_crds_are_skipped(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(target((("v1", True, True),))) + "---\napiVersion: v1\nkind: ConfigMap\n")
    assert list(load_targets([str(f)])) == [NAME]


def test_a_crd_given_twice_names_both_places(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text(yaml.safe_dump(target((("v1", True, True),))))
    with pytest.raises(BadInputError) as ei:
        load_targets([str(f), target((("v1", True, True),))])
    assert str(ei.value) == "target_manifests[1] document 0: CRD %s already given in %s document 0" % (NAME, f)


def test_malformed_yaml_and_missing_file(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("a: [1, 2\n")
    with pytest.raises(BadInputError) as ei:
        load_targets([str(f)])
    assert str(f) in str(ei.value) and "not valid YAML" in str(ei.value)
    with pytest.raises(BadInputError):
        load_targets([str(tmp_path / "nope.yaml")])
    with pytest.raises(BadInputError):
        load_targets([42])


def cluster():
    c = FakeCluster()
    c.add_crd(labels={"app": "x"})
    c.add_crd(name="widgets.other.io", labels={"app": "y"})
    return c


def test_select_by_names_group_label_all():
    c = cluster()
    assert [x.name for x in select_crds(c, Selection(names=(NAME,)))] == [NAME]
    assert [x.name for x in select_crds(c, Selection(group="other.io"))] == ["widgets.other.io"]
    assert [x.name for x in select_crds(c, Selection(label_selector="app=x"))] == [NAME]
    assert [x.name for x in select_crds(c, Selection(all=True))] == [NAME, "widgets.other.io"]


def test_unknown_name_names_it_and_cluster():
    with pytest.raises(SelectionError) as ei:
        select_crds(cluster(), Selection(names=(NAME, "nope.example.com")))
    assert "nope.example.com" in str(ei.value) and "test-cluster" in str(ei.value)


def test_empty_selection_error_unless_allowed():
    with pytest.raises(SelectionError) as ei:
        select_crds(cluster(), Selection(group="none.io"))
    assert "group=none.io" in str(ei.value)
    assert select_crds(cluster(), Selection(group="none.io", allow_empty=True)) == []


@pytest.mark.parametrize("sel", [Selection(), Selection(names=("a.b",), all=True),
                                 Selection(names=("a.b",), group="b"), Selection(group="g", all=True)])
def test_selection_must_be_exactly_one_way(sel):
    with pytest.raises(BadInputError):
        sel.validate()


def test_describe_crd():
    c = FakeCluster()
    c.add_crd()
    c.add_objects(NAME, 7)
    crd = select_crds(c, Selection(names=(NAME,)))[0]
    d = describe_crd(c, crd, targets=load_targets([target((("v2", True, True),))]))
    assert d["object_count"] == 7 and d["needs_migration"] and d["blocked_removals"] == ["v1"]
    assert d["migration_record"]["valid"] is False and c.writes() == []

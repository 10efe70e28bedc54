# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import BadInputError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.manifests import (
    expand_paths, read_manifests, skipped_summary, stripped_summary)
from tests.unit.crdops_fakes import make_crd

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gw"}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ctl", "namespace": "gw"}}


def crd(name="widgets.example.com", **extra):
    doc = make_crd(name=name)
    doc.update(extra)
    return doc


def test_crdops_annotations_exported_with_a_crd_are_dropped_and_named(tmp_path):
    exported = crd()
    exported["metadata"]["annotations"] = {"migration.crdops.io/storage-migration": "{}",
                                           "migration.crdops.io/storage-migration-checkpoint": "{}",
                                           "example.com/kept": "yes"}
    bare = crd("gadgets.example.com")
    bare["metadata"]["annotations"] = {"migration.crdops.io/storage-repair": "{}"}
    f = write(tmp_path / "exported.yaml", exported, bare, crd("plain.example.com"))
    got = read_manifests([f])
    assert [m.doc["metadata"].get("annotations") for m in got.crds] == [{"example.com/kept": "yes"}, None, {}]
    assert [(s.name, s.annotations) for s in got.stripped] == [
        ("widgets.example.com", ("migration.crdops.io/storage-migration",
                                 "migration.crdops.io/storage-migration-checkpoint")),
        ("gadgets.example.com", ("migration.crdops.io/storage-repair",))]
    assert exported["metadata"]["annotations"]["migration.crdops.io/storage-migration"] == "{}"  # input not changed
    assert stripped_summary(got.stripped).startswith("crdops annotations dropped from 2 CRD documents")


def write(path, *docs):
    path.write_text("".join("---\n" + yaml.safe_dump(d) for d in docs))
    return str(path)


def test_a_bundle_keeps_the_crds_and_counts_what_it_skips(tmp_path):
    f = write(tmp_path / "bundle.yaml", NAMESPACE, crd(status={"storedVersions": ["v1"]}),
              crd("gadgets.example.com"), DEPLOYMENT, None)
    got = read_manifests([f])
    assert got.files == [f]
    assert [m.name for m in got.crds] == ["widgets.example.com", "gadgets.example.com"]
    assert all("status" not in m.doc for m in got.crds)  # a manifest's status is never applied
    assert [(s.source, s.index, s.kind) for s in got.skipped] == [(f, "0", "Namespace"), (f, "3", "Deployment")]
    assert skipped_summary(got.skipped) == (
        "2 documents skipped (not CRDs): %s document 0 (Namespace), %s document 3 (Deployment)" % (f, f))
    assert got.as_dict()["skipped"][1] == {"file": f, "index": "3", "kind": "Deployment"}


def test_list_items_scalars_and_inline_dicts(tmp_path):
    f = tmp_path / "list.yaml"
    f.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [NAMESPACE, crd()]})
                 + "---\njust text\n")
    got = read_manifests([str(f), crd("inline.example.com"), DEPLOYMENT], label="target_manifests")
    assert [m.label for m in got.crds] == ["%s document 0.items[1]" % f, "target_manifests[1] document 0"]
    assert [str(s) for s in got.skipped] == [
        "%s document 0.items[0] (Namespace)" % f,
        "%s document 1 (not a mapping: str)" % f,
        "target_manifests[2] document 0 (Deployment)",
    ]
    assert skipped_summary(got.skipped[:1]).startswith("1 document skipped (not CRDs): ")
    assert skipped_summary([]) == ""


def test_globs_are_sorted_and_relative_paths_use_the_base_dir(tmp_path):
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "sub").mkdir()  # a directory matched by the glob is not a file
    b = write(tmp_path / "crds" / "b.yaml", crd("b.example.com"))
    a = write(tmp_path / "crds" / "a.yaml", crd("a.example.com"))
    one = write(tmp_path / "one.yaml", crd("one.example.com"))
    assert expand_paths(["one.yaml", "crds/*"], str(tmp_path)) == [one, a, b]
    got = read_manifests(["one.yaml", "crds/*.yaml"], base_dir=str(tmp_path))
    assert [m.name for m in got.crds] == ["one.example.com", "a.example.com", "b.example.com"]
    assert read_manifests([one], base_dir="/elsewhere").files == [one]  # absolute paths stay
    assert expand_paths(["~/x.yaml"]) == [os.path.expanduser("~/x.yaml")]


def test_relative_paths_resolve_against_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "releases" / "n").mkdir(parents=True)
    crd_file = write(tmp_path / "releases" / "n" / "crd.yaml", crd())
    monkeypatch.chdir(tmp_path)
    got = read_manifests(["releases/n/*.yaml"], label="crd_upgrade_release_manifests")
    assert got.files == [crd_file] and [m.source for m in got.crds] == [crd_file]  # absolute: the file read


def test_a_glob_or_path_that_names_no_file_says_where_it_looked(tmp_path, monkeypatch):
    (tmp_path / "releases" / "n").mkdir(parents=True)
    write(tmp_path / "releases" / "n" / "crd.yaml", crd())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadInputError) as ei:  # one matching glob does not hide one that matches nothing
        read_manifests(["releases/n/*.yaml", "releases/next/crds/*.yaml"], label="crd_upgrade_target_manifests")
    assert str(ei.value) == (
        "crd_upgrade_target_manifests: releases/next/crds/*.yaml matches no file in %s/releases/next/crds, which "
        "does not exist; a relative path resolves against the working directory of the run, %s" % (tmp_path, tmp_path))
    with pytest.raises(BadInputError) as ei:
        read_manifests(["releases/n/*.yml"], label="l")
    assert str(ei.value) == ("l: releases/n/*.yml matches no file in %s/releases/n; a relative path resolves against "
                             "the working directory of the run, %s" % (tmp_path, tmp_path))
    with pytest.raises(BadInputError) as ei:
        read_manifests(["crd.yaml"], label="l", base_dir=str(tmp_path / "releases"))
    assert str(ei.value) == ("l: crd.yaml: no such file (looked for %s/releases/crd.yaml; a relative path resolves "
                             "against %s/releases)" % (tmp_path, tmp_path))
    with pytest.raises(BadInputError) as ei:
        read_manifests([str(tmp_path / "*" / "none.yaml")], label="l")
    assert str(ei.value) == "l: %s/*/none.yaml matches no file in %s" % (tmp_path, tmp_path)


def test_an_apiextensions_v1beta1_crd_is_an_error_naming_file_and_document(tmp_path):
    old = crd(apiVersion="apiextensions.k8s.io/v1beta1")
    f = write(tmp_path / "old.yaml", NAMESPACE, old)
    with pytest.raises(BadInputError) as ei:
        read_manifests([f])
    assert "%s document 1: CustomResourceDefinition at apiVersion 'apiextensions.k8s.io/v1beta1'" % f in str(ei.value)
    with pytest.raises(BadInputError, match="without metadata.name"):
        read_manifests([{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}])


def test_unreadable_invalid_or_crd_free_manifests_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(BadInputError, match="CRD manifest %s is not valid YAML" % bad):
        read_manifests([str(bad)])
    with pytest.raises(BadInputError, match="manifests: %s: no such file" % (tmp_path / "nope.yaml")):
        read_manifests([str(tmp_path / "nope.yaml")])
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(BadInputError, match="cannot read CRD manifest %s: " % (tmp_path / "dir.yaml")):
        read_manifests([str(tmp_path / "dir.yaml")])
    with pytest.raises(BadInputError, match=r"target_manifests\[0\]: expected a file path"):
        read_manifests([42], label="target_manifests")
    only_ns = write(tmp_path / "ns.yaml", NAMESPACE)
    with pytest.raises(BadInputError) as ei:
        read_manifests([only_ns, str(tmp_path / "n*.yaml")], label="target_manifests")
    skipped = "%s document 0 (Namespace)" % only_ns
    assert str(ei.value) == ("target_manifests: no CustomResourceDefinition in %s, %s/n*.yaml; skipped: %s, %s"
                             % (only_ns, tmp_path, skipped, skipped))
    assert read_manifests([]).as_dict() == {"files": [], "crds": [], "skipped": [], "stripped": []}  # nothing given: nothing to do

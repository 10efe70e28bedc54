# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""An atomic list owned as one value (an ACME Issuer applied server-side owns ``f:solvers: {}``) keeps its owner
when the conversion renames fields inside it, and is dropped when the conversion moves part of it elsewhere.

The schemas are cert-manager v1.5.4's own Issuer CRD (tests/data/fixtures/cert-manager), v1alpha2 and v1, where
``spec.acme.solvers`` is a list with no list-type (atomic). The conversions are written here; cert-manager's real
webhook runs in tests/integration/test_cert_manager.py.
"""
from __future__ import annotations

import copy

import yaml

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.crd_schema import version_schema
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.mapping_learn import learn_exact
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.whole_rules import scalars
from tests.certmanager import crd_file

G = "cert-manager.io"
ISSUER_CRD = yaml.safe_load(crd_file("v1.5.4", "issuers").read_text())
OLD, NEW = version_schema(ISSUER_CRD, "v1alpha2"), version_schema(ISSUER_CRD, "v1")
ACME_APPLY = {"f:spec": {"f:acme": {"f:server": {}, "f:privateKeySecretRef": {"f:name": {}}, "f:solvers": {}}}}
RENAMED_PROVIDERS = {"acmedns": "acmeDNS", "azuredns": "azureDNS", "clouddns": "cloudDNS"}


def as_v1(objs):
    """cert-manager's conversion of an Issuer's solvers from v1alpha2 to v1: three DNS providers renamed."""
    out = [dict(copy.deepcopy(o), apiVersion=G + "/v1") for o in objs]
    for o in out:
        for solver in o.get("spec", {}).get("acme", {}).get("solvers") or []:
            dns01 = solver.get("dns01") or {}
            for old, new in RENAMED_PROVIDERS.items():
                if old in dns01:
                    dns01[new] = dns01.pop(old)
    return out


def moving_the_selector_out(objs):
    """A conversion that splits the solvers: each selector leaves the list for `spec.acme.selectors`."""
    out = as_v1(objs)
    for o in out:
        acme = o.get("spec", {}).get("acme") or {}
        selectors = [s.pop("selector") for s in acme.get("solvers") or [] if "selector" in s]
        if selectors:
            acme["selectors"] = selectors
    return out


def merging_the_server_in(objs):
    """A conversion that moves `spec.acme.server` into every solver: another leaf's marker inside the list."""
    out = as_v1(objs)
    for o in out:
        acme = o.get("spec", {}).get("acme") or {}
        for solver in acme.get("solvers") or []:
            solver["http01"] = dict(solver.get("http01") or {}, server=acme.get("server"))
    return out


def test_the_solvers_list_is_atomic_and_its_inside_is_renamed():
    solvers = OLD.props["spec"].props["acme"].props["solvers"]
    assert solvers.atomic, "spec.acme.solvers is a list with no list-type: owned as one value"


def test_an_acme_issuer_keeps_its_solvers_when_the_conversion_renames_inside_them():
    t = learn_exact(as_v1, OLD, NEW, "v1alpha2", "v1").translate(ACME_APPLY)
    assert t.fields == ACME_APPLY and t.dropped == ()


def test_solvers_split_by_the_conversion_are_dropped_and_named():
    t = learn_exact(moving_the_selector_out, OLD, NEW, "v1alpha2", "v1").translate(ACME_APPLY)
    assert t.dropped == (".spec.acme.solvers",)
    assert t.fields == {"f:spec": {"f:acme": {"f:server": {}, "f:privateKeySecretRef": {"f:name": {}}}}}


def test_solvers_merged_with_another_field_are_dropped_and_named():
    t = learn_exact(merging_the_server_in, OLD, NEW, "v1alpha2", "v1").translate(ACME_APPLY)
    assert ".spec.acme.solvers" in t.dropped


def test_only_strings_and_numbers_are_markers():
    assert scalars({"a": [1, "x", True, None, {"b": 2.5}]}) == {"1", '"x"', "2.5"}

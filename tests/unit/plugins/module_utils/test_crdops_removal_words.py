# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What following a release removes from a live CRD, in the words of the plan and of the fleet report."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.removal_words import (
    plan_step, removal, removal_words, removals_by_crd)

CONVERSION = {"path": "spec.conversion", "pointer": "/spec/conversion",
              "owners": ["cainjector (Update)", "kubectl-create (Update)"],
              "injected": ["spec.conversion.webhook.clientConfig.caBundle"]}


def test_records_of_both_steps_per_crd_in_order_with_their_releases():
    records = [
        {"name": "a.io", "removed": [{"path": "metadata.labels[x.io/tier]", "owners": [], "injected": []}],
         "declared_by": "the installed release", "not_declared_by": "release N"},
        {"name": "b.io", "removed": [], "declared_by": "the installed release", "not_declared_by": "release N"},
        {"name": "a.io", "removed": [CONVERSION], "declared_by": "release N", "not_declared_by": "release N+1"},
    ]
    by_crd = removals_by_crd(records)
    assert list(by_crd) == ["a.io"]  # a CRD the step left alone has nothing to list
    assert by_crd["a.io"] == [
        {"path": "metadata.labels[x.io/tier]", "declared_by": "the installed release", "not_declared_by": "release N",
         "owners": [], "injected": []},
        {"path": "spec.conversion", "declared_by": "release N", "not_declared_by": "release N+1",
         "owners": ["cainjector (Update)", "kubectl-create (Update)"],
         "injected": ["spec.conversion.webhook.clientConfig.caBundle"]}]  # the JSON pointer is the module's business
    assert removals_by_crd([]) == {} and removals_by_crd(None) == {}


def test_words_say_the_field_why_it_goes_who_owned_it_and_what_goes_with_it():
    (entry,) = removals_by_crd([dict(name="a.io", removed=[CONVERSION], declared_by="release N",
                                     not_declared_by="release N+1")])["a.io"]
    assert removal_words(entry) == (
        "spec.conversion (declared by release N, not by release N+1; owned by cainjector (Update), kubectl-create "
        "(Update); with spec.conversion.webhook.clientConfig.caBundle, which no release declared)")
    owned_by_nobody = removal({"path": "spec.names.shortNames"}, "release N", "release N+1")
    assert plan_step([owned_by_nobody, entry]).startswith(
        "would remove spec.names.shortNames (declared by release N, not by release N+1); would remove spec.conversion (")


def test_a_bare_path_from_an_older_report_is_a_field_without_reasons():
    old = removal("spec.conversion")
    assert old == {"path": "spec.conversion", "declared_by": None, "not_declared_by": None, "owners": [],
                   "injected": []}
    assert removal_words(old) == "spec.conversion"
    assert removal(removal(CONVERSION, "release N", "release N+1")) == removal(CONVERSION, "release N", "release N+1")

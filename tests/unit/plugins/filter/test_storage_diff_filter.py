# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role's storage-diff gate and plan lines (plugins/filter/storage_diff.py)."""

from __future__ import annotations

from ansible_collections.crdops.migration.plugins.filter.storage_diff import (
    storage_diff_lines, storage_diff_pruning, storage_diff_pruning_message)

CHECKED = {"name": "widgets.example.com", "storage_diff": {
    "checked": True, "storage_version": "v2", "keys": 40, "sampled": 20, "compared": 20, "would_change": 20,
    "added": {".status.conditions": 20}, "removed": {".spec.legacy": 7, ".spec.items[].old": 2}, "changed": {},
    "skipped": {"gone": 1}, "examples": {".spec.legacy": ["ns/a", "ns/b"], ".spec.items[].old": ["ns/c"]}}}
DEFAULTS_ONLY = {"name": "gateways.gateway.networking.k8s.io", "storage_diff": {
    "checked": True, "storage_version": "v1", "keys": 2, "sampled": 2, "compared": 2, "would_change": 2,
    "added": {".status.conditions": 2}, "removed": {}, "changed": {}, "skipped": {}, "examples": {}}}
UNCHECKED = {"name": "x.example.com", "storage_diff": {"checked": False, "reason": "no etcd_url: not read"}}


def test_only_crds_that_lose_fields_are_pruning():
    out = storage_diff_pruning([CHECKED, DEFAULTS_ONLY, UNCHECKED])
    assert out == [{"name": "widgets.example.com", "removed": {".spec.legacy": 7, ".spec.items[].old": 2},
                    "compared": 20, "keys": 40,
                    "examples": {".spec.legacy": ["ns/a", "ns/b"], ".spec.items[].old": ["ns/c"]},
                    "unverified": None, "not_compared": 0}]


def test_the_gate_message_names_cluster_crd_paths_counts_and_the_variable():
    msg = storage_diff_pruning_message(storage_diff_pruning([CHECKED]), "prod-eu-1")
    assert msg.startswith("cluster prod-eu-1: the re-store would delete stored fields")
    assert "widgets.example.com: .spec.items[].old (2 of 20), .spec.legacy (7 of 20) (e.g. ns/c)" in msg
    assert "crd_upgrade_accept_pruning: true" in msg and "Nothing was written" in msg


def test_plan_lines_say_what_is_added_removed_and_what_was_not_checked():
    lines = storage_diff_lines([DEFAULTS_ONLY, UNCHECKED])
    assert lines == [
        "gateways.gateway.networking.k8s.io: 2 of 2 stored objects compared at v1, 2 would change beyond "
        "apiVersion; adds (defaults persisted) .status.conditions (2 of 2)",
        "x.example.com: stored values not checked (no etcd_url: not read)"]
    assert "skipped gone: 1" in storage_diff_lines([CHECKED])[0]


UNVERIFIED = {"name": "certificates.cert-manager.io", "storage_diff": {
    "checked": True, "storage_version": "v1", "keys": 28, "sampled": 20, "compared": 0, "would_change": 0,
    "added": {}, "removed": {}, "changed": {}, "skipped": {"webhook_version_not_served": 20}, "examples": {},
    "unverified": "v1alpha2 is not served and its objects could not be converted back for the comparison: "
                  "HTTP 403 services/proxy forbidden"}}


def test_objects_that_could_not_be_compared_stop_the_run_like_pruning_and_say_why():
    (item,) = storage_diff_pruning([UNVERIFIED, DEFAULTS_ONLY])
    assert item["not_compared"] == 20 and item["removed"] == {}
    msg = storage_diff_pruning_message([item], "c1")
    assert ("certificates.cert-manager.io: 20 sampled objects could not be compared, so a loss cannot be ruled out "
            "(v1alpha2 is not served") in msg and "crd_upgrade_accept_pruning: true" in msg
    (line,) = storage_diff_lines([UNVERIFIED])
    assert "skipped webhook_version_not_served: 20; NOT COMPARED: v1alpha2 is not served" in line


NORMALISED = {"name": "certificaterequests.cert-manager.io", "storage_diff": {
    "checked": True, "storage_version": "v1", "keys": 8, "sampled": 8, "compared": 8, "would_change": 6,
    "added": {}, "removed": {}, "normalised": {".spec.isCA": 6}, "changed": {}, "skipped": {},
    "examples": {".spec.isCA": ["ns/a"]}, "compared_by_conversion_review": 8}}


def test_zero_values_the_conversion_leaves_out_are_named_and_do_not_stop_the_run():
    assert storage_diff_pruning([NORMALISED]) == []
    (line,) = storage_diff_lines([NORMALISED])
    assert ("6 would change beyond apiVersion; normalised by the conversion (a zero value left out, the same value "
            "when read) .spec.isCA (6 of 8); 8 stored at a version not served") in line


def test_a_refusal_after_the_storage_flip_says_that_release_n_was_applied():
    after = storage_diff_pruning_message(storage_diff_pruning([CHECKED]), "c1", "after the storage flip")
    assert "Release N was applied" in after and "no stored object was re-stored" in after
    assert "Nothing was written" not in after
    assert "Nothing was written" in storage_diff_pruning_message(storage_diff_pruning([CHECKED]), "c1", "before any change")


FORECAST = {"name": "pads.example.com", "storage_diff": dict(DEFAULTS_ONLY["storage_diff"], added={}, would_change=0),
            "storage_forecast": {"checked": True, "storage_version": "v2", "sampled": 6, "compared": 6,
                                 "removed": {".spec.legacy": 6}, "normalised": {}, "skipped": {},
                                 "examples": {".spec.legacy": ["ns-b/pad-000"]}, "unverified": None}}


def test_a_loss_forecast_for_release_n_stops_the_run_before_the_flip_and_is_named_so():
    (item,) = storage_diff_pruning([FORECAST])
    assert item["name"] == "pads.example.com (after release N, storage version v2)"
    msg = storage_diff_pruning_message([item], "c1", "before any change")
    assert "pads.example.com (after release N, storage version v2): .spec.legacy (6 of 6) (e.g. ns-b/pad-000)" in msg
    assert "Nothing was written" in msg
    lines = storage_diff_lines([FORECAST])
    assert lines[1] == ("pads.example.com after release N (storage version v2): 6 of 6 sampled stored values taken "
                        "through release N's conversion and schema; removes for good .spec.legacy (6 of 6)")


def test_a_forecast_that_could_not_ask_the_webhook_does_not_stop_the_run_and_says_so():
    unverified = dict(FORECAST, storage_forecast=dict(FORECAST["storage_forecast"], removed={}, compared=0,
                                                      unverified="release N's conversion webhook could not be asked"))
    assert storage_diff_pruning([unverified]) == []
    assert "(checked again after the flip)" in storage_diff_lines([unverified])[1]

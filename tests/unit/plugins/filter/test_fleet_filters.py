# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.filter.fleet import (
    AnsibleFilterError, FilterModule, crd_upgrade_iso_utc, crd_upgrade_percent, crd_upgrade_report_merge, crd_upgrade_waves)
from ansible_collections.crdops.migration.plugins.filter.role_step import crd_upgrade_step


@pytest.mark.parametrize("given, expected", [
    ([1, "10%", "100%"], [1, "10%", "100%"]),
    ('[1, "10%", "100%"]', [1, "10%", "100%"]),      # AWX survey text answer
    ("[1, '10%', '100%']", [1, "10%", "100%"]),      # Python-style quotes typed by a person
    ("1, 10%,100%", [1, "10%", "100%"]),
    ("10", [10]),
    (3, [3]),
    (["2", " 50 % "], [2, "50%"]),
])
def test_waves_accept_lists_and_survey_text(given, expected):
    assert crd_upgrade_waves(given) == expected


@pytest.mark.parametrize("bad", ["", "[]", "[0]", "abc", "[1, '150%']", [True], "-1"])
def test_waves_refuse_what_serial_cannot_use(bad):
    with pytest.raises(AnsibleFilterError, match="crd_upgrade_waves"):
        crd_upgrade_waves(bad)


@pytest.mark.parametrize("given, expected", [(0, 0), ("0", 0), ("10", 10), ("10%", 10), (" 25 ", 25), (100, 100)])
def test_percent_from_int_or_text(given, expected):
    assert crd_upgrade_percent(given) == expected


@pytest.mark.parametrize("bad", ["ten", "101", -1, True, "1.5"])
def test_percent_refuses_nonsense(bad):
    with pytest.raises(AnsibleFilterError, match="crd_upgrade_percent"):
        crd_upgrade_percent(bad)


def test_iso_utc_carries_the_offset():
    assert crd_upgrade_iso_utc(0) == "1970-01-01T00:00:00+00:00"
    assert crd_upgrade_iso_utc("1764566400.7") == "2025-12-01T05:20:00+00:00"


def cluster(name, status, objects=0, rewritten=0, failed=0):
    return {"cluster": name, "status": status, "totals": {"objects": objects, "rewritten": rewritten, "failed": failed}}


def test_the_fleet_report_step_counts_statuses_and_objects():
    report = crd_upgrade_step([cluster("a", "ok", 10, 10), cluster("b", "failed", 5, 2, 3),
                               cluster("c", "not run"), cluster("d", "planned", 7)],
                              "fleet_report", title="T", generated="G", run={"id": "r1"})
    assert (report["title"], report["generated"], report["slice"]) == ("T", "G", "")
    assert report["run"] == {"id": "r1", "outcome": "failed: 1 of 4 clusters failed"}
    assert [f["cluster"] for f in report["failures"]] == ["b"]
    assert report["summary"] == {"clusters": 4, "ok": 1, "held_back": 0, "planned": 1, "failed": 1, "not_run": 1, "objects": 22,
                                 "rewritten": 12, "failed_objects": 3, "nothing_to_do": 1, "to_restore": 0}


def test_merge_of_three_slices():
    slices = [{"title": "T", "slice": str(i), "check_mode": False, "clusters": [cluster(f"c{i}", "ok", 10, 10)]}
              for i in (3, 1, 2)]
    slices[1]["clusters"].append(cluster("c2", "not run"))   # a host another slice ran
    merged = crd_upgrade_report_merge(slices, generated="G")
    assert [c["cluster"] for c in merged["clusters"]] == ["c1", "c2", "c3"]
    assert [c["status"] for c in merged["clusters"]] == ["ok", "ok", "ok"]
    assert merged["summary"]["clusters"] == 3 and merged["summary"]["rewritten"] == 30
    assert merged["slices"] == ["1", "2", "3"] and merged["title"] == "T" and merged["generated"] == "G"


def test_merge_of_nothing_is_an_error():
    with pytest.raises(AnsibleFilterError):
        crd_upgrade_report_merge([])


def test_only_the_filters_a_playbook_calls_are_registered():
    # the report's helpers are steps of crd_upgrade_step (role_step.py)
    assert set(FilterModule().filters()) == {"crd_upgrade_waves", "crd_upgrade_percent"}

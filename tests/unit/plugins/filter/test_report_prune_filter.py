# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which run folders of the report directory crd_upgrade_report_keep deletes."""
from __future__ import annotations

import pytest

from ansible_collections.crdops.migration.plugins.filter.role_step import crd_upgrade_step
from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.report_runs import runs_to_prune as prune


def prune_dir(root, keep, current=""):
    """As report_open.yml calls it."""
    return crd_upgrade_step(root, "report_prune", keep=keep, current=current)


RUNS = ["20261201T080000.000Z", "20261201T090000.000Z-check", "20261201T100000.000Z-slice-1",
        "20261201T100000.001Z-slice-a_b.c", "20261201T110000.000Z-merged", "20261201T120000.000Z-check-merged-slice-2"]
FOREIGN = ["latest", "notes", "20261201T080000.000Z.bak", "20261201T080000Z", "x20261201T080000.000Z",
           "20261201T080000.000Z-slice-", "20261201T080000.000Z-slice-a/b", "2026-12-01", "fleet-report.json"]


def test_the_oldest_beyond_keep_go_oldest_first_whatever_order_they_are_listed_in():
    listed = list(reversed(RUNS)) + FOREIGN
    assert prune(listed, 2) == RUNS[:4]
    assert prune(listed, "4") == RUNS[:2]   # -e crd_upgrade_report_keep=4 is text
    assert prune(listed, len(RUNS)) == [] and prune(listed, 100) == []


def test_names_the_role_did_not_make_are_never_chosen():
    assert prune(FOREIGN, 1) == []
    assert not set(prune(RUNS + FOREIGN, 1)) & set(FOREIGN)


def test_the_current_run_and_latest_target_stay_even_when_old():
    # a clock stepped back: the current run's stamp is the oldest; latest still at an older run
    got = prune(RUNS, 1, current=RUNS[0], latest=RUNS[2])
    assert got == [RUNS[1], RUNS[3], RUNS[4]]


@pytest.mark.parametrize("keep", [0, "0", -1, "-1", "abc", 2.5, True, None])
def test_zero_keeps_all_and_a_keep_that_is_not_a_count_deletes_nothing(keep):
    assert prune(RUNS + FOREIGN, keep) == []


def test_the_filter_reads_the_directory_folders_only_and_spares_latest_and_current(tmp_path):
    for name in RUNS + ["notes"]:
        (tmp_path / name).mkdir()
    (tmp_path / "20000101T000000.000Z").write_text("a file named like a run")
    (tmp_path / "20000101T000001.000Z").symlink_to(tmp_path / "notes")   # a link named like a run
    (tmp_path / "latest").symlink_to(RUNS[1])
    assert prune_dir(str(tmp_path), 2, current=RUNS[0]) == [RUNS[2], RUNS[3]]
    assert prune_dir(str(tmp_path), "0") == [] and prune_dir(str(tmp_path), -1) == []
    assert prune_dir(str(tmp_path / "none-yet"), 1) == []

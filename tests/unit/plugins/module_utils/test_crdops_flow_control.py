# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan's API Priority and Fairness sentence: the answers a real apiserver cannot give on cue (APF off, the
FlowSchemas forbidden, only the older flowcontrol API); tests/integration/test_flowcontrol.py runs the real ones."""
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.flow_control import (
    CLASSIFIED, FLOW_SCHEMA_HEADER, flow_control)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.report.approval_plan import pace_words
from tests.unit.crdops_fakes import resp

SCHEMAS = "/apis/flowcontrol.apiserver.k8s.io/%s/flowschemas/%s"


class Answers:
    """GET path -> response; anything else a 404."""

    def __init__(self, answers):
        self.answers, self.asked = answers, []

    def request(self, method, path, **_kw):
        self.asked.append(path)
        return self.answers.get(path) or resp(404, {"kind": "Status", "code": 404})


def classified(uid):
    return resp(200, {"items": []}, {FLOW_SCHEMA_HEADER: uid} if uid else {})


def schema(uid):
    return resp(200, {"metadata": {"uid": uid}})


def test_the_shipped_schema_is_found_on_the_older_api_too():
    found = flow_control(Answers({CLASSIFIED: classified("u-1"), SCHEMAS % ("v1beta3", "crdops-migration"): schema("u-1")}))
    assert found.state == "shipped" and "is in place" in found.words()


def test_forbidden_schemas_name_the_uid_and_the_permission_and_apf_off_says_so():
    forbidden = Answers({CLASSIFIED: classified("u-9"), SCHEMAS % ("v1", "crdops-migration"): resp(403, {}),
                         SCHEMAS % ("v1", "exempt"): resp(403, {})})
    found = flow_control(forbidden)
    assert found.state == "unknown" and "u-9" in found.words() and "grant get on flowschemas" in found.words()
    assert SCHEMAS % ("v1beta3", "crdops-migration") not in forbidden.asked  # a 403 is not asked again elsewhere
    off = flow_control(Answers({CLASSIFIED: classified(None)}))
    assert off.state == "off" and "APF is off" in off.words()


def test_the_plan_says_it_beside_the_pace():
    words = pace_words({"pace": "gentle", "latency_budget": 2.0, "apf": "API Priority and Fairness: exempt"})
    assert words == "pace gentle: other clients' GET p90 and p99 held within x2.0 of idle; API Priority and Fairness: exempt"
    assert pace_words({"pace": "gentle", "latency_budget": 2.0}).endswith("of idle")

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.fieldsv1 import extract_owned
from ansible_collections.crdops.migration.plugins.module_utils._crdops.ownership.owned_values import (
    describe, different, merge_patch_of, owned_values, set_at, trie_of, value_at)

OBJ = {"apiVersion": "g/v1", "kind": "K",
       "metadata": {"name": "a", "namespace": "ns", "labels": {"team": "y"}},
       "spec": {"size": 3, "on": True, "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53}],
                "tags": ["a"], "nested": {"ratio": 0.5}},
       "status": {"phase": "Ready"}}
FIELDS = {"f:metadata": {"f:name": {}, "f:labels": {"f:team": {}}},
          "f:status": {"f:phase": {}},
          "f:spec": {"f:size": {}, "f:on": {}, "f:tags": {'v:"a"': {}}, "f:nested": {"f:ratio": {}},
                     "f:ports": {'k:{"name":"dns"}': {".": {}, "f:name": {}, "f:port": {}}}}}


def test_scalar_values_spec_first_never_names_or_list_keys():
    paths = owned_values(OBJ, FIELDS)
    assert [describe(p) for p in paths] == [".spec.size", ".spec.on", ".spec.nested.ratio", '.spec.ports[name="dns"].port',
                                            ".status.phase", ".metadata.labels.team"]


def test_changed_values_keep_their_type_and_land_in_a_configuration_of_the_path():
    assert (different(3), different(True), different(0.5), different("dns")) == (4, False, 1.5, "dns-crdops")
    assert different("dns-crdops") == "dns"  # a second change goes back, never grows
    port = owned_values(OBJ, FIELDS)[3]
    config = extract_owned(OBJ, trie_of(port))
    assert config == {"spec": {"ports": [{"name": "dns", "port": 53}]}}
    set_at(config, port, different(value_at(OBJ, port)))
    assert config == {"spec": {"ports": [{"name": "dns", "port": 54}]}}
    assert merge_patch_of(port, 54) is None  # a merge patch would replace the whole list
    assert merge_patch_of(owned_values(OBJ, FIELDS)[0], 4) == {"spec": {"size": 4}}

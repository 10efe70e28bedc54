# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

import pytest
import yaml

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.connection import (
    ConnectionOptions, build_configuration, connect)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import ConnectionFailed

TOKEN = "tok-SUPERSECRET-123"
KUBECONFIG = {
    "apiVersion": "v1", "kind": "Config", "current-context": "ctx-a",
    "clusters": [{"name": "a", "cluster": {"server": "https://10.0.0.1:6443", "insecure-skip-tls-verify": True}}],
    "users": [{"name": "u", "user": {"token": TOKEN}}],
    "contexts": [{"name": "ctx-a", "context": {"cluster": "a", "user": "u"}}],
}


def test_repr_hides_secrets():
    o = ConnectionOptions(kubeconfig=KUBECONFIG, api_key=TOKEN, password=TOKEN, client_key="/k",
                          proxy_headers={"basic_auth": TOKEN}, host="https://h")
    assert TOKEN not in repr(o) and TOKEN not in str(o)
    assert o.cluster_label() == "https://h"


def test_kubeconfig_dict_token_becomes_bearer_header_and_pool_size():
    t = connect(ConnectionOptions(kubeconfig=KUBECONFIG), pool_size=17)
    try:
        assert t.base_url == "https://10.0.0.1:6443" and t.cluster_label == "ctx-a"
        h = t._build_headers(None, None)
        assert h["Authorization"] == "Bearer " + TOKEN
        assert t._pool.connection_pool_kw["maxsize"] == 17
        assert TOKEN not in repr(t)
    finally:
        t.close()


def test_explicit_host_and_api_key_skip_kubeconfig_and_impersonation_headers():
    o = ConnectionOptions(kubeconfig="/does/not/exist", host="https://api.x:6443/", api_key=TOKEN,
                          validate_certs=False, impersonate_user="alice", impersonate_groups=("g1", "g2"))
    assert o.skips_kubeconfig()
    t = connect(o, pool_size=4)
    h = t._build_headers("application/json", None)
    assert t.base_url == "https://api.x:6443"
    assert h["Authorization"] == "Bearer " + TOKEN
    assert h.getlist("Impersonate-Group") == ["g1", "g2"] and h["Impersonate-User"] == "alice"


def test_basic_auth():
    t = connect(ConnectionOptions(host="https://h", username="u", password="p" + TOKEN), pool_size=1)
    assert t._build_headers(None, None)["Authorization"].startswith("Basic ")


def test_bad_kubeconfig_error_has_no_secret(tmp_path):
    bad = dict(KUBECONFIG, **{"current-context": "missing"})
    with pytest.raises(ConnectionFailed) as ei:
        build_configuration(ConnectionOptions(kubeconfig=bad, context="nope"))
    assert TOKEN not in str(ei.value) and "nope" in str(ei.value)
    with pytest.raises(ConnectionFailed) as ei:
        build_configuration(ConnectionOptions(kubeconfig=str(tmp_path / "missing.yaml")))
    assert "missing.yaml" in str(ei.value)


def _refused(options):
    with pytest.raises(ConnectionFailed) as ei:
        build_configuration(options)
    return str(ei.value)


def test_a_kubeconfig_the_loader_refuses_is_said_in_short_words_naming_the_file_once(tmp_path):
    good = tmp_path / "fleet.yaml"
    good.write_text(yaml.safe_dump(KUBECONFIG))
    (tmp_path / "bad.yaml").write_text("this: is: not: yaml: [\n")
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "nocurrent.yaml").write_text(yaml.safe_dump({k: v for k, v in KUBECONFIG.items() if k != "current-context"}))
    missing = tmp_path / "nope" / "kubeconfig.yaml"
    # the loader itself says "Invalid kube-config file. No configuration found." for a file that is not there
    assert _refused(ConnectionOptions(kubeconfig=str(missing))) == (
        "[cluster kubeconfig %s (current context)] cannot load kubeconfig: no such file" % missing)
    assert _refused(ConnectionOptions(kubeconfig=str(missing), context="prod-1")) == (
        "[cluster prod-1] cannot load kubeconfig %s: no such file" % missing)
    assert _refused(ConnectionOptions(kubeconfig=str(good), context="prod-9")) == (
        "[cluster prod-9] cannot load kubeconfig %s: it has no context 'prod-9' (kubectl config get-contexts "
        "lists them)" % good)
    assert _refused(ConnectionOptions(kubeconfig=str(tmp_path / "bad.yaml"))).endswith(
        "bad.yaml (current context)] cannot load kubeconfig: not YAML (line 1, column 9)")
    assert _refused(ConnectionOptions(kubeconfig=str(tmp_path / "empty.yaml"))).endswith(
        "cannot load kubeconfig: the file is empty")
    assert _refused(ConnectionOptions(kubeconfig=str(tmp_path / "nocurrent.yaml"))).endswith(
        "cannot load kubeconfig: it has no current-context: set context")
    assert _refused(ConnectionOptions(kubeconfig=str(tmp_path), context="c")) == (
        "[cluster c] cannot load kubeconfig %s: a directory, not a file" % tmp_path)
    # an inline kubeconfig has no file; its token is never in the message
    text = _refused(ConnectionOptions(kubeconfig=dict(KUBECONFIG), context="prod-9"))
    assert text == "[cluster prod-9] cannot load kubeconfig: it has no context 'prod-9' (kubectl config " \
                   "get-contexts lists them)" and TOKEN not in text

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The one file that knows both Ansible and the engine: argument specs, engine connection, errors."""

from __future__ import annotations

import copy
import os
import traceback

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.crdops.migration.plugins.module_utils._crdops import connection as _connection
from ansible_collections.crdops.migration.plugins.module_utils._crdops.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.selection import Selection

# Same names, aliases, types, no_log flags and K8S_AUTH_* variables as kubernetes.core
# (plugins/module_utils/args_common.py AUTH_ARG_SPEC; env handling of k8s/client.py).
AUTH_PROXY_HEADERS_SPEC = dict(
    proxy_basic_auth=dict(type="str", no_log=True,
                          fallback=(env_fallback, ["K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH"])),
    basic_auth=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_PROXY_HEADERS_BASIC_AUTH"])),
    user_agent=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_PROXY_HEADERS_USER_AGENT"])),
)

AUTH_ARG_SPEC = dict(
    kubeconfig=dict(type="raw", fallback=(env_fallback, ["K8S_AUTH_KUBECONFIG"])),
    context=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_CONTEXT"])),
    host=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_HOST"])),
    api_key=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_API_KEY"])),
    username=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_USERNAME"])),
    password=dict(type="str", no_log=True, fallback=(env_fallback, ["K8S_AUTH_PASSWORD"])),
    validate_certs=dict(type="bool", aliases=["verify_ssl"],
                        fallback=(env_fallback, ["K8S_AUTH_VALIDATE_CERTS", "K8S_AUTH_VERIFY_SSL"])),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"],
                 fallback=(env_fallback, ["K8S_AUTH_CA_CERT", "K8S_AUTH_SSL_CA_CERT"])),
    client_cert=dict(type="path", aliases=["cert_file"],
                     fallback=(env_fallback, ["K8S_AUTH_CLIENT_CERT", "K8S_AUTH_CERT_FILE"])),
    client_key=dict(type="path", aliases=["key_file"], no_log=False,
                    fallback=(env_fallback, ["K8S_AUTH_CLIENT_KEY", "K8S_AUTH_KEY_FILE"])),
    proxy=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_PROXY"])),
    no_proxy=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_NO_PROXY"])),
    proxy_headers=dict(type="dict", options=AUTH_PROXY_HEADERS_SPEC),
    persist_config=dict(type="bool", fallback=(env_fallback, ["K8S_AUTH_PERSIST_CONFIG"])),
    impersonate_user=dict(type="str", fallback=(env_fallback, ["K8S_AUTH_IMPERSONATE_USER"])),
    impersonate_groups=dict(type="list", elements="str", fallback=(env_fallback, ["K8S_AUTH_IMPERSONATE_GROUPS"])),
    # Not in kubernetes.core (it has no connect timeout): our own option and variable, CRDOPS_ prefixed.
    connect_timeout=dict(type="float", default=10.0, fallback=(env_fallback, ["CRDOPS_CONNECT_TIMEOUT"])),
)

SELECTION_ARG_SPEC = dict(
    names=dict(type="list", elements="str", aliases=["crd_names"]),
    group=dict(type="str"),
    label_selector=dict(type="str"),
    all=dict(type="bool", default=False),
    allow_empty=dict(type="bool", default=False),
)

# kubeconfig keys whose values are secrets (kubernetes.core args_common.py does the same).
KUBECONFIG_SECRET_KEYS = frozenset([
    "token", "password", "client-key-data", "client-certificate-data", "certificate-authority-data",
    "id-token", "refresh-token", "access-token", "client-secret", "client_secret", "secret",
    "tokenFile", "token-file",
])


def argument_spec(*extra):
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(copy.deepcopy(SELECTION_ARG_SPEC))
    for e in extra:
        spec.update(copy.deepcopy(e))
    return spec


def kubeconfig_secret_values(value):
    """All secret leaf values of a kubeconfig dict (for ``no_log_values``).

    An exec plugin's ``env`` is a list of ``{name, value}``: only the values are secret. Masking the
    names too would hide every occurrence of a word like ``prod`` in the output.
    """
    out = set()

    def walk(node, secret):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "env" and isinstance(v, list):
                    walk_env(v, secret)
                else:
                    walk(v, secret or k in KUBECONFIG_SECRET_KEYS)
        elif isinstance(node, list):
            for v in node:
                walk(v, secret)
        elif secret and node not in (None, "", True, False):
            out.add(str(node))

    def walk_env(entries, secret):
        for entry in entries:
            if isinstance(entry, dict):
                for k, v in entry.items():
                    walk(v, secret or k != "name")
            else:
                walk(entry, True)

    walk(value, False)
    return out


class CrdOpsModule:
    """Thin wrapper: AnsibleModule + dependency check + kubeconfig redaction + engine connection."""

    def __init__(self, argument_spec, **kwargs):
        kwargs.setdefault("supports_check_mode", True)
        self.module = AnsibleModule(argument_spec=argument_spec, **kwargs)
        if not _connection.HAS_KUBERNETES:
            self.module.fail_json(msg=missing_required_lib("kubernetes"),
                                  exception=_connection.KUBERNETES_IMPORT_ERROR)
        kubeconfig = self.module.params.get("kubeconfig")
        if isinstance(kubeconfig, dict):
            self.module.no_log_values.update(kubeconfig_secret_values(kubeconfig))
        elif kubeconfig is not None and not isinstance(kubeconfig, str):
            self.module.fail_json(msg="kubeconfig must be a path (string) or a kubeconfig dict, got %s"
                                  % type(kubeconfig).__name__)
        self.params = self.module.params
        self.check_mode = self.module.check_mode

    def require_lib(self, library, present, import_error=None):
        """Fail with Ansible's standard missing-library message unless ``present``."""
        if not present:
            self.module.fail_json(msg=missing_required_lib(library), exception=import_error)

    def connection_options(self):
        return connection_options_from(self.params)

    def selection(self):
        return selection_from(self.params)

    def connect(self, pool_size=10, retry_deadline=120.0, max_qps=None):
        connect_timeout = self.params.get("connect_timeout")
        if connect_timeout is not None and connect_timeout <= 0:
            self.module.fail_json(msg="connect_timeout must be > 0, got %s" % connect_timeout)
        try:
            return connect_from(self.params, pool_size=pool_size, retry_deadline=retry_deadline, max_qps=max_qps)
        except CrdOpsError as exc:
            self.fail(exc)

    def fail(self, error, **partial):
        """``fail_json`` with a complete message (cluster, CRD, object, API message) and partial results."""
        if isinstance(error, CrdOpsError):
            partial.setdefault("error", error.to_dict())
            msg = str(error)
        else:
            msg = "%s: %s" % (type(error).__name__, error)
        self.module.fail_json(msg=msg, exception=traceback.format_exc(), **partial)


def connect(options, **kwargs):
    """Indirection so unit tests can patch the engine connection in one place."""
    return _connection.connect(options, **kwargs)


# -- shared by modules and the controller-side action plugins (validated params in, engine objects out) -----
def connection_options_from(p):
    kubeconfig = p.get("kubeconfig")
    if isinstance(kubeconfig, str):
        kubeconfig = os.path.expanduser(kubeconfig)
    return _connection.ConnectionOptions(
        kubeconfig=kubeconfig, context=p.get("context"), host=p.get("host"), api_key=p.get("api_key"),
        username=p.get("username"), password=p.get("password"), validate_certs=p.get("validate_certs"),
        ca_cert=p.get("ca_cert"), client_cert=p.get("client_cert"), client_key=p.get("client_key"),
        proxy=p.get("proxy"), no_proxy=p.get("no_proxy"), proxy_headers=p.get("proxy_headers"),
        persist_config=p.get("persist_config"), impersonate_user=p.get("impersonate_user"),
        impersonate_groups=tuple(p.get("impersonate_groups") or ()),
    )


def selection_from(p):
    return Selection(names=tuple(p.get("names") or ()), group=p.get("group"),
                     label_selector=p.get("label_selector"), all=bool(p.get("all")),
                     allow_empty=bool(p.get("allow_empty")))


def connect_from(params, pool_size=10, retry_deadline=120.0, max_qps=None):
    """The engine transport for validated params; raises CrdOpsError."""
    options = connection_options_from(params)
    return connect(options, cluster_label=options.cluster_label(), pool_size=pool_size,
                   retry_deadline=retry_deadline, max_qps=max_qps, connect_timeout=params.get("connect_timeout"))


def failure(error, **partial):
    """A failed result (as ``CrdOpsModule.fail`` builds it) for code that returns results instead of exiting."""
    if isinstance(error, CrdOpsError):
        partial.setdefault("error", error.to_dict())
        msg = str(error)
    else:
        msg = "%s: %s" % (type(error).__name__, error)
    return dict(partial, failed=True, msg=msg)


def validate_args(spec, args):
    """Validate task args against a module's spec on the controller (what AnsibleModule does in a module):
    (params, no_log values to redact, error messages). Env fallbacks (K8S_AUTH_*) come from this process."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    result = ArgumentSpecValidator(spec).validate(dict(args))
    no_log = set(result._no_log_values)
    params = result.validated_parameters
    kubeconfig = params.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        no_log.update(kubeconfig_secret_values(kubeconfig))
    elif kubeconfig is not None and not isinstance(kubeconfig, str):
        return params, no_log, ["kubeconfig must be a path (string) or a kubeconfig dict, got %s"
                                % type(kubeconfig).__name__]
    return params, no_log, list(result.error_messages)


def redact(value, no_log_values):
    """Mask secret values in a result (AnsibleModule does this for module output)."""
    from ansible.module_utils.common.parameters import remove_values
    return remove_values(value, no_log_values) if no_log_values else value

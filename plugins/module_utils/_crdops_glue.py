# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The one file that knows both Ansible and the engine: argument specs, the module skeleton (``Job``,
``execute``, ``run_module``), engine connection, results and errors."""

from __future__ import annotations

import copy
import os
import sys
import traceback

from ansible.module_utils.basic import AnsibleModule, env_fallback, missing_required_lib

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube import connection as _connection
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.connection import TransportOptions
from ansible_collections.crdops.migration.plugins.module_utils._crdops.proof.etcd_scan import (
    HAS_URLLIB3, URLLIB3_IMPORT_ERROR, EtcdOptions)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.errors import (
    BadInputError, CrdOpsError, OutcomeError, UnexpectedError, unexpected)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.selection import Selection, select_crds

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

# the etcd client of the modules that read etcd (doc fragment _etcd); crd_storage_verify requires etcd_url
ETCD_ARG_SPEC = dict(
    etcd_url=dict(type="str"),
    etcd_prefix=dict(type="str", default="/registry"),
    etcd_ca_cert=dict(type="path"),
    etcd_client_cert=dict(type="path"),
    etcd_client_key=dict(type="path", no_log=False),
)

# kubeconfig keys whose values are secrets (kubernetes.core args_common.py does the same).
KUBECONFIG_SECRET_KEYS = frozenset([
    "token", "password", "client-key-data", "client-certificate-data", "certificate-authority-data",
    "id-token", "refresh-token", "access-token", "client-secret", "client_secret", "secret",
    "tokenFile", "token-file",
])


def argument_spec(*extra, **kwargs):
    """The connection options, the CRD selection (unless ``selection=False``) and each of ``extra``."""
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    if kwargs.get("selection", True):
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


def kubeconfig_check(params):
    """(the kubeconfig's secret values to mask, an error message or None)."""
    kubeconfig = params.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        return kubeconfig_secret_values(kubeconfig), None
    if kubeconfig is not None and not isinstance(kubeconfig, str):
        return set(), "kubeconfig must be a path (string) or a kubeconfig dict, got %s" % type(kubeconfig).__name__
    return set(), None


class MissingLibrary(CrdOpsError):
    """A Python library the task needs is not importable where the module runs."""

    kind = "missing_library"

    def __init__(self, library, import_error=None):
        super().__init__(missing_required_lib(library), api_message=import_error)

    def __str__(self):
        return self.message


def require(library, present, import_error=None):
    """Raise MissingLibrary (Ansible's standard message) unless ``present``."""
    if not present:
        raise MissingLibrary(library, import_error)


class Job:
    """What one module does between the skeleton's steps (``execute``): connect, select, run, close, fail.

    A subclass sets ``RESULT`` (the keys every result of the module has, failed or not) and ``WHAT`` (names the
    task in an unexpected error), and overrides ``prepare`` (every option check, through the engine's options
    dataclasses; raises before anything is connected), ``run`` (the work over the selected CRDs, filling
    ``self.result``), and where needed ``transport_options``, ``finish`` (an outcome that fails the task raises
    ``OutcomeError``), ``close`` and ``partial`` (what a failed result keeps)."""

    RESULT = {}
    WHAT = "the task"
    # False for a job about the cluster rather than its CRDs (no selection options; ``run`` gets no CRDs)
    SELECTS_CRDS = True

    def __init__(self, params, check_mode=False, warn=None, diff=False):
        self.params = params
        self.check_mode = bool(check_mode)
        self.warn = warn or (lambda msg: None)
        self.diff = bool(diff)
        self.result = dict(copy.deepcopy(self.RESULT), changed=False)
        self._opened = []

    def opened(self, resource):
        """``resource`` (anything with ``close()``, such as an etcd reader), closed with the job."""
        self._opened.append(resource)
        return resource

    def require_etcd_client(self):
        """For ``prepare``: with ``etcd_url``, fail unless the etcd client's library is there."""
        if self.params.get("etcd_url"):
            require("urllib3", HAS_URLLIB3, URLLIB3_IMPORT_ERROR)

    def etcd(self, reader_class):
        """A ``reader_class`` (EtcdReader, EtcdSampler) for the etcd options, or None without ``etcd_url``."""
        p = self.params
        if not p.get("etcd_url"):
            return None
        return self.opened(reader_class(EtcdOptions(url=p["etcd_url"], prefix=p["etcd_prefix"],
                                                    ca_cert=p["etcd_ca_cert"], client_cert=p["etcd_client_cert"],
                                                    client_key=p["etcd_client_key"])))

    def prepare(self):
        pass

    def transport_options(self):
        """From the options of the same names wherever a module has them: a pool for ``workers`` writers plus
        two (else two), ``retry_deadline``, ``max_qps``; ``connect_timeout`` is everyone's (AUTH_ARG_SPEC)."""
        p = self.params
        return TransportOptions(pool_size=p["workers"] + 2 if "workers" in p else 2,
                                retry_deadline=p.get("retry_deadline", 120.0), max_qps=p.get("max_qps"),
                                connect_timeout=p.get("connect_timeout"))

    def run(self, transport, crds):
        raise NotImplementedError

    def finish(self):
        pass

    def close(self):
        while self._opened:
            self._opened.pop().close()

    def partial(self, error=None):
        return self.result


def execute(job):
    """The one skeleton of every module: check, connect, select, run, close. Never raises: a failure is a
    result with ``failed``, ``msg`` and ``error`` (``kind`` and the cluster/CRD/object it concerns) plus what
    the job did so far (``Job.partial``). Every check is made before the connection."""
    transport = None
    try:
        job.prepare()
        selection = selection_from(job.params) if job.SELECTS_CRDS else None
        if selection is not None:
            selection.validate()
        link = job.transport_options()
        link.validate()
        transport = connect_from(job.params, link)
        job.result["cluster"] = transport.cluster_label
        job.run(transport, select_crds(transport, selection) if selection is not None else [])
        job.finish()
    except CrdOpsError as exc:
        return failure(exc.with_context(cluster=job.result.get("cluster")), **job.partial(exc))
    except Exception as exc:  # not ours (a credential plugin, a library): scrubbed, no traceback, no secrets
        return failure(unexpected(exc, job.WHAT, cluster=job.result.get("cluster")), **job.partial(exc))
    finally:
        job.close()
        if transport is not None:
            transport.close()
    return job.result


class _AnsibleModule(AnsibleModule):
    """An AnsibleModule whose own failures (an argument of the wrong type, a missing required one, an unknown
    one) carry ``error.kind`` too, as ``bad_input``: it fails them before any code of ours runs."""

    def fail_json(self, msg, **kwargs):
        kwargs.setdefault("error", BadInputError(msg).to_dict())
        super().fail_json(msg, **kwargs)


class CrdOpsModule:
    """AnsibleModule + dependency check + kubeconfig redaction; ``exit`` ends the module with a result."""

    def __init__(self, argument_spec, **kwargs):
        kwargs.setdefault("supports_check_mode", True)
        self.module = _AnsibleModule(argument_spec=argument_spec, **kwargs)
        self.params = self.module.params
        self.check_mode = self.module.check_mode
        secrets, problem = kubeconfig_check(self.params)
        self.module.no_log_values.update(secrets)
        try:
            require("kubernetes", _connection.HAS_KUBERNETES, _connection.KUBERNETES_IMPORT_ERROR)
            if problem:
                raise BadInputError(problem)
        except CrdOpsError as exc:
            self.exit(failure(exc, changed=False))

    def job(self, job_class, **kwargs):
        return job_class(self.params, self.check_mode, self.module.warn, diff=self.module._diff, **kwargs)

    def exit(self, result):
        if result.get("failed"):
            self.module.fail_json(**result)
        self.module.exit_json(**result)


def run_module(spec, job_class):
    """``main()`` of a module: parse the args, run its job through the skeleton, exit with the result."""
    m = CrdOpsModule(spec)
    m.exit(execute(m.job(job_class)))


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


def connect_from(params, link):
    """The engine transport for validated params and TransportOptions; raises CrdOpsError."""
    options = connection_options_from(params)
    return connect(options, cluster_label=options.cluster_label(), pool_size=link.pool_size,
                   retry_deadline=link.retry_deadline, max_qps=link.max_qps, connect_timeout=link.connect_timeout)


def failure(error, **partial):
    """A failed result: ``msg`` (cluster, CRD, object, API message), ``error`` (its kind and parts) and the
    partial results. A foreign exception is scrubbed first; only our own errors keep their traceback."""
    if not isinstance(error, CrdOpsError):
        error = unexpected(error, "the task")
    partial.setdefault("error", error.to_dict())
    if sys.exc_info()[0] is not None and not isinstance(error, (UnexpectedError, OutcomeError)):
        partial.setdefault("exception", traceback.format_exc())
    return dict(partial, failed=True, msg=str(error))


def restated(result, msg, kind):
    """A failed result whose message is rewritten (a stopped run says why first); ``error`` follows, and gets
    ``kind`` when it had none."""
    error = dict(result.get("error") or {"kind": kind, "cluster": result.get("cluster")}, msg=msg)
    return dict(result, failed=True, msg=msg, error=error)


def validate_args(spec, args):
    """Validate task args against a module's spec on the controller (what AnsibleModule does in a module):
    (params, no_log values to redact, error messages). Env fallbacks (K8S_AUTH_*) come from this process."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    result = ArgumentSpecValidator(spec).validate(dict(args))
    no_log = set(result._no_log_values)
    params = result.validated_parameters
    secrets, problem = kubeconfig_check(params)
    no_log.update(secrets)
    if problem:
        return params, no_log, [problem]
    return params, no_log, list(result.error_messages)


def redact(value, no_log_values):
    """Mask secret values in a result (AnsibleModule does this for module output)."""
    from ansible.module_utils.common.parameters import remove_values
    return remove_values(value, no_log_values) if no_log_values else value

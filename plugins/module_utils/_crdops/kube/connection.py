# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Build a transport from kubernetes.core-style connection options.

Same precedence as kubernetes.core (plugins/module_utils/k8s/client.py): explicit host + api_key,
host + username + password or host + client cert + key skip the kubeconfig; otherwise a given
kubeconfig/context is loaded; otherwise in-cluster config, then ~/.kube/config. Explicit options
then override what the kubeconfig gave. Environment variables are the caller's job (Ansible
``env_fallback`` in the glue).
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

from .errors import BadInputError, ConnectionFailed, at_least
from .transport import HttpTransport, RateLimiter, RetryPolicy

try:
    from kubernetes import client as _k8s_client
    from kubernetes import config as _k8s_config

    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR: Optional[str] = None
except ImportError as _exc:  # pragma: no cover - depends on the environment
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = str(_exc)


@dataclass(frozen=True)
class ConnectionOptions:
    kubeconfig: Any = field(default=None, repr=False)  # path (str) or dict; may hold secrets
    context: Optional[str] = None
    host: Optional[str] = None
    api_key: Optional[str] = field(default=None, repr=False)
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    validate_certs: Optional[bool] = None
    ca_cert: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = field(default=None, repr=False)
    proxy: Optional[str] = None
    no_proxy: Optional[str] = None
    proxy_headers: Optional[Dict[str, Optional[str]]] = field(default=None, repr=False)
    persist_config: Optional[bool] = None
    impersonate_user: Optional[str] = None
    impersonate_groups: Tuple[str, ...] = ()

    def skips_kubeconfig(self) -> bool:
        if not self.host:
            return False
        return bool(
            self.api_key
            or (self.username and self.password)
            or (self.client_cert and self.client_key)
        )

    def cluster_label(self) -> str:
        """A secret-free name for the cluster, for messages: context, else host, else kubeconfig."""
        if self.context:
            return self.context
        if self.host:
            return self.host
        if isinstance(self.kubeconfig, str):
            return "kubeconfig %s (current context)" % self.kubeconfig
        if isinstance(self.kubeconfig, dict):
            ctx = self.kubeconfig.get("current-context")
            return str(ctx) if ctx else "kubeconfig dict"
        return "default kubeconfig"


@dataclass(frozen=True)
class TransportOptions:
    """How the one transport of a task talks to its cluster (the keyword arguments of ``connect``)."""

    pool_size: int = 10  # >= the task's worker threads
    retry_deadline: float = 120.0  # seconds one request may spend being retried
    max_qps: Optional[float] = None  # None: no cap
    connect_timeout: Optional[float] = 10.0

    def validate(self) -> None:
        at_least("pool_size", self.pool_size, 0, strict=True)
        at_least("retry_deadline", self.retry_deadline, 0)
        at_least("max_qps", self.max_qps, 0, strict=True)
        at_least("connect_timeout", self.connect_timeout, 0, strict=True)


def build_configuration(options: ConnectionOptions) -> Any:
    """Return a ``kubernetes.client.Configuration`` (requires the kubernetes library)."""
    if not HAS_KUBERNETES:
        raise ConnectionFailed("the kubernetes Python library is required: %s" % KUBERNETES_IMPORT_ERROR)
    label = options.cluster_label()
    configuration = _k8s_client.Configuration()
    persist = bool(options.persist_config)
    try:
        if not options.skips_kubeconfig():
            if isinstance(options.kubeconfig, dict):
                _k8s_config.load_kube_config_from_dict(
                    options.kubeconfig, context=options.context,
                    client_configuration=configuration, persist_config=persist)
            elif options.kubeconfig or options.context:
                _k8s_config.load_kube_config(
                    config_file=options.kubeconfig, context=options.context,
                    client_configuration=configuration, persist_config=persist)
            else:
                try:
                    _k8s_config.load_incluster_config(client_configuration=configuration)
                except _k8s_config.ConfigException:
                    _k8s_config.load_kube_config(client_configuration=configuration, persist_config=persist)
    except Exception as exc:  # ConfigException, IOError, yaml errors
        path = _kubeconfig_path(options)
        # the file is named once: by the cluster label when it names the cluster, else here
        where = " %s" % path if path and path not in label else ""
        raise ConnectionFailed("cannot load kubeconfig%s: %s" % (where, kubeconfig_problem(exc, path)),
                               cluster=label) from exc
    if options.host:
        configuration.host = options.host.rstrip("/")
    if options.api_key:
        configuration.api_key = {"authorization": "Bearer %s" % options.api_key}
        configuration.api_key_prefix = {}
        configuration.refresh_api_key_hook = None
    if options.username:
        configuration.username = options.username
    if options.password:
        configuration.password = options.password
    if options.validate_certs is not None:
        configuration.verify_ssl = options.validate_certs
    if options.ca_cert:
        configuration.ssl_ca_cert = options.ca_cert
    if options.client_cert:
        configuration.cert_file = options.client_cert
    if options.client_key:
        configuration.key_file = options.client_key
    if options.proxy:
        configuration.proxy = options.proxy
    if options.no_proxy:
        configuration.no_proxy = options.no_proxy
    if options.proxy_headers:
        from urllib3.util import make_headers

        ph = options.proxy_headers
        configuration.proxy_headers = make_headers(
            proxy_basic_auth=ph.get("proxy_basic_auth"),
            basic_auth=ph.get("basic_auth"),
            user_agent=ph.get("user_agent"),
        )
    if not configuration.host:
        raise BadInputError("no apiserver host: set host or a kubeconfig", cluster=label)
    return configuration


def _kubeconfig_path(options: ConnectionOptions) -> Optional[str]:
    """The kubeconfig file(s) the loader read: the option, else KUBECONFIG or ~/.kube/config; None for a dict."""
    if isinstance(options.kubeconfig, dict):
        return None
    if options.kubeconfig:
        return str(options.kubeconfig)
    return str(getattr(_k8s_config, "KUBE_CONFIG_DEFAULT_LOCATION", "~/.kube/config"))


_NO_CONTEXT = re.compile(r"Expected object with name (.+?) in \S*contexts list")
_YAML_AT = re.compile(r"line (\d+), column (\d+)")


def kubeconfig_problem(exc: BaseException, path: Optional[str]) -> str:
    """What is wrong with a kubeconfig the loader refused, in one short clause without its path (the message
    names the file once). The loader says "Invalid kube-config file. No configuration found." for a file that
    does not exist, and names the file again in its own words. Its messages name files and contexts, never
    token values; a message this does not know is kept, cut at 300 characters."""
    text = " ".join(str(exc).split())
    files = [p for p in (path or "").split(os.pathsep) if p]
    if files and not any(os.path.exists(os.path.expanduser(p)) for p in files):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "a directory, not a file"
    if isinstance(exc, PermissionError):
        return "not readable (permission denied)"
    missing = _NO_CONTEXT.search(text)
    if missing:
        return "it has no context %r (kubectl config get-contexts lists them)" % missing.group(1)
    if "Expected key current-context" in text:
        return "it has no current-context: set context"
    if "file is empty" in text:
        return "the file is empty"
    at = _YAML_AT.search(text)
    if at and type(exc).__module__.startswith("yaml"):
        return "not YAML (line %s, column %s)" % at.groups()
    return "%s: %s" % (type(exc).__name__, text[:300])


def _auth_header_fn(configuration: Any) -> Callable[[], Optional[str]]:
    def auth_header() -> Optional[str]:
        # auth_settings() runs refresh_api_key_hook (exec plugins / OIDC refresh) when set.
        settings = configuration.auth_settings()
        bearer = settings.get("BearerToken")
        if bearer and bearer.get("value"):
            value = str(bearer["value"])
            return value if " " in value else "Bearer %s" % value
        if configuration.username and configuration.password:
            raw = ("%s:%s" % (configuration.username, configuration.password)).encode("utf-8")
            return "Basic %s" % base64.b64encode(raw).decode("ascii")
        return None

    return auth_header


def _current_context_label(options: ConnectionOptions, label: str) -> str:
    """Name the cluster by its kubeconfig's current context when no context was given: errors must say
    which cluster (the file path alone does not)."""
    if options.context or options.skips_kubeconfig() or not isinstance(options.kubeconfig, str) or not HAS_KUBERNETES:
        return label
    try:
        _contexts, active = _k8s_config.list_kube_config_contexts(config_file=options.kubeconfig)
        return "%s (current context of %s)" % (active["name"], options.kubeconfig)
    except Exception:  # unreadable file: build_configuration reports it
        return label


def connect(
    options: ConnectionOptions,
    *,
    cluster_label: Optional[str] = None,
    pool_size: int = 10,
    retry_deadline: float = 120.0,
    max_qps: Optional[float] = None,
    timeout: float = 60.0,
    connect_timeout: Optional[float] = 10.0,
) -> HttpTransport:
    """Build ONE pooled transport for a cluster. ``pool_size`` should be >= worker threads."""
    TransportOptions(pool_size, retry_deadline, max_qps, connect_timeout).validate()
    label = cluster_label or options.cluster_label()
    if label == options.cluster_label():
        label = _current_context_label(options, label)
    configuration = build_configuration(options)
    configuration.connection_pool_maxsize = max(pool_size, 1)
    try:
        api_client = _k8s_client.ApiClient(configuration)
        pool = api_client.rest_client.pool_manager
    except Exception as exc:
        raise ConnectionFailed("cannot build HTTP client", cluster=label,
                               api_message="%s: %s" % (type(exc).__name__, str(exc)[:300])) from exc
    from urllib3._collections import HTTPHeaderDict

    headers = HTTPHeaderDict()
    headers["User-Agent"] = "crdops.migration"
    if options.impersonate_user:
        headers["Impersonate-User"] = options.impersonate_user
    for group in options.impersonate_groups or ():
        headers.add("Impersonate-Group", group)

    def _close() -> None:
        try:
            api_client.close()
        except Exception:  # pragma: no cover - best effort
            pass

    return HttpTransport(
        pool,
        configuration.host,
        cluster_label=label,
        headers=headers,
        auth_header=_auth_header_fn(configuration),
        retry=RetryPolicy(deadline=retry_deadline),
        rate_limiter=RateLimiter(max_qps) if max_qps else None,
        timeout=timeout,
        connect_timeout=connect_timeout,
        on_close=_close,
    )

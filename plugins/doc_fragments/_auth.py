# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release

from __future__ import annotations


class ModuleDocFragment:

    # Same options, aliases and environment variables as kubernetes.core.k8s_auth_options; the client they
    # configure is the kubernetes library's, so its range is stated here once for every module (ansible-doc adds
    # it to a module's own requirements).
    DOCUMENTATION = r'''
requirements:
  - kubernetes >= 24.2.0, < 38 (CI tests both ends, 24.2.0 and 37.0.2)
options:
  kubeconfig:
    description:
      - Path to an existing Kubernetes config file, or the kubeconfig content as a dictionary.
      - Several files may be given separated by V(:) (V(;) on Windows), like E(KUBECONFIG).
      - If not given and no other connection options are set, the in-cluster configuration is tried,
        then C(~/.kube/config).
      - Secret values of a dictionary (tokens, passwords, key and certificate data) are masked in output.
      - Can also be set with the E(K8S_AUTH_KUBECONFIG) environment variable.
      - "Pitfall: when O(host) and O(api_key) are both set (for example by E(K8S_AUTH_HOST) and
        E(K8S_AUTH_API_KEY) from an AWX bearer-token credential), the kubeconfig and O(context) are ignored."
    type: raw
  context:
    description:
      - The name of a context found in the config file.
      - Can also be set with the E(K8S_AUTH_CONTEXT) environment variable.
    type: str
  host:
    description:
      - Provide a URL for accessing the API. Can also be set with the E(K8S_AUTH_HOST) environment variable.
    type: str
  api_key:
    description:
      - Token used to authenticate with the API. Can also be set with the E(K8S_AUTH_API_KEY) environment variable.
    type: str
  username:
    description:
      - Provide a username for authenticating with the API (basic auth).
      - Can also be set with the E(K8S_AUTH_USERNAME) environment variable.
    type: str
  password:
    description:
      - Provide a password for authenticating with the API (basic auth).
      - Can also be set with the E(K8S_AUTH_PASSWORD) environment variable.
    type: str
  validate_certs:
    description:
      - Whether or not to verify the API server's SSL certificates.
      - Can also be set with the E(K8S_AUTH_VALIDATE_CERTS) or E(K8S_AUTH_VERIFY_SSL) environment variable.
    type: bool
    aliases: [ verify_ssl ]
  ca_cert:
    description:
      - Path to a CA certificate used to authenticate with the API.
      - Can also be set with the E(K8S_AUTH_CA_CERT) or E(K8S_AUTH_SSL_CA_CERT) environment variable.
    type: path
    aliases: [ ssl_ca_cert ]
  client_cert:
    description:
      - Path to a certificate used to authenticate with the API.
      - Can also be set with the E(K8S_AUTH_CLIENT_CERT) or E(K8S_AUTH_CERT_FILE) environment variable.
    type: path
    aliases: [ cert_file ]
  client_key:
    description:
      - Path to a key file used to authenticate with the API.
      - Can also be set with the E(K8S_AUTH_CLIENT_KEY) or E(K8S_AUTH_KEY_FILE) environment variable.
    type: path
    aliases: [ key_file ]
  proxy:
    description:
      - The URL of an HTTP proxy to use for the connection. Can also be set with the E(K8S_AUTH_PROXY) environment variable.
      - E(HTTP_PROXY) and E(HTTPS_PROXY) are not read.
    type: str
  no_proxy:
    description:
      - Comma separated list of hosts/domains/IPs/CIDRs that should not go through the proxy.
      - Can also be set with the E(K8S_AUTH_NO_PROXY) environment variable.
    type: str
  proxy_headers:
    description:
      - Headers for the proxy.
    type: dict
    suboptions:
      proxy_basic_auth:
        description:
          - Colon-separated username:password for proxy basic authentication.
          - Can also be set with the E(K8S_AUTH_PROXY_HEADERS_PROXY_BASIC_AUTH) environment variable.
        type: str
      basic_auth:
        description:
          - Colon-separated username:password for basic authentication.
          - Can also be set with the E(K8S_AUTH_PROXY_HEADERS_BASIC_AUTH) environment variable.
        type: str
      user_agent:
        description:
          - String representing the user-agent.
          - Can also be set with the E(K8S_AUTH_PROXY_HEADERS_USER_AGENT) environment variable.
        type: str
  persist_config:
    description:
      - Whether or not to save the kube config refresh tokens.
      - Can also be set with the E(K8S_AUTH_PERSIST_CONFIG) environment variable.
    type: bool
  impersonate_user:
    description:
      - Username to impersonate for the operation.
      - Can also be set with the E(K8S_AUTH_IMPERSONATE_USER) environment variable.
    type: str
  impersonate_groups:
    description:
      - Group(s) to impersonate for the operation.
      - Can also be set with the E(K8S_AUTH_IMPERSONATE_GROUPS) environment variable (comma separated).
    type: list
    elements: str
  connect_timeout:
    description:
      - Seconds to wait for an apiserver that has not answered yet, before the module fails naming the
        cluster. Bounds each TCP/TLS connect and the retries of the first request, so an unreachable
        cluster (wrong address, closed port, firewall) fails in about this time instead of after the retry deadline (C(retry_deadline) where a module has one).
      - Once the cluster has answered, connection losses are retried until the module's retry deadline
        (an apiserver restart during a run is ridden out); this option does not shorten that.
      - Not a C(kubernetes.core) option. Can also be set with the E(CRDOPS_CONNECT_TIMEOUT) environment variable.
    type: float
    default: 10
notes:
  - Requires the C(kubernetes) Python library on the host that runs the module.
  - Connection options, aliases and environment variables are the same as in M(kubernetes.core.k8s), and
    the action group C(group/crdops.migration.crdops) includes kubernetes.core's group, so one C(module_defaults)
    block for C(group/crdops.migration.crdops) configures the modules of both collections. Not the other way
    round - only kubernetes.core can add modules to C(group/k8s) (C(group/kubernetes.core.k8s)), so a block for
    it does not reach this module.
'''

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    # How to reach etcd's client port (the same names as crd_storage_verify). etcd_url itself is documented
    # by each module: required there, optional where etcd only adds a check.
    DOCUMENTATION = r'''
options:
  etcd_prefix:
    description: The apiserver's C(--etcd-prefix).
    type: str
    default: /registry
  etcd_ca_cert:
    description: CA bundle that signed etcd's serving certificate (for V(https://) URLs).
    type: path
  etcd_client_cert:
    description: Client certificate etcd accepts (for example the apiserver's etcd client certificate).
    type: path
  etcd_client_key:
    description: Key of O(etcd_client_cert).
    type: path
'''

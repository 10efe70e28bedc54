"""The collection's engine in this process, against a real control plane (to wrap its transport and inject a
fault on cue around a real request). The modules are still what the other tests run."""
from __future__ import annotations

import json
import sys

from tests.integration.modrun import COLLECTIONS_PATH

if COLLECTIONS_PATH not in sys.path:
    sys.path.insert(0, COLLECTIONS_PATH)
    _ns = sys.modules.get("ansible_collections")
    if _ns is not None and hasattr(_ns, "__path__") and f"{COLLECTIONS_PATH}/ansible_collections" not in _ns.__path__:
        _ns.__path__.append(f"{COLLECTIONS_PATH}/ansible_collections")

from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube import connection  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore.object_write import is_test_failure  # noqa: E402
from ansible_collections.crdops.migration.plugins.module_utils._crdops.kube.transport import ApiResponse  # noqa: E402


def transport_for(cluster, pool_size: int = 8):
    options = connection.ConnectionOptions(kubeconfig=str(cluster.kubeconfig), context=cluster.contexts()[0])
    return connection.connect(options, pool_size=pool_size, retry_deadline=20)


def is_test_failure_of(status: int, body) -> bool:
    data = json.dumps(body).encode() if isinstance(body, dict) else str(body).encode()
    return is_test_failure(ApiResponse(status, {}, data))

#!/usr/bin/python
# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
module: crd_storage_migrate
short_description: Re-store every object of the selected CRDs at the current storage version
version_added: 1.0.0
author:
  - crdops.migration contributors (@crdops)
requirements:
  - kubernetes >= 24.2.0 (tested with 37.0.2)
  - orjson (optional, faster JSON decoding on the hot path)
description:
  - Lists the objects of each selected CRD (metadata only, in pages) and sends each one an empty
    JSON merge patch at the storage version. The apiserver re-encodes an object only when its stored
    bytes differ, so already migrated objects are not written and keep their resourceVersion; this
    gives an exact count of rewritten and unchanged objects. Object content is never sent.
  - Page N is patched by a bounded worker pool while page N+1 is listed; memory does not grow with
    the number of objects.
  - Throttling (429/503) honours C(Retry-After); connection errors and 500/502/504 are retried with
    exponential backoff until O(retry_deadline).
  - The pass over a CRD stops at the first conversion-webhook failure, on 401/403 and when the
    connection is lost past O(retry_deadline). For CRDs with C(conversion.strategy=Webhook), one object of
    every page is read at every served version before the page is written (conversion probe).
    Other per-object failures (for example an admission webhook rejecting the write) are counted and
    reported; the pass continues unless O(max_failures) is exceeded.
  - After a complete pass with zero failures, a migration record is written as the annotation
    C(migration.crdops.io/storage-migration) on the CRD, provided its storage version and generation are
    unchanged since the pass started. M(crdops.migration.crd_stored_versions_trim) requires this record.
  - A checkpoint annotation (C(migration.crdops.io/storage-migration-checkpoint)) is written after each
    clean page so that a rerun resumes where the last one stopped. It is ignored when stale and removed
    when the record is written.
  - CRDs whose C(status.storedVersions) already equals the storage version, or that carry a valid record,
    are skipped unless O(force=true).
  - The module fails when any pass is incomplete or has failures; the failure result holds every CRD's counts.
extends_documentation_fragment:
  - crdops.migration._auth
  - crdops.migration._selection
  - crdops.migration._attributes
  - crdops.migration._attributes.actiongroup_crdops
attributes:
  check_mode:
    support: partial
    details: Plan only. Lists and counts the objects (and probes conversion webhooks), writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details: A second run finds a valid record and skips the CRD.
options:
  page_size:
    description: Objects per LIST page. Must be greater than 0.
    type: int
    default: 500
  workers:
    description: Concurrent no-op writes per cluster. Must be greater than 0. The HTTP connection pool is sized to match.
    type: int
    default: 8
  apiserver_endpoints:
    description:
      - Every apiserver of an HA control plane, as C(https://host:port) URLs, reached with the same credentials.
      - Before each pass the module waits until all of them, and the one it talks to, report the CRD's current
        storage version in their discovery documents (C(storageVersionHash)). Right after a storage flip an
        apiserver whose informer lags still writes the old version (kubernetes#130235); this is the HA barrier.
    type: list
    elements: str
    default: []
  barrier_timeout:
    description: Seconds to wait for the HA barrier before failing without writing anything.
    type: float
    default: 60
  barrier_settle:
    description: Extra seconds to wait once every apiserver reports the storage version.
    type: float
    default: 0
  preflight_sample:
    description:
      - Check mode only. The no-op write is sent with C(dryRun=All) to the first this many objects of each CRD;
        the ones admission (webhooks, ValidatingAdmissionPolicies) or conversion would refuse are returned in
        RV(crds[].predicted_rejections). V(0) sends no dry-run.
    type: int
    default: 5
  max_qps:
    description: Cap on requests per second (token bucket shared by all workers). Unset means no cap.
    type: float
  retry_deadline:
    description: Seconds one request may spend being retried (throttling, connection errors, 500/502/504).
    type: float
    default: 120
  max_failures:
    description:
      - Stop the pass over a CRD once more than this many objects failed. V(0) stops at the first failure.
      - Unset means never stop for per-object failures (they are still reported and fail the task).
    type: int
  progress_file:
    description:
      - Path of a JSON file rewritten (atomically) after every page, for polling an C(async) task.
    type: path
  write_record:
    description: Write the migration record after a complete pass with zero failures.
    type: bool
    default: true
  resume:
    description: Use and maintain the resume checkpoint annotation.
    type: bool
    default: true
  force:
    description: Run the pass even when the CRD needs no migration or already carries a valid record.
    type: bool
    default: false
seealso:
  - module: crdops.migration.crd_storage_info
  - module: crdops.migration.crd_stored_versions_trim
  - module: kubernetes.core.k8s
'''

EXAMPLES = r'''
- name: Re-store all objects of the Cluster API CRDs
  crdops.migration.crd_storage_migrate:
    context: prod-eu-1
    group: cluster.x-k8s.io
    workers: 16
    progress_file: /tmp/crd-migrate-prod-eu-1.json
  async: 7200
  poll: 30

- name: Plan only (counts, no writes)
  crdops.migration.crd_storage_migrate:
    names: [crontabs.stable.example.com]
  check_mode: true
'''

RETURN = r'''
crds:
  description: One result per selected CRD.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: CRD name., type: str, returned: always}
    storage_version: {description: Storage version of the pass., type: str, returned: always}
    stored_versions: {description: C(status.storedVersions) when the pass started., type: list, elements: str, returned: always}
    skipped: {description: Why the CRD was not migrated (null when it was)., type: str, returned: always}
    listed: {description: Objects listed., type: int, returned: always}
    rewritten: {description: Objects whose resourceVersion changed (re-encoded)., type: int, returned: always}
    unchanged: {description: Objects already stored at the storage version., type: int, returned: always}
    gone: {description: Objects deleted between list and write., type: int, returned: always}
    failed: {description: Objects whose write failed., type: int, returned: always}
    skipped_by_checkpoint: {description: Objects skipped because a checkpoint shows them done., type: int, returned: always}
    not_attempted: {description: Objects not written because the pass stopped., type: int, returned: always}
    throttled: {description: Throttled responses (429/503)., type: int, returned: always}
    relists: {description: Lists restarted after 410 Gone., type: int, returned: always}
    first_failures:
      description: The first 20 failures (namespace, name, status, reason, kind, message).
      type: list
      elements: dict
      returned: always
    duration_s: {description: Seconds spent., type: float, returned: always}
    objects_per_s: {description: Objects processed per second., type: float, returned: always}
    complete: {description: Every object was processed (the pass was not stopped)., type: bool, returned: always}
    aborted_reason: {description: "Why the pass stopped, naming cluster, CRD, object and the API message.", type: str, returned: always}
    record: {description: The migration record written., type: dict, returned: always}
    record_written: {description: The record annotation was written., type: bool, returned: always}
    record_error: {description: Why the record could not be written., type: str, returned: always}
    predicted_rejections:
      description:
        - Check mode. Sampled objects (O(preflight_sample)) whose C(dryRun=All) no-op write the API refused,
          with C(namespace), C(name), HTTP C(status), error C(kind) and the API's C(message).
      type: list
      elements: dict
      returned: always
    barrier:
      description: The HA barrier before the pass (every endpoint and the version it reported, seconds waited); null in check mode.
      type: dict
      returned: when a pass ran
totals:
  description: Sums over all CRDs (listed, rewritten, unchanged, gone, failed, throttled).
  returned: always
  type: dict
  sample: {listed: 1200, rewritten: 800, unchanged: 400, gone: 0, failed: 0, throttled: 0}
cluster:
  description: Secret-free name of the cluster.
  returned: always
  type: str
'''

import json
import os
import tempfile
import time

from ansible_collections.crdops.migration.plugins.module_utils._crdops_glue import CrdOpsModule, argument_spec
from ansible_collections.crdops.migration.plugins.module_utils._crdops.errors import CrdOpsError
from ansible_collections.crdops.migration.plugins.module_utils._crdops.record import validate_record
from ansible_collections.crdops.migration.plugins.module_utils._crdops.barrier import wait_for_storage_version
from ansible_collections.crdops.migration.plugins.module_utils._crdops.restore import (
    CrdResult, RestoreOptions, check_migratable, migrate_crd)
from ansible_collections.crdops.migration.plugins.module_utils._crdops.selection import select_crds

TOTAL_KEYS = ("listed", "rewritten", "unchanged", "gone", "failed", "throttled")


def write_progress(path, data):
    fd, tmp = tempfile.mkstemp(prefix=".crdops-progress-", dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def problem_of(entry):
    if entry.get("aborted_reason"):
        return "[CRD %s] pass stopped: %s" % (entry["name"], entry["aborted_reason"])
    if entry.get("failed"):
        first = (entry.get("first_failures") or [{}])[0]
        obj = "/".join(x for x in (first.get("namespace"), first.get("name")) if x)
        return "[CRD %s] %d objects failed; first: %s (HTTP %s): %s" % (
            entry["name"], entry["failed"], obj, first.get("status"), first.get("message"))
    if entry.get("record_error"):
        return entry["record_error"]
    return None


def main():
    m = CrdOpsModule(argument_spec(dict(
        page_size=dict(type="int", default=500),
        workers=dict(type="int", default=8),
        max_qps=dict(type="float"),
        retry_deadline=dict(type="float", default=120),
        max_failures=dict(type="int"),
        progress_file=dict(type="path"),
        write_record=dict(type="bool", default=True),
        resume=dict(type="bool", default=True),
        force=dict(type="bool", default=False),
        apiserver_endpoints=dict(type="list", elements="str", default=[]),
        barrier_timeout=dict(type="float", default=60),
        barrier_settle=dict(type="float", default=0),
        preflight_sample=dict(type="int", default=5),
    )), supports_check_mode=True)
    p = m.params
    result = dict(changed=False, crds=[], totals=dict((k, 0) for k in TOTAL_KEYS))
    if p["max_qps"] is not None and p["max_qps"] <= 0:
        m.module.fail_json(msg="max_qps must be > 0, got %s" % p["max_qps"], **result)
    if p["retry_deadline"] < 0:
        m.module.fail_json(msg="retry_deadline must be >= 0, got %s" % p["retry_deadline"], **result)
    options = RestoreOptions(page_size=p["page_size"], workers=p["workers"], max_failures=p["max_failures"],
                             check_mode=m.check_mode, write_record=p["write_record"], use_checkpoint=p["resume"],
                             preflight_sample=max(p["preflight_sample"], 0))
    try:
        options.validate()
        selection = m.selection()
        selection.validate()
    except CrdOpsError as exc:
        m.fail(exc, **result)
    transport = m.connect(pool_size=p["workers"] + 2, retry_deadline=p["retry_deadline"], max_qps=p["max_qps"])
    cluster = transport.cluster_label
    # every apiserver must write the new storage version before the pass (HA barrier)
    barrier_transports = dict([(transport.base_url, transport)] + [
        (ep.rstrip("/"), transport.for_endpoint(ep)) for ep in p["apiserver_endpoints"]])
    result["cluster"] = cluster
    progress_state = dict(cluster=cluster, crds_total=0, crds_done=0, current=None, check_mode=m.check_mode)

    def progress(info=None):
        if p["progress_file"]:
            if info is not None:
                progress_state["current"] = info
            progress_state["updated_at"] = time.time()
            try:
                write_progress(p["progress_file"], progress_state)
            except OSError as exc:
                m.module.warn("cannot write progress_file %s: %s" % (p["progress_file"], exc))

    try:
        crds = select_crds(transport, selection)
        progress_state["crds_total"] = len(crds)
        for crd in crds:  # every selected CRD is checked before the first write
            check_migratable(crd, cluster)
        for crd in crds:
            skip = None
            had_valid_record = validate_record(crd).ok
            if not p["force"]:
                if not crd.needs_migration:
                    skip = "status.storedVersions is already [%s]" % crd.storage_version
                elif had_valid_record:
                    skip = "a valid migration record exists for storage version %s" % crd.storage_version
            if skip:
                entry = CrdResult(crd=crd.name, storage_version=crd.storage_version,
                                  stored_versions=list(crd.stored_versions), complete=True).to_dict()
            else:
                barrier = None
                if not m.check_mode:
                    barrier = wait_for_storage_version(barrier_transports, crd, p["barrier_timeout"],
                                                       p["barrier_settle"]).to_dict()
                entry = migrate_crd(transport, crd, options, progress=progress).to_dict()
                entry["barrier"] = barrier
            entry["skipped"] = skip
            result["crds"].append(entry)
            for k in TOTAL_KEYS:
                result["totals"][k] += entry.get(k) or 0
            progress_state["crds_done"] += 1
            progress()
            # refreshing a record that was already valid (force=true) is not a change worth reporting
            first_record = entry["record_written"] and not had_valid_record
            if not skip and (entry["rewritten"] or first_record or m.check_mode):
                result["changed"] = True
    except CrdOpsError as exc:
        m.fail(exc.with_context(cluster=cluster), **result)
    finally:
        close = getattr(transport, "close", None)
        if callable(close):
            close()
    problems = [x for x in (problem_of(e) for e in result["crds"]) if x]
    if problems:
        msg = "cluster %s: %d CRD(s) not fully migrated: %s" % (cluster, len(problems), "; ".join(problems))
        m.module.fail_json(msg=msg, **result)
    m.module.exit_json(**result)


if __name__ == "__main__":
    main()

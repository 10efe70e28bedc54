"""The side-by-side storage-migration benchmark (entry point: benchmarks/run.py, `make bench`).

  engine       the engine's modules, imported from a snapshot of the collection (tools/collection_tree.py)
  data         fresh CRD groups seeded straight into etcd, proof read back from etcd, removal
  identities   ServiceAccounts and their tokens; only ours-gentle-admin (--admin) runs as the APF-exempt
               system:masters certificate
  children     the engine and the ceiling client, each in a fresh interpreter
  contenders   the local control plane and the clients that migrate (ceiling, ours, ansible, kubectl)
  intree       kube-controller-manager's storage version migrator
  role         the crd_upgrade role end to end, its re-store task and its phases, from one playbook run
  probe        a second client timing GET / LIST every 50 ms: what a migration costs everyone else
  suites       what one run measures (gentle, role, throughput, fleet)
  stats        medians over repetitions
  ratios       the performance targets (gentleness, throughput shares, fixed overhead, rerun) and the
               side-by-side ratios, from the rows of one run
  report       tables, and the generated block of docs/performance.md
  notes        what the numbers mean and which targets the run cannot show
  page         the generated block: set-up, contenders, ratios, tables
  cli          arguments and the order of the suites
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

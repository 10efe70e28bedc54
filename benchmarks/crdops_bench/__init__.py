"""The side-by-side storage-migration benchmark (entry point: benchmarks/run.py, `make bench`).

  engine       the engine's modules, imported from a snapshot of the collection (tools/collection_tree.py)
  data         fresh CRD groups seeded straight into etcd, proof read back from etcd, removal
  identities   ServiceAccounts and their tokens, and the APF-exempt admin certificate (system:masters) of the
               second observer and of ours-gentle-admin (--admin)
  children     the engine and the ceiling client, each in a fresh interpreter
  contenders   the local control plane and the clients that migrate (ceiling, ours, ansible, kubectl)
  intree       kube-controller-manager's storage version migrator
  role         the crd_upgrade role end to end, its re-store task and its phases, from one playbook run
  probe        an outside observer in a process of its own, timing GET / LIST every 50 ms: what a migration
               costs everyone else
  observers    the two observers side by side: a ServiceAccount under APF, the APF-exempt admin
  own_probe    our own probe's summary (the engine's pace.probe), read defensively
  server_gc    the apiserver's garbage collections, from its log (GODEBUG=gctrace=1), on the observers' clock
  host_stat    the machine's CPU counters once a second, above all the host's steal
  noise        where the observers' slowest GETs came from: collections, steal, neither (noise_sources.py)
  suites       what one run measures (gentle, calibrate, role, throughput, fleet)
  stats        medians over repetitions
  ratios       the performance targets (gentleness, throughput shares, fixed overhead, rerun) and the
               side-by-side ratios, from the rows of one run
  report       tables, and the generated block of docs/performance.md
  calibration  the calibrate suite's points: medians and spreads per contender
  calibration_checks  its pass/fail ratios (issue #39)
  calibration_page    its first-screen block of docs/performance.md and its per-repetition table
  svg_chart    its chart, objects/s against each observer's GET p99 multiple, as hand-written SVG
  notes        what the numbers mean and which targets the run cannot show
  page         the generated block: set-up, contenders, ratios, tables
  cli          arguments and the order of the suites
"""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

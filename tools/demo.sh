#!/usr/bin/env bash
# Demo: three local clusters (real kube-apiserver + etcd) with real CRDs (toolhive, gateway-api) whose
# objects are stored at an old version, then playbooks/fleet_upgrade.yml end to end:
# flip -> re-store -> verify (etcd) -> trim -> upgrade to the release that drops the old version.
#   tools/demo.sh [--down] [--per-kind N] [--dir DIR]
# Clusters stay up afterwards (stop them with `make down`), unless --down is given.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$REPO_ROOT"

DIR="${CRDOPS_CLUSTERS_DIR:-/tmp/crdops-clusters}"
PER_KIND=50
DOWN=0
while (( $# )); do
  case "$1" in
    --down) DOWN=1 ;;
    --per-kind) PER_KIND="$2"; shift ;;
    --dir) DIR="$2"; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

# the collection must be importable as crdops.migration (tools/setup.sh links it; do it here too)
python3 "$REPO_ROOT/tools/collection_tree.py" link "$ANSIBLE_COLLECTIONS_PATH" >/dev/null
# kubernetes.core comes with the `ansible` package in the venv: keep its collections on the path
SITE_COLLECTIONS="$(python -c 'import ansible_collections, os; print(os.path.dirname(list(ansible_collections.__path__)[-1]))' 2>/dev/null || true)"
export ANSIBLE_COLLECTIONS_PATH="$ANSIBLE_COLLECTIONS_PATH${SITE_COLLECTIONS:+:$SITE_COLLECTIONS}"
# the console as README sets it: per cluster the plan, progress, what changed and every error
export ANSIBLE_STDOUT_CALLBACK=crdops.migration.runbook

t0=$(date +%s)
if [[ -f "$DIR/state.json" ]]; then
  echo "== clusters already recorded in $DIR; stopping them first"
  python -m tests.controlplane down --dir "$DIR"
fi
rm -rf "$DIR"
echo "== starting 3 clusters in $DIR"
python -m tests.controlplane up --clusters 3 --dir "$DIR" >/dev/null
python -m tests.controlplane status --dir "$DIR"

echo "== seeding: toolhive v0.22.0 (v1alpha1) + gateway-api v0.6.2 ReferenceGrant (v1alpha2), $PER_KIND objects per kind"
python tests/data/fixtures/seed_fleet.py --dir "$DIR" --per-kind "$PER_KIND" \
  --inventory "$DIR/inventory.yml" --report-dir "$DIR/report"
t_seeded=$(date +%s)

echo "== plan: playbooks/fleet_audit.yml (check mode)"
ansible-playbook -i "$DIR/inventory.yml" playbooks/fleet_audit.yml --forks 3 -e crd_upgrade_report_dir="$DIR/audit" \
  > "$DIR/audit.log" 2>&1 || { tail -50 "$DIR/audit.log"; echo "audit failed (log: $DIR/audit.log)"; exit 1; }
# the plan of each cluster and the report's summary (the runbook callback indents a message's lines)
awk '/\| (Discover \| plan|Report \| summary):/ {on=1; print; next} on && /^    / {print; next} {on=0}' "$DIR/audit.log"
t_audit=$(date +%s)

# Production default waves are [1, '10%', '100%'] (playbooks/fleet_upgrade.yml); with 3 clusters that is
# one at a time. The demo runs the canary cluster first, then the other two in parallel (forks >= 3).
echo "== upgrade: playbooks/fleet_upgrade.yml (waves 1, 100%: canary cluster, then the other two in parallel)"
set +e   # a failed cluster still gets the report's path printed below; the exit code is the playbook's
ansible-playbook -i "$DIR/inventory.yml" playbooks/fleet_upgrade.yml --forks 3 \
  -e '{"crd_upgrade_waves": [1, "100%"]}' | tee "$DIR/upgrade.log"
rc=${PIPESTATUS[0]}
set -e
t_done=$(date +%s)

echo
echo "== report: $DIR/report/latest/fleet-report.md  (.json, .html)"
echo "== timings: clusters+seed $((t_seeded - t0))s, audit $((t_audit - t_seeded))s, upgrade $((t_done - t_audit))s, total $((t_done - t0))s"
if (( DOWN )); then
  python -m tests.controlplane down --dir "$DIR"
else
  echo "== clusters are still up (kubeconfig $DIR/kubeconfig); stop them with: make down"
fi
exit "$rc"

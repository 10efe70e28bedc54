#!/usr/bin/env bash
# Build the real Helm client the tests drive (helm.sh/helm/v4/cmd/helm from Go modules), cached by version.
# Tests that check how the collection treats Helm release Secrets install and upgrade charts with it, so the
# stored payload is Helm's own encoding, not a copy of it. A second call that finds the binary does nothing.
#
#   tests/clients/build_helm.sh              build (or find) it
#   tests/clients/build_helm.sh --print-path print where the binary is (or would be), build nothing
#
# Environment:
#   CRDOPS_CACHE     (default ~/.cache/crdops)  the binary lands in $CRDOPS_CACHE/bin/helm-<version>/helm
#   CRDOPS_HELM_BIN  a helm binary built or downloaded elsewhere: nothing is built.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=cached_build.sh
source "$HERE/cached_build.sh"

HELM_VERSION="v4.3.2"
CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"
OUT="$CACHE/bin/helm-$HELM_VERSION"
BIN="$OUT/helm"

cached_build_arguments CRDOPS_HELM_BIN "$@"
use_override CRDOPS_HELM_BIN helm
exit_if_cached "helm $HELM_VERSION: cached in $OUT"
wait_for_build_lock helm
exit_if_cached "helm $HELM_VERSION: built meanwhile, cached in $OUT"
require_go helm "CRDOPS_HELM_BIN to a helm $HELM_VERSION binary"

build_helm() {  # run by run_build, in a subshell
  # go install puts the binary in GOBIN; a private one per build, moved into place only when complete,
  # so a killed build never leaves a half-written helm where the next call would take it as cached.
  gobin="$(mktemp -d "$OUT/.gobin.XXXXXX")"
  trap 'rm -rf "$gobin"' EXIT
  export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" GOBIN="$gobin" CGO_ENABLED=0
  unset GOWORK
  # Outside a module go install resolves helm's own go.mod; cd away from any go.mod of ours.
  cd "$gobin"
  # helm prints its version from this variable; without it `helm version` reports the build's default.
  ldf="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
  timed go install -trimpath -ldflags "$ldf" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  mv "$gobin/helm" "$BIN"
}

LOG="$CACHE/logs/helm-$HELM_VERSION.log"
start=$(date +%s)
echo "helm $HELM_VERSION: building (log: $LOG)"
run_build "$LOG" helm "CRDOPS_HELM_BIN=<a helm $HELM_VERSION binary>" build_helm
echo "helm $HELM_VERSION ready in $(( $(date +%s) - start ))s: $OUT"

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

HELM_VERSION="v4.3.2"
CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"
OUT="$CACHE/bin/helm-$HELM_VERSION"
BIN="$OUT/helm"

if [[ "${1:-}" == "--print-path" ]]; then echo "${CRDOPS_HELM_BIN:-$BIN}"; exit 0; fi
[[ $# -eq 0 ]] || { echo "unknown argument: $1" >&2; exit 2; }

if [[ -n "${CRDOPS_HELM_BIN:-}" ]]; then
  [[ -x "$CRDOPS_HELM_BIN" ]] || { echo "CRDOPS_HELM_BIN=$CRDOPS_HELM_BIN is not an executable" >&2; exit 1; }
  echo "helm: using CRDOPS_HELM_BIN=$CRDOPS_HELM_BIN"
  exit 0
fi
if [[ -x "$BIN" ]]; then echo "helm $HELM_VERSION: cached in $OUT"; exit 0; fi

mkdir -p "$OUT" "$CACHE/logs"
# One build at a time per cache (two checkouts, or CI beside a session): the second waits, then finds the
# binary and does nothing.
exec 9>"$CACHE/helm-build.lock"
if ! flock -n 9; then
  echo "another helm build is running (lock $CACHE/helm-build.lock); waiting for it"
  flock 9
fi
if [[ -x "$BIN" ]]; then echo "helm $HELM_VERSION: built meanwhile, cached in $OUT"; exit 0; fi

if ! command -v go >/dev/null 2>&1; then
  echo "Go is not installed, so helm cannot be built; set CRDOPS_HELM_BIN to a helm $HELM_VERSION binary" >&2
  exit 1
fi

LOG="$CACHE/logs/helm-$HELM_VERSION.log"
start=$(date +%s)
echo "helm $HELM_VERSION: building (log: $LOG)"
(
  set -e
  # go install puts the binary in GOBIN; a private one per build, moved into place only when complete,
  # so a killed build never leaves a half-written helm where the next call would take it as cached.
  gobin="$(mktemp -d "$OUT/.gobin.XXXXXX")"
  trap 'rm -rf "$gobin"' EXIT
  export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" GOBIN="$gobin" CGO_ENABLED=0
  unset GOWORK
  # Outside a module go install resolves helm's own go.mod; cd away from any go.mod of ours.
  cd "$gobin"
  timer=()
  if [[ -x /usr/bin/time ]]; then timer=(/usr/bin/time -v); fi
  # helm prints its version from this variable; without it `helm version` reports the build's default.
  ldf="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
  "${timer[@]}" go install -trimpath -ldflags "$ldf" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  mv "$gobin/helm" "$BIN"
) >"$LOG" 2>&1 || {
  echo "building helm failed; the last lines of $LOG:" >&2
  tail -n 30 "$LOG" >&2 || true
  echo "Alternative: CRDOPS_HELM_BIN=<a helm $HELM_VERSION binary>" >&2
  exit 1
}
echo "helm $HELM_VERSION ready in $(( $(date +%s) - start ))s: $OUT"

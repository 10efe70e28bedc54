#!/usr/bin/env bash
# Build the real clients the tests, the demo and the benchmarks drive (tests/clients/go: kubectl from
# k8s.io/kubectl and Flux's apply library github.com/fluxcd/pkg/ssa, in one binary), cached by version.
# A second call that finds the binary does nothing.
#
#   tests/clients/build.sh              build (or find) it
#   tests/clients/build.sh --print-path print where the binary is (or would be), build nothing
#
# Environment:
#   CRDOPS_CACHE        (default ~/.cache/crdops)  the binary lands in $CRDOPS_CACHE/bin/clients-<key>/
#   CRDOPS_CLIENTS_BIN  a crdops-clients binary built elsewhere: nothing is built.
# The key names the kubectl and Flux ssa versions from go.mod and a digest of the Go sources, so a change
# of either builds a new binary beside the old one.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=cached_build.sh
source "$HERE/cached_build.sh"
SRC="$HERE/go"
CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"

version_of() { awk -v m="$1" '$1==m {print $2; exit}' "$SRC/go.mod"; }
KUBECTL_VERSION="$(version_of k8s.io/kubectl)"
SSA_VERSION="$(version_of github.com/fluxcd/pkg/ssa)"
DIGEST="$(cat "$SRC"/go.mod "$SRC"/go.sum "$SRC"/*.go | sha256sum | cut -c1-10)"
OUT="$CACHE/bin/clients-kubectl-$KUBECTL_VERSION-ssa-$SSA_VERSION-$DIGEST"
BIN="$OUT/crdops-clients"

cached_build_arguments CRDOPS_CLIENTS_BIN "$@"
use_override CRDOPS_CLIENTS_BIN clients
exit_if_cached "clients (kubectl $KUBECTL_VERSION, fluxcd/pkg/ssa $SSA_VERSION): cached in $OUT"
wait_for_build_lock clients
exit_if_cached "clients: built meanwhile, cached in $OUT"
require_go "the clients" "CRDOPS_CLIENTS_BIN to a crdops-clients binary"

build_clients() {  # run by run_build, in a subshell
  cd "$SRC"
  export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false -mod=readonly"
  unset GOWORK
  # kubectl prints its version from these variables: without them `kubectl version` says v0.0.0.
  minor="$(echo "$KUBECTL_VERSION" | cut -d. -f2)"
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=v1.${KUBECTL_VERSION#v0.} -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  CGO_ENABLED=0 timed go build -trimpath -ldflags "$ldf" -o "$BIN.tmp" .
  mv "$BIN.tmp" "$BIN"
  ln -sf crdops-clients "$OUT/kubectl"
}

LOG="$CACHE/logs/clients-$KUBECTL_VERSION-$SSA_VERSION-$DIGEST.log"
start=$(date +%s)
echo "clients (kubectl $KUBECTL_VERSION, fluxcd/pkg/ssa $SSA_VERSION): building (log: $LOG)"
run_build "$LOG" "the clients" "CRDOPS_CLIENTS_BIN=<a crdops-clients binary>" build_clients
echo "clients ready in $(( $(date +%s) - start ))s: $OUT"

#!/usr/bin/env bash
# Build the real control plane (kube-apiserver, optionally kube-controller-manager, etcd + etcdctl)
# from Go modules, cached by version.  A second call that finds the binaries does nothing.
#
#   tests/controlplane/build.sh                  # kube-apiserver + etcd
#   tests/controlplane/build.sh --with-kcm       # also kube-controller-manager (benchmark only)
#   tests/controlplane/build.sh --with-kubectl   # also kubectl from the same k8s.io/kubernetes version (benchmark only)
#
# Environment:
#   KUBE_VERSION   (default 1.37.2)     ETCD_VERSION (default 3.6.16)
#   CRDOPS_CACHE   (default ~/.cache/crdops)  binaries land in $CRDOPS_CACHE/bin/<component>-<version>/
#   KUBEBUILDER_ASSETS  a folder already holding kube-apiserver and etcd: nothing is built.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"
WITH_KCM=0
WITH_KUBECTL=0
for arg in "$@"; do
  case "$arg" in
    --with-kcm) WITH_KCM=1 ;;
    --with-kubectl) WITH_KUBECTL=1 ;;
    --print-dirs) echo "$CACHE/bin/kube-$KUBE_VERSION $CACHE/bin/etcd-$ETCD_VERSION"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  for b in kube-apiserver etcd; do
    [[ -x "$KUBEBUILDER_ASSETS/$b" ]] || { echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no executable $b" >&2; exit 1; }
  done
  echo "using prebuilt binaries from KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS"
  exit 0
fi

KUBE_OUT="$CACHE/bin/kube-$KUBE_VERSION"
ETCD_OUT="$CACHE/bin/etcd-$ETCD_VERSION"
LOGDIR="$CACHE/logs"
mkdir -p "$KUBE_OUT" "$ETCD_OUT" "$LOGDIR"
# Two setups at once (two checkouts, or CI beside a session) would run go mod tidy and go build in the same
# work dir and corrupt its go.mod (seen: "go.mod:14: unexpected input character '\x00'"): one build at a
# time; the second waits, then finds the binaries cached and does nothing.
exec 9>"$CACHE/build.lock"
if ! flock -n 9; then
  echo "another control-plane build is running (lock $CACHE/build.lock); waiting for it"
  flock 9
fi

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    cat >&2 <<MSG
Go is not installed, so the control plane cannot be built.
Alternatives:
  * point KUBEBUILDER_ASSETS at a folder holding kube-apiserver and etcd binaries, or
  * run against an existing cluster: CRDOPS_KUBECONFIG=/path/to/kubeconfig (see README).
MSG
    exit 1
  fi
}

fail_build() {
  local what="$1" log="$2"
  echo "building $what failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2 || true
  cat >&2 <<MSG
Full build log: $log
Alternatives: KUBEBUILDER_ASSETS=<folder with kube-apiserver and etcd>, or an existing cluster via
CRDOPS_KUBECONFIG=<kubeconfig> (see README).
MSG
  exit 1
}

export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false"
unset GOWORK

build_etcd() {
  [[ -x "$ETCD_OUT/etcd" && -x "$ETCD_OUT/etcdctl" ]] && { echo "etcd $ETCD_VERSION: cached in $ETCD_OUT"; return 0; }
  need_go
  local work="$CACHE/src/etcd-$ETCD_VERSION" log="$LOGDIR/etcd-$ETCD_VERSION.log"
  mkdir -p "$work"
  echo "etcd $ETCD_VERSION: building (log: $log)"
  (
    set -e
    cd "$work"
    printf 'module local/etcdbuild\n\ngo 1.25.0\n' > go.mod
    go mod edit -require="go.etcd.io/etcd/server/v3@v$ETCD_VERSION" -require="go.etcd.io/etcd/etcdctl/v3@v$ETCD_VERSION" \
      -tool=go.etcd.io/etcd/server/v3 -tool=go.etcd.io/etcd/etcdctl/v3
    go mod tidy
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ETCD_OUT/etcd.tmp" go.etcd.io/etcd/server/v3
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ETCD_OUT/etcdctl.tmp" go.etcd.io/etcd/etcdctl/v3
    mv "$ETCD_OUT/etcd.tmp" "$ETCD_OUT/etcd"; mv "$ETCD_OUT/etcdctl.tmp" "$ETCD_OUT/etcdctl"
  ) >"$log" 2>&1 || fail_build "etcd $ETCD_VERSION" "$log"
}

build_kube() {
  local targets=(kube-apiserver)
  [[ "$WITH_KCM" == 1 ]] && targets+=(kube-controller-manager)
  [[ "$WITH_KUBECTL" == 1 ]] && targets+=(kubectl)
  local missing=()
  for t in "${targets[@]}"; do [[ -x "$KUBE_OUT/$t" ]] || missing+=("$t"); done
  [[ ${#missing[@]} -eq 0 ]] && { echo "kubernetes $KUBE_VERSION: cached in $KUBE_OUT"; return 0; }
  need_go
  local work="$CACHE/src/kube-$KUBE_VERSION" log="$LOGDIR/kube-$KUBE_VERSION.log"
  mkdir -p "$work"
  echo "kubernetes $KUBE_VERSION: building ${missing[*]} (log: $log; 10-30 minutes cold on 2 cores)"
  (
    set -e
    cd "$work"
    # The kubernetes go.mod pins every staging module at the placeholder v0.0.0 and maps it to ./staging,
    # which Go ignores in a dependency: derive the replace list from the go.mod the proxy serves.
    local upstream
    upstream=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
    local go_line godebug_line minor
    go_line=$(awk '$1=="go"{print $2; exit}' "$upstream")
    godebug_line=$(awk '$1=="godebug"{print $2; exit}' "$upstream")
    minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
    {
      echo "module local/k8sbuild"
      echo
      echo "go $go_line"
      [[ -n "$godebug_line" ]] && echo "godebug $godebug_line"
      echo
      echo "tool ("
      echo "	k8s.io/kubernetes/cmd/kube-apiserver"
      echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
      [[ "$WITH_KUBECTL" == 1 ]] && echo "	k8s.io/kubernetes/cmd/kubectl"
      echo ")"
      echo
      echo "require k8s.io/kubernetes v$KUBE_VERSION"
      echo
      echo "replace ("
      awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$upstream" | sort -u | \
        while read -r m; do echo "	$m => $m v0.$minor.${KUBE_VERSION##*.}"; done
      echo ")"
    } > go.mod
    go mod tidy
    local ldf="-s -w" d
    d=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldf="$ldf -X $p.gitVersion=v$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=$d"
    done
    local pkgs=()
    for t in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$t"); done
    mkdir -p out
    # GNU time (when present) records wall time and peak memory of the build in the log
    local timer=()
    if [[ -x /usr/bin/time ]]; then timer=(/usr/bin/time -v); fi
    CGO_ENABLED=0 "${timer[@]}" go build -trimpath -ldflags "$ldf" -o out/ "${pkgs[@]}"
    for t in "${missing[@]}"; do mv "out/$t" "$KUBE_OUT/$t"; done
  ) >"$log" 2>&1 || fail_build "kubernetes $KUBE_VERSION" "$log"
}

start=$(date +%s)
build_etcd
build_kube
echo "control plane ready in $(( $(date +%s) - start ))s: $KUBE_OUT $ETCD_OUT"

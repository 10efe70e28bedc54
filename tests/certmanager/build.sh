#!/usr/bin/env bash
# Build cert-manager's own webhook (conversion, validation, mutation) from its Go module, cached by version.
# A second call that finds the binary does nothing.
#
#   tests/certmanager/build.sh            # build (or find) the webhook; prints its path on the last line
#   tests/certmanager/build.sh --print-path
#
# Environment:
#   CERT_MANAGER_VERSION (default 1.5.4)  the module github.com/jetstack/cert-manager at that version
#   CRDOPS_CACHE (default ~/.cache/crdops) the binary lands in $CRDOPS_CACHE/bin/cert-manager-<version>/webhook
set -euo pipefail

VERSION="${CERT_MANAGER_VERSION:-1.5.4}"
CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"
OUT="$CACHE/bin/cert-manager-$VERSION"
if [[ "${1:-}" == "--print-path" ]]; then echo "$OUT/webhook"; exit 0; fi
[[ -x "$OUT/webhook" ]] && { echo "cert-manager webhook $VERSION: cached"; echo "$OUT/webhook"; exit 0; }
command -v go >/dev/null 2>&1 || { echo "Go is not installed: cannot build cert-manager's webhook" >&2; exit 1; }

WORK="$CACHE/src/cert-manager-$VERSION"
LOG="$CACHE/logs/cert-manager-$VERSION.log"
mkdir -p "$OUT" "$WORK" "$CACHE/logs"
exec 9>"$CACHE/cert-manager-build.lock"
flock 9
[[ -x "$OUT/webhook" ]] && { echo "cert-manager webhook $VERSION: cached"; echo "$OUT/webhook"; exit 0; }

export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false"
unset GOWORK
MOD="github.com/jetstack/cert-manager"
echo "cert-manager webhook $VERSION: building (log: $LOG)"
start=$(date +%s)
(
  set -e
  cd "$WORK"
  # A dependency's replace directives are ignored by Go: copy cert-manager's own (its forks and pins) from the
  # go.mod the proxy serves, so the build resolves what cert-manager itself was built with.
  upstream=$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$MOD@v$VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  {
    echo "module local/certmanagerbuild"
    echo
    echo "go 1.16"
    echo
    echo "require $MOD v$VERSION"
    echo
    awk '/^replace /{sub(/^replace /,""); print "replace " $0}' "$upstream"
  } > go.mod
  printf 'package main\n\nimport _ "%s/cmd/webhook"\n' "$MOD" > tools.go
  sed -i 's/^package main$/\/\/go:build tools\n\npackage main/' tools.go
  GOFLAGS="$GOFLAGS -mod=mod" go get "$MOD/cmd/webhook@v$VERSION"
  timer=()
  if [[ -x /usr/bin/time ]]; then timer=(/usr/bin/time -v); fi
  CGO_ENABLED=0 "${timer[@]}" go build -mod=mod -trimpath -ldflags "-s -w" -o "$OUT/webhook.tmp" "$MOD/cmd/webhook"
  mv "$OUT/webhook.tmp" "$OUT/webhook"
) >"$LOG" 2>&1 || { echo "building cert-manager's webhook $VERSION failed; last lines of $LOG:" >&2; tail -n 30 "$LOG" >&2; exit 1; }
echo "cert-manager webhook $VERSION: built in $(( $(date +%s) - start ))s"
echo "$OUT/webhook"

#!/usr/bin/env bash
# Install everything the project needs on a fresh machine: Python venv with pinned dependencies,
# the control-plane binaries (built from Go modules, cached by version) and this collection,
# linked where Ansible finds it. Safe to rerun: cached pieces are skipped.
set -euo pipefail
# shellcheck source=env.sh source-path=SCRIPTDIR
source "$(dirname "$0")/env.sh"

if [[ ! -f "$VENV/.complete" ]]; then
  echo "== creating venv $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet -r "$REPO_ROOT/requirements.txt" -r "$REPO_ROOT/test-requirements.txt"
  touch "$VENV/.complete"   # only a finished install counts; an interrupted one is redone
else
  echo "== venv $VENV is ready"
fi

# HAProxy (Debian package) fronts the HA pair in tests/integration/test_ha_loadbalancer.py.
if ! command -v haproxy >/dev/null 2>&1 && [[ ! -x /usr/sbin/haproxy ]]; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing haproxy (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy >/dev/null; }
  else
    echo "error: haproxy is missing; install the Debian package as root: apt-get install -y haproxy" >&2
    exit 1
  fi
else
  echo "== haproxy is installed"
fi

echo "== control plane binaries"
"$REPO_ROOT/tests/controlplane/build.sh" "$@"

# The collection is found under ansible_collections/crdops/migration; link the working tree there.
mkdir -p "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/crdops"
ln -sfn "$REPO_ROOT" "$ANSIBLE_COLLECTIONS_PATH/ansible_collections/crdops/migration"
echo "== setup done (venv: $VENV)"

# shellcheck shell=bash
# Sourced by the tools/*.sh scripts: one Python venv per set of pinned requirements, outside the repo,
# so a second run (or CI on the same machine) reuses it.
CRDOPS_CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_req_hash=$(cat "$REPO_ROOT/requirements.txt" "$REPO_ROOT/test-requirements.txt" | sha256sum | cut -c1-12)
VENV="${CRDOPS_VENV:-$CRDOPS_CACHE/venv-$_req_hash}"
export CRDOPS_CACHE REPO_ROOT VENV
export PATH="$VENV/bin:$PATH"
# one collections dir per checkout, so two checkouts on one machine never swap each other's link
_repo_hash=$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)
export ANSIBLE_COLLECTIONS_PATH="$CRDOPS_CACHE/collections/$_repo_hash"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

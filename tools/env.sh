# shellcheck shell=bash
# Sourced by the tools/*.sh scripts. One Python venv per CI leg and set of pins, outside the repo, so a
# second run (or CI on the same machine) reuses it.
#   CRDOPS_LEG   ansible-core line to use: 2.21 (default, the main line) or 2.16 (the oldest claimed);
#                its pins are requirements/ansible-$CRDOPS_LEG*.txt, its Python the file's `# python:` line.
CRDOPS_CACHE="${CRDOPS_CACHE:-$HOME/.cache/crdops}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CRDOPS_LEG="${CRDOPS_LEG:-2.21}"
CRDOPS_LOCK="$REPO_ROOT/requirements/ansible-$CRDOPS_LEG.txt"
if [[ ! -f "$CRDOPS_LOCK" ]]; then
  echo "tools/env.sh: no pins for CRDOPS_LEG=$CRDOPS_LEG ($CRDOPS_LOCK)" >&2
  return 1 2>/dev/null || exit 1
fi
CRDOPS_PYVER="$(sed -n 's/^# python: *//p' "$CRDOPS_LOCK" | head -1)"
# The venv is keyed by everything that decides its content: the leg's pin files, requirements.txt and
# the interpreter version.
_req_hash=$( { cat "$REPO_ROOT/requirements.txt" "$REPO_ROOT/requirements/ansible-$CRDOPS_LEG".*txt; echo "$CRDOPS_PYVER"; } \
  | sha256sum | cut -c1-12)
VENV="${CRDOPS_VENV:-$CRDOPS_CACHE/venv-$CRDOPS_LEG-$_req_hash}"
# mypy and ruff (tests/sanity/typecheck.sh): a venv keyed by its own pin file, whatever the leg
CRDOPS_LINT_LOCK="$REPO_ROOT/requirements/lint-tools.txt"
CRDOPS_LINT_PYVER="$(sed -n 's/^# python: *//p' "$CRDOPS_LINT_LOCK" | head -1)"
LINT_VENV="$CRDOPS_CACHE/lint-tools-$(sha256sum <"$CRDOPS_LINT_LOCK" | cut -c1-12)"
export CRDOPS_CACHE REPO_ROOT CRDOPS_LEG CRDOPS_LOCK CRDOPS_PYVER VENV CRDOPS_LINT_LOCK CRDOPS_LINT_PYVER LINT_VENV
export VIRTUAL_ENV="$VENV"
export PATH="$VENV/bin:$PATH"
# one collections dir and one ANSIBLE_HOME per checkout, so two checkouts on one machine never swap each
# other's link; ANSIBLE_HOME keeps ansible-core, ansible-lint and molecule (ansible-compat installs the
# collection under it) out of ~/.ansible.
_repo_hash=$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)
export ANSIBLE_COLLECTIONS_PATH="$CRDOPS_CACHE/collections/$_repo_hash"
export ANSIBLE_HOME="$CRDOPS_CACHE/ansible-home/$_repo_hash"
# modules run on the controller (connection local) use remote_tmp, which defaults to ~/.ansible/tmp
export ANSIBLE_REMOTE_TEMP="$ANSIBLE_HOME/tmp"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

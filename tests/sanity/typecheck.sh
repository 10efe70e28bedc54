#!/usr/bin/env bash
# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The type and lint gate (settings: pyproject.toml). Offline. Runs both checks, then exits non-zero naming
# each one that failed:
#   mypy   mypy --strict on the engine, plugins/module_utils/_crdops/, for Python 3.10 (tests/config.yml)
#   ruff   pycodestyle, pyflakes and bugbear over plugins/, tests/ and benchmarks/; pyupgrade on the engine
#   action-groups  antsibull-nox's check (antsibull-nox.toml): every module is in the crdops action group of
#          meta/runtime.yml and carries its doc fragment, and no other module does
# The tools come from the lint-tools venv (tools/setup.sh, requirements/lint-tools.txt); mypy reads the
# engine's dependencies (urllib3, orjson, kubernetes) from the leg's venv, the versions the tests run with.
# Both caches live under $CRDOPS_CACHE, so the work tree is left as it was.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../tools/env.sh
source "$HERE/../../tools/env.sh" || exit 1
cd "$REPO_ROOT" || exit 1

for tool in mypy ruff nox; do
  [[ -x "$LINT_VENV/bin/$tool" ]] || { echo "TYPECHECK FAILED: no $tool in $LINT_VENV (run tools/setup.sh)" >&2; exit 1; }
done
[[ -x "$VENV/bin/python" ]] || { echo "TYPECHECK FAILED: no venv $VENV (run tools/setup.sh)" >&2; exit 1; }
cache="$CRDOPS_CACHE/lint-cache/$(printf '%s' "$REPO_ROOT" | sha256sum | cut -c1-12)"
mkdir -p "$cache"

failed=()
check() {  # check <name> <command...>
  local name="$1"; shift
  echo "=== [$name] $*"
  if "$@"; then echo "--- [$name] ok"; else echo "--- [$name] FAILED (rc=$?)" >&2; failed+=("$name"); fi
}

check mypy "$LINT_VENV/bin/mypy" --python-executable "$VENV/bin/python" --cache-dir "$cache/mypy"
check ruff "$LINT_VENV/bin/ruff" check --no-fix --cache-dir "$cache/ruff" plugins tests benchmarks
# --no-venv: the check is a script that runs in nox's own interpreter; --envdir keeps .nox out of the tree
check action-groups "$LINT_VENV/bin/nox" --no-venv --envdir "$cache/nox" --no-color -e extra-checks

if ((${#failed[@]})); then
  echo "TYPECHECK FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "TYPECHECK OK: mypy ruff action-groups"

#!/usr/bin/env bash
# Run every test of the project: unit + proof tests (pytest, real control plane), sanity, lint,
# changelog/docs checks and molecule scenarios. Exits non-zero if any part fails, and says which.
set -uo pipefail
# shellcheck source=env.sh source-path=SCRIPTDIR
source "$(dirname "$0")/env.sh"
cd "$REPO_ROOT" || exit 1

failed=()
run() {
  local name="$1"; shift
  echo; echo "=================== $name: $*"
  local t0
  t0=$(date +%s)
  if "$@"; then echo "=== $name passed in $(( $(date +%s) - t0 ))s"; else echo "=== $name FAILED"; failed+=("$name"); fi
}

# a green full run regenerates docs/reliability.md from the fault scenarios (tests/integration/conftest.py)
export CRDOPS_WRITE_DOCS=1
run pytest python -m pytest tests/unit tests/integration -p no:cacheprovider -q -rfE --timeout=900
unset CRDOPS_WRITE_DOCS
run sanity tests/sanity/run.sh
run lint tests/sanity/lint.sh
run molecule tools/molecule.sh

if (( ${#failed[@]} )); then
  echo; echo "FAILED parts: ${failed[*]}"; exit 1
fi
echo; echo "all test parts passed"

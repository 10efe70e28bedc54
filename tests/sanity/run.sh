#!/usr/bin/env bash
# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Run `ansible-test sanity` offline (PyPI reachable, ci-files.testing.ansible.com not).
#
# ansible-test needs the collection physically at .../ansible_collections/crdops/migration
# (a symlink fails: it resolves os.getcwd()), so the tree is COPIED, .git included
# (validate-modules compares against git, ansible/ansible#69953).
#
# Usage: tests/sanity/run.sh [extra ansible-test args]
# Env:   CRDOPS_SRC      tree to test (default: the repo holding this script)
#        SANITY_PYTHON   python version for --python (default: the venv's, e.g. 3.13 on the 2.21 leg)
#        SANITY_TESTS    space separated tests to run (default: every offline-capable test)
#        SANITY_KEEP=1   keep the temporary copy
#        CRDOPS_CACHE    ansible-test's HOME is $CRDOPS_CACHE/ansible-test-home
# Exit:  non-zero when any sanity test fails; the failing tests are named at the end.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="${CRDOPS_SRC:-$(cd "$HERE/../.." && pwd)}"
PY="${SANITY_PYTHON:-$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')}"

fail() { echo "SANITY FAILED: $*" >&2; exit 1; }

# ansible-test keeps its sanity venvs and its pip bootstrap under ~/.ansible/test (fixed paths, from HOME):
# give it a HOME inside the project's cache dir so a test run writes nothing to the real home
# (pip still reads /etc/pip.conf; the venvs are reused from there on the next run).
export HOME="${CRDOPS_CACHE:-$HOME/.cache/crdops}/ansible-test-home"
mkdir -p "$HOME"

command -v ansible-test >/dev/null || fail "ansible-test not on PATH"

command -v "python$PY" >/dev/null || fail "python$PY not on PATH"
[[ -f "$SRC/galaxy.yml" ]] || fail "no galaxy.yml in $SRC"
if compgen -G "$SRC/tests/sanity/ignore-*.txt" >/dev/null; then
  fail "ignore files are not allowed: $(echo "$SRC"/tests/sanity/ignore-*.txt)"
fi

# 1. Offline stand-in for the get-pip download (see get_pip_standin.py for why).
PIPVER="$(cd / && python3 -c 'import types; from ansible_test._internal.python_requirements import get_venv_packages as g; print(g(types.SimpleNamespace(version="'"$PY"'"))["pip"])')" \
  || fail "cannot read the pip version ansible-test bootstraps"
CACHED="$HOME/.ansible/test/cache/get_pip_${PIPVER//./_}.py"
mkdir -p "$(dirname "$CACHED")"
if [[ ! -f "$CACHED" ]] || grep -q "get_pip_standin" "$CACHED"; then
  cp "$HERE/get_pip_standin.py" "$CACHED"   # never overwrite a real get-pip.py someone cached
fi

# 2. Copy the tree (with .git) to <tmp>/ansible_collections/crdops/migration.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/crdops-sanity.XXXXXX")"
[[ "${SANITY_KEEP:-0}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT
DEST="$(python3 "$HERE/../../tools/collection_tree.py" copy "$WORK" --src "$SRC")" || fail "copy of $SRC to $WORK"
echo "sanity: testing a copy at $DEST (python $PY, pip bootstrap $CACHED)"

# 3. One ansible-test call; it runs every test and lists the failed ones at the end.
cd "$DEST" || fail "cd $DEST"
# Every sanity test this ansible-test offers a collection (the list differs between 2.16 and 2.21),
# except pslint (needs PowerShell; the collection ships none). shellcheck joins when its binary is installed.
DEFAULT_TESTS="$(ansible-test sanity --list-tests 2>/dev/null | grep -vx pslint | tr '\n' ' ')"
[[ -n "${DEFAULT_TESTS// }" ]] || fail "ansible-test sanity --list-tests listed nothing"
if ! command -v shellcheck >/dev/null 2>&1; then
  DEFAULT_TESTS="$(tr ' ' '\n' <<<"$DEFAULT_TESTS" | grep -vx shellcheck | tr '\n' ' ')"
  echo "WARNING: sanity test 'shellcheck' SKIPPED: no shellcheck binary (apt-get install shellcheck)" >&2
fi
TESTS="${SANITY_TESTS:-$DEFAULT_TESTS}"
args=()
for t in $TESTS; do args+=(--test "$t"); done
ansible-test sanity --python "$PY" --color no "${args[@]}" "$@" 2>&1 | tee "$WORK/sanity.log"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  echo "SANITY FAILED (ansible-test rc=$rc); failed tests:" >&2
  sed -n '/sanity test(s) listed below/,$p' "$WORK/sanity.log" >&2
  exit 1
fi
echo "SANITY OK: $(echo "$TESTS" | wc -w) tests passed"

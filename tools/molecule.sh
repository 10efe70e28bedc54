#!/usr/bin/env bash
# Run every molecule scenario (extensions/molecule/, collection mode) against real local clusters.
#   tools/molecule.sh [molecule test arguments, default: --all]
set -euo pipefail
source "$(dirname "$0")/env.sh"
cd "$REPO_ROOT"
# crdops.migration must resolve to this working tree: link it under a collections dir first in the path,
# and keep the collections that come with the `ansible` package (kubernetes.core) after it.
python3 "$REPO_ROOT/tools/collection_tree.py" link "$ANSIBLE_COLLECTIONS_PATH" >/dev/null
SITE_COLLECTIONS="$(python -c 'import ansible_collections, os; print(os.path.dirname(list(ansible_collections.__path__)[-1]))' 2>/dev/null || true)"
export ANSIBLE_COLLECTIONS_PATH="$ANSIBLE_COLLECTIONS_PATH${SITE_COLLECTIONS:+:$SITE_COLLECTIONS}"
if (( $# == 0 )); then set -- --all; fi
t0=$(date +%s)
molecule test "$@"
echo "molecule: passed in $(( $(date +%s) - t0 ))s"

#!/usr/bin/env bash
# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Quality gates that are not ansible-test sanity (that is tests/sanity/run.sh). Offline-safe.
# Runs every check, then exits non-zero naming each one that failed:
#   runtime-groups  every module in plugins/modules/ is in the crdops action group and vice versa
#   ansible-lint    ansible-lint --profile production --offline
#   changelog       antsibull-changelog lint
#   docs            antsibull-docs lint-collection-docs --plugin-docs .
#   build           ansible-galaxy collection build
#   install         ansible-galaxy collection install <tarball> into an empty path
#   ansible-doc     ansible-doc of every module (and role) from the INSTALLED copy
#   ee              ansible-builder introspect --sanitize (meta/execution-environment.yml)
#   docs-site       tools/docs.sh: the HTML docs site (antsibull-docs + Sphinx, offline) from the copy,
#                   with a page for every module, role and docs/*.md guide
# Env: CRDOPS_SRC (tree to check, default this repo), LINT_KEEP=1 keeps the temp dir.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="${CRDOPS_SRC:-$(cd "$HERE/../.." && pwd)}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/crdops-lint.XXXXXX")"
[[ "${LINT_KEEP:-0}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT

failed=()
check() {  # check <name> <command...>
  local name="$1"; shift
  echo "=== [$name] $*"
  if "$@"; then echo "--- [$name] ok"; else echo "--- [$name] FAILED (rc=$?)" >&2; failed+=("$name"); fi
}
die() { echo "LINT FAILED: $*" >&2; exit 1; }

for tool in ansible-lint antsibull-changelog antsibull-docs ansible-galaxy ansible-doc ansible-builder python3; do
  command -v "$tool" >/dev/null || die "$tool not on PATH (pip install -r test-requirements.txt)"
done

# Copy of the tree at <tmp>/src/ansible_collections/crdops/migration (not a symlink).
mkdir -p "$WORK/dist" "$WORK/installed"
COLL="$(python3 "$HERE/../../tools/collection_tree.py" copy "$WORK/src" --src "$SRC")" || die "copy of $SRC to $WORK/src"
cd "$COLL" || die "cd $COLL"

mapfile -t MODULES < <(find plugins/modules -maxdepth 1 -name '*.py' ! -name '__init__.py' -printf '%f\n' 2>/dev/null | sed 's/\.py$//' | sort)
mapfile -t ROLES < <(find roles -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort)
echo "modules: ${MODULES[*]:-(none)}"
echo "roles:   ${ROLES[*]:-(none)}"

runtime_groups() {
  python3 - "${MODULES[@]}" <<'PY'
import sys, yaml
mods = set(sys.argv[1:])
rt = yaml.safe_load(open("meta/runtime.yml"))
group = [e for e in rt.get("action_groups", {}).get("crdops", []) if isinstance(e, str)]
ok = True
for m in sorted(set(group) - mods):
    print(f"meta/runtime.yml action group crdops lists {m!r}, but plugins/modules/{m}.py does not exist"); ok = False
for m in sorted(mods - set(group)):
    print(f"plugins/modules/{m}.py is not in action group crdops (meta/runtime.yml)"); ok = False
sys.exit(0 if ok else 1)
PY
}
check runtime-groups runtime_groups

# The copy is the collection every tool below resolves (kubernetes.core: from the ansible package).
export ANSIBLE_COLLECTIONS_PATH="$WORK/src"

# ansible-lint from the copy; --offline: no Galaxy.
# XDG_CACHE_HOME: ansible-lint's own cache goes under the project cache dir, not ~/.cache/ansible-lint.
check ansible-lint env XDG_CACHE_HOME="${CRDOPS_CACHE:-$HOME/.cache/crdops}/xdg-cache" ansible-lint --profile production --offline --nocolor

check changelog antsibull-changelog lint

check docs antsibull-docs lint-collection-docs --plugin-docs .

build() { ansible-galaxy collection build --force --output-path "$WORK/dist" . ; }
check build build
TARBALL="$(find "$WORK/dist" -name "crdops-migration-*.tar.gz" | head -1)"

# Install into an empty path; --no-deps because Galaxy is unreachable (kubernetes.core is provided
# by the `ansible` package on sys.path).
install() {
  [[ -n "$TARBALL" ]] || { echo "no tarball built"; return 1; }
  ANSIBLE_COLLECTIONS_PATH="$WORK/installed" \
    ansible-galaxy collection install --no-deps --force -p "$WORK/installed" "$TARBALL"
}
check install install

docs_from_installed() {
  local inst="$WORK/installed/ansible_collections/crdops/migration" rc=0 m r out
  [[ -f "$inst/MANIFEST.json" ]] || { echo "no installed collection at $inst"; return 1; }
  # Only the installed copy is visible (plus the ansible package's collections on sys.path).
  export ANSIBLE_COLLECTIONS_PATH="$WORK/installed"
  out="$(ansible-galaxy collection list crdops.migration 2>&1)"
  grep -q "$WORK/installed" <<<"$out" || { echo "crdops.migration not resolved from $WORK/installed:"; echo "$out"; return 1; }
  for m in "${MODULES[@]}"; do
    if ansible-doc -t module "crdops.migration.$m" >"$WORK/doc-$m.txt" 2>&1 && grep -q "$inst" "$WORK/doc-$m.txt"; then
      echo "ansible-doc crdops.migration.$m: ok"
    else
      echo "ansible-doc crdops.migration.$m: FAILED"; cat "$WORK/doc-$m.txt"; rc=1
    fi
  done
  for r in "${ROLES[@]}"; do
    [[ -f "$inst/roles/$r/meta/argument_specs.yml" || -f "$inst/roles/$r/meta/argument_specs.yaml" ]] || { echo "role $r: no meta/argument_specs.yml"; rc=1; continue; }
    if ansible-doc -t role "crdops.migration.$r" >"$WORK/doc-role-$r.txt" 2>&1; then
      echo "ansible-doc -t role crdops.migration.$r: ok"
    else
      echo "ansible-doc -t role crdops.migration.$r: FAILED"; cat "$WORK/doc-role-$r.txt"; rc=1
    fi
  done
  # every filter the collection registers is public: each listed one renders, and the list is the documented set
  local listed documented f
  # the list from stdout alone: a library's warning on stderr (cryptography's DSA deprecation) is not a filter name
  listed="$(ansible-doc -t filter -l crdops.migration 2>"$WORK/filter-list.err" | awk '{print $1}' | sed 's/^crdops\.migration\.//' | sort)"
  documented="$(cd "$inst/plugins/filter" && ls -- *.yml | sed 's/\.yml$//' | sort)"
  [[ "$listed" == "$documented" ]] || { echo "ansible-doc -t filter -l lists:"; echo "$listed"; echo "documented:"; echo "$documented"
                                        echo "its stderr:"; cat "$WORK/filter-list.err"; rc=1; }
  for f in $documented; do
    if ansible-doc -t filter "crdops.migration.$f" >"$WORK/doc-filter-$f.txt" 2>&1 && grep -q "$inst" "$WORK/doc-filter-$f.txt"; then
      echo "ansible-doc -t filter crdops.migration.$f: ok"
    else
      echo "ansible-doc -t filter crdops.migration.$f: FAILED"; cat "$WORK/doc-filter-$f.txt"; rc=1
    fi
  done
  local cb
  for cb in "$inst"/plugins/callback/*.py; do
    cb="$(basename "$cb" .py)"
    if ansible-doc -t callback "crdops.migration.$cb" >"$WORK/doc-callback-$cb.txt" 2>&1 && grep -q "$inst" "$WORK/doc-callback-$cb.txt"; then
      echo "ansible-doc -t callback crdops.migration.$cb: ok"
    else
      echo "ansible-doc -t callback crdops.migration.$cb: FAILED"; cat "$WORK/doc-callback-$cb.txt"; rc=1
    fi
  done
  return $rc
}
check ansible-doc docs_from_installed

# The EE metadata must resolve and list our Python requirements.
ee_introspect() {
  local out
  out="$(ansible-builder introspect --sanitize "$WORK/src" 2>&1)" || { echo "$out"; return 1; }
  echo "$out"
  grep -q "from collection crdops.migration" <<<"$out" || { echo "no requirements from crdops.migration"; return 1; }
}
check ee ee_introspect

# The docs site builds from the copy, warnings as errors, nothing fetched.
docs_site() { CRDOPS_SRC="$COLL" DOCS_OUT="$WORK/docs" "$COLL/tools/docs.sh"; }
check docs-site docs_site

if ((${#failed[@]})); then
  echo "LINT FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "LINT OK: runtime-groups ansible-lint changelog docs build install ansible-doc ee docs-site"

#!/usr/bin/env bash
# Install everything the project needs on a fresh machine: the Python venv of a CI leg with its pinned
# dependencies (CRDOPS_LEG, see tools/env.sh), the control-plane binaries (built from Go modules, cached
# by version), the real clients the tests drive (kubectl, Flux's apply library; also built from Go modules),
# the Debian packages some tests use, and this collection, linked where Ansible finds it.
# Safe to rerun: cached pieces are skipped.
#   tools/setup.sh [--with-kcm]      CRDOPS_LEG=2.16 tools/setup.sh   (the oldest-ansible leg)
set -euo pipefail
# shellcheck source=env.sh source-path=SCRIPTDIR
source "$(dirname "$0")/env.sh"

# An interpreter of version $1 (default: the leg's, named in its pin file), from pyenv, else python<major.minor>
# on PATH.
find_python() {
  local v="${1:-$CRDOPS_PYVER}" root mm
  mm="${v%.*}"
  root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
  for cand in "$root/versions/$v/bin/python$mm" "$(command -v "python$mm" || true)"; do
    if [[ -n "$cand" && -x "$cand" ]] && [[ "$("$cand" -c 'import platform; print(platform.python_version())')" == "$v"* ]]; then
      echo "$cand"; return 0
    fi
  done
  echo "setup: Python $v not found (pyenv install $v)" >&2; return 1
}

if [[ ! -f "$VENV/.complete" ]]; then
  t0=$(date +%s)
  py="$(find_python)"
  echo "== creating venv $VENV (leg ansible-core $CRDOPS_LEG, $py)"
  rm -rf "$VENV"
  "$py" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet -r "$CRDOPS_LOCK"
  # Collections only (the `ansible` package without its ansible-core pin): see the file's comment.
  nodeps="$REPO_ROOT/requirements/ansible-$CRDOPS_LEG.collections.txt"
  if [[ -f "$nodeps" ]]; then "$VENV/bin/pip" install --quiet --no-deps -r "$nodeps"; fi
  touch "$VENV/.complete"   # only a finished install counts; an interrupted one is redone
  echo "== venv ready in $(( $(date +%s) - t0 ))s"
else
  echo "== venv $VENV is ready"
fi

# The type and lint gate's tools, in their own venv (see requirements/lint-tools.txt)
if [[ ! -f "$LINT_VENV/.complete" ]]; then
  py="$(find_python "$CRDOPS_LINT_PYVER")"
  echo "== creating lint-tools venv $LINT_VENV ($py)"
  rm -rf "$LINT_VENV"
  "$py" -m venv "$LINT_VENV"
  "$LINT_VENV/bin/pip" install --quiet --upgrade pip
  "$LINT_VENV/bin/pip" install --quiet --no-deps -r "$CRDOPS_LINT_LOCK"
  "$LINT_VENV/bin/pip" check >/dev/null || { "$LINT_VENV/bin/pip" check >&2; exit 1; }
  touch "$LINT_VENV/.complete"
fi
echo "== lint tools: $("$LINT_VENV/bin/mypy" --version), $("$LINT_VENV/bin/ruff" --version)"
"$VENV/bin/python" - <<'PY'
import ansible, importlib.metadata as md, json, pathlib, kubernetes
import ansible_collections
kc = next(pathlib.Path(p) / "kubernetes/core/MANIFEST.json" for p in ansible_collections.__path__
          if (pathlib.Path(p) / "kubernetes/core/MANIFEST.json").exists())
print(f"== leg: ansible-core {ansible.__version__}, kubernetes.core {json.loads(kc.read_text())['collection_info']['version']}, "
      f"kubernetes {md.version('kubernetes')}, python {__import__('platform').python_version()}")
PY

# --- Debian packages used by tests (CI runs as root on a fresh machine) ------------------------------
# haproxy: the load balancer in front of several kube-apiservers (HA tests);
# chromium: headless browser that renders the HTML fleet report in a test.
apt_missing=()
command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || apt_missing+=(haproxy)
command -v chromium >/dev/null 2>&1 || apt_missing+=(chromium)
if ((${#apt_missing[@]})); then
  echo "== apt-get install ${apt_missing[*]}"
  if [[ $(id -u) == 0 ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_missing[@]}" >/dev/null
  else
    echo "setup: not root, cannot install ${apt_missing[*]}: the tests needing them will fail" >&2
  fi
fi
# --- end Debian packages -----------------------------------------------------------------------------

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
# kubectl and Flux's apply library, the real clients of the tests (tests/clients: one binary, cached by version)
echo "== real clients"
"$REPO_ROOT/tests/clients/build.sh"
# Helm v4 (helm.sh/helm/v4/cmd/helm): releases whose stored manifest lags behind the CRDs; ~6 minutes cold, cached
"$REPO_ROOT/tests/clients/build_helm.sh"
# cert-manager's own conversion webhook (tests/certmanager): ~4 minutes cold on 2 cores, then cached
echo "== cert-manager webhook"
"$REPO_ROOT/tests/certmanager/build.sh"

# The collection is found under ansible_collections/crdops/migration; link the working tree there.
mkdir -p "$ANSIBLE_HOME"
python3 "$REPO_ROOT/tools/collection_tree.py" link "$ANSIBLE_COLLECTIONS_PATH" >/dev/null
echo "== setup done (venv: $VENV)"

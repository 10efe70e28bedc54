#!/usr/bin/env bash
# Copyright (c) crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Build the documentation site, offline, into build/docs/html (gitignored):
#   - module and role reference pages: antsibull-docs (sphinx-init + collection) from a COPY of the
#     tree at <work>/src/ansible_collections/crdops/migration (the collection the docs describe);
#   - the user guides: docs/*.md as they are, rendered by Sphinx through myst-parser;
#   - Sphinx with sphinx-ansible-theme, warnings are errors, no intersphinx (nothing is fetched).
# Then checks that the HTML has a page for every module, every role and every guide.
#
# Usage: tools/docs.sh            Env: CRDOPS_SRC (tree to document, default this repo),
#                                      DOCS_OUT (default <tree>/build/docs).
# Needs (test-requirements.txt): antsibull-docs, Sphinx, sphinx-ansible-theme, ansible-pygments, myst-parser.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="${CRDOPS_SRC:-$(cd "$HERE/.." && pwd)}"
OUT="${DOCS_OUT:-$SRC/build/docs}"
REPO_URL="https://github.com/crdops/crdops.migration/blob/main"

die() { echo "DOCS FAILED: $*" >&2; exit 1; }

for tool in antsibull-docs sphinx-build python3; do
  command -v "$tool" >/dev/null || die "$tool not on PATH (pip install -r test-requirements.txt)"
done
python3 -c 'import sphinx_ansible_theme, sphinx_antsibull_ext, myst_parser' 2>/dev/null \
  || die "sphinx-ansible-theme, antsibull-docs' Sphinx extension or myst-parser missing (pip install -r test-requirements.txt)"

rm -rf "$OUT"
SITE="$OUT/sphinx"
HTML="$OUT/html"
mkdir -p "$SITE" || die "mkdir $OUT"
chmod 700 "$SITE"  # antsibull-docs wants a directory only its owner can write

# 1. Copy of the collection (not a symlink); only this copy and the ansible package's collections
#    (kubernetes.core, referenced by seealso) are visible.
COLL="$(python3 "$HERE/collection_tree.py" copy "$OUT/src" --src "$SRC" --no-git)" || die "copy of $SRC to $OUT/src"
export ANSIBLE_COLLECTIONS_PATH="$OUT/src"

# 2. Sphinx skeleton, then a conf.py of our own on top of it: no intersphinx (offline), MyST for the guides.
antsibull-docs sphinx-init --use-current --fail-on-error --dest-dir "$SITE" \
    --project "crdops.migration" --copyright "crdops.migration contributors" \
    --title "crdops.migration" --html-short-title "crdops.migration" crdops.migration >/dev/null \
  || die "antsibull-docs sphinx-init"
cat >>"$SITE/conf.py" <<'PY'

# --- crdops.migration (tools/docs.sh): offline build, Markdown user guides ---
extensions = [e for e in extensions if e != 'sphinx.ext.intersphinx'] + ['myst_parser']
intersphinx_mapping = {}
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
myst_heading_anchors = 3
suppress_warnings = ['myst.header']

# Labels that intersphinx would resolve from docs.ansible.com (kubernetes.core modules in seealso,
# Ansible's reference pages) become plain links to docs.ansible.com: nothing is fetched at build time.
import re as _re
from docutils import nodes as _nodes

_ANSIBLE_DOCS = 'https://docs.ansible.com/projects/ansible/latest/'
_ANSIBLE_LABELS = {
    'common_return_values': 'reference_appendices/common_return_values.html',
    'ansible_configuration_settings': 'reference_appendices/config.html',
    'action_plugins': 'plugins/action.html',  # the note on a module that has an action plugin
    'callback_plugins': 'plugins/callback.html',  # the default callback's options, which ours extends
}
_PLUGIN_LABEL = _re.compile(r'^ansible_collections\.([a-z0-9_]+)\.([a-z0-9_]+)\.([a-z0-9_]+_[a-z]+)$')


def _offline_reference(app, env, node, contnode):
    target = node.get('reftarget', '')
    url = None
    if target in _ANSIBLE_LABELS:
        url = _ANSIBLE_DOCS + _ANSIBLE_LABELS[target]
    elif node.get('reftype') == 'envvar' and target.startswith('ANSIBLE_'):
        url = _ANSIBLE_DOCS + 'reference_appendices/config.html#envvar-' + target
    else:
        m = _PLUGIN_LABEL.match(target)
        if m and (m.group(1), m.group(2)) != ('crdops', 'migration'):
            url = '%scollections/%s/%s/%s.html' % (_ANSIBLE_DOCS, m.group(1), m.group(2), m.group(3))
    if url is None:
        return None
    ref = _nodes.reference('', '', internal=False, refuri=url)
    ref += contnode
    return ref


def setup(app):
    app.connect('missing-reference', _offline_reference)
PY

# 3. Module and role pages (rst) from the copy.
mkdir -p "$SITE/rst" && chmod og-w "$SITE/rst"
antsibull-docs --config-file "$SITE/antsibull-docs.cfg" collection --use-current --fail-on-error \
    --cleanup everything --dest-dir "$SITE/rst" crdops.migration \
  || die "antsibull-docs collection"

# 4. The user guides: docs/ copied (images included); in the Markdown, links to files that are not
#    guides point to the repository.
mkdir -p "$SITE/rst/guide"
cp -R "$COLL/docs/." "$SITE/rst/guide/" || die "copy of docs/"
rm -rf "$SITE/rst/guide/docsite"
find "$SITE/rst/guide" -mindepth 2 -name "*.md" -delete  # only docs/*.md are guides
python3 - "$COLL/docs" "$SITE/rst/guide" "$REPO_URL" <<'PY' || die "copy of the user guides"
import pathlib, re, sys
src, dest, repo = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
guides = sorted(p.name for p in src.glob("*.md"))
link = re.compile(r"(?<!!)(\[[^\]]*\])\(([^)\s#]+)(#[^)\s]*)?\)")  # not images

def fix(m):
    text, target, anchor = m.group(1), m.group(2), m.group(3) or ""
    if re.match(r"^[a-z]+:", target) or target in guides:
        return m.group(0)
    path = (pathlib.PurePosixPath("docs") / target).as_posix()
    parts = []
    for part in path.split("/"):  # normalise ../
        if part == "..":
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "%s(%s/%s%s)" % (text, repo, "/".join(parts), anchor)

for name in guides:
    text = (src / name).read_text(encoding="utf-8")
    (dest / name).write_text(link.sub(fix, text), encoding="utf-8")
print("guides: " + " ".join(guides))
PY
cat >"$SITE/rst/index.rst" <<'RST'
.. _docsite_root_index:

crdops.migration
================

Move every custom resource of a CustomResourceDefinition to its current storage version, prove it,
trim ``status.storedVersions`` and only then let a CRD release drop an old version - on one cluster
or a fleet, with Ansible.

.. toctree::
   :maxdepth: 2
   :caption: User guide
   :glob:

   guide/index
   guide/how-it-works
   guide/safety
   guide/*

.. toctree::
   :maxdepth: 2
   :caption: Reference

   collections/crdops/migration/index

.. toctree::
   :maxdepth: 1
   :caption: Indexes
   :glob:

   collections/index_*
   collections/environment_variables
RST

# 5. HTML. -W: a broken reference or an unknown lexer is an error.
sphinx-build -q -b html -c "$SITE" -W --keep-going "$SITE/rst" "$HTML" || die "sphinx-build (see the warnings above)"

# 6. Every module, role and guide has a page.
missing=()
for m in "$COLL"/plugins/modules/*.py; do
  m="$(basename "$m" .py)"; [[ "$m" == __init__ ]] && continue
  [[ -s "$HTML/collections/crdops/migration/${m}_module.html" ]] || missing+=("module $m")
done
for r in "$COLL"/roles/*/; do
  r="$(basename "$r")"
  [[ -s "$HTML/collections/crdops/migration/${r}_role.html" ]] || missing+=("role $r")
done
for g in "$SITE"/rst/guide/*.md; do
  g="$(basename "$g" .md)"
  [[ -s "$HTML/guide/$g.html" ]] || missing+=("guide $g")
done
((${#missing[@]} == 0)) || die "no HTML page for: ${missing[*]}"
echo "DOCS OK: $HTML/index.html ($(find "$HTML" -name '*.html' | wc -l) pages)"

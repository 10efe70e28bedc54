# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""The rule of a struct path, derived from the rules learnt for the paths beneath it.

Server-side apply owns a struct as a member of its own when the applied value declared it with none of its
fields: cert-manager's ``spec: {selfSigned: {}}`` gives ``f:spec: {f:selfSigned: {}}``. The made-up objects
and the sampled objects show where each *leaf* goes, not where the struct goes, so a struct ``P`` gets its rule
from its descendants: each mapped descendant's template must end in one element per step below ``P`` that
stands for that step (a field for a field step, the key bound at that very step for a key step); what is left
before them is ``P``'s image, and it may use only keys bound at ``P``'s own steps. ``P`` maps there when every
mapped descendant gives the same image. Descendants that give different images (``P`` was split), a template
that does not keep the structure below ``P``, or no mapped descendant at all: ``P`` stays unmapped (dropped
from the entry and named, never mapped to itself).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from .marker_objects import Path, Step

TElem = Tuple[Any, ...]
Template = Tuple[TElem, ...]


def struct_rule(path: Path, rules: Dict[Path, Optional[Template]]) -> Optional[Template]:
    """``path``'s image from the mapped rules strictly beneath it; None when they disagree or none maps."""
    if not path:
        return None
    images: Set[Template] = set()
    for child, template in rules.items():
        if template is None or len(child) <= len(path) or child[:len(path)] != path:
            continue
        image = image_above(path, child, template)
        if image is None:
            return None  # a descendant moved in a way the struct cannot follow: not shown to be kept
        images.add(image)
    return images.pop() if len(images) == 1 else None


def image_above(path: Path, child: Path, template: Template) -> Optional[Template]:
    """The part of ``child``'s template that stands for ``path``: the template without one element per step
    below ``path``, each standing for its step; None when the template does not keep that structure."""
    below = len(child) - len(path)
    if len(template) <= below:
        return None
    image, tail = template[:-below], template[-below:]
    for index, (step, elem) in enumerate(zip(child[len(path):], tail, strict=True), start=len(path)):
        if not stands_for(step, index, elem):
            return None
    if any(ref >= len(path) for elem in image for ref in bound_refs(elem)):
        return None  # the image would depend on a key chosen below the struct
    return image


def stands_for(step: Step, index: int, elem: TElem) -> bool:
    """Whether template element ``elem`` is the image of ``step`` (step number ``index`` of the old path)."""
    kind = step[0]
    if kind == "f":
        return elem[0] == "lit" and str(elem[1]).startswith("f:")
    if kind == "m":
        return elem == ("mkey", index)
    if kind == "v":
        return elem == ("vval", index)
    if kind == "k":
        return elem[0] == "kkey" and bool(elem[1]) and all(ref[1] == index for ref in elem[1])
    return False


def bound_refs(elem: TElem) -> List[int]:
    """The old path's step numbers whose bound keys ``elem`` uses."""
    if elem[0] in ("mkey", "vval"):
        return [int(elem[1])]
    if elem[0] == "kkey":
        return [int(ref[1]) for ref in elem[1]]
    return []

# Copyright (c) 2026, crdops.migration contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE: for internal use by crdops.migration only; may change in any release
"""Learning a FieldMapping from the conversion itself, without writing any object.

Exact: the made-up objects of the old version (marker_objects.py) go to the CRD's conversion webhook; each old path
maps to the one converted path whose values across the objects equal its own. Every marker is distinct, so
two fields that usually hold equal values are still told apart; a field whose values land nowhere whole
(a split, a change of case or unit) or in two places maps to nothing.

A path keeps its place only where its own markers are found there: a field that keeps its name but is
refilled by the conversion (Cluster API v1beta2 moves ``status.conditions`` to
``status.deprecated.v1beta1.conditions`` and writes new ``status.conditions``) maps to where its markers went.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ..kube.crd_schema import ANY, LIST, LIST_MAP, LIST_SET, MAP, SCALAR, STRUCT, Node, has_atomic_maps, opened
from .field_mapping import EXACT, FieldMapping, Template, canon
from ..kube.errors import ConversionWebhookError
from .marker_objects import OMITTED, SKIPPED_ROOT_FIELDS, STYLES, MadeUp, Path, made_up, plain_strings
from .whole_rules import RawPath, WholeValues, whole_value_paths

ReviewFn = Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]]  # old-version contents -> converted objects
MISSING = "\x00missing"
MAX_REVIEWS = 64  # ConversionReviews spent finding the made-up strings a webhook refuses


def flatten(value: Any, node: Node, prefix: RawPath = (), out: Optional[Dict[RawPath, str]] = None,
            root: bool = True) -> Dict[RawPath, str]:
    """Every owned leaf of one converted object: ``("f", name)``, ``("k", ((key, value), ...))`` and
    ``("v", json)`` elements, each with its value as canonical JSON."""
    out = {} if out is None else out
    if node.kind == SCALAR or node.atomic or not isinstance(value, (dict, list)):
        out[prefix] = canon(value)
    elif isinstance(value, dict):
        if not value and prefix:
            out[prefix] = canon(value)
        for key in sorted(value):
            if root and key in SKIPPED_ROOT_FIELDS:
                continue
            if node.kind == STRUCT and key in node.props:
                child = node.props[key]
            elif node.kind == MAP:
                child = node.item or Node(ANY)
            else:
                child = Node(ANY)
            flatten(value[key], child, prefix + (("f", key),), out, False)
    elif node.kind == LIST and node.list_type == LIST_MAP:
        for item in value:
            if isinstance(item, dict):
                ident = tuple((k, item.get(k)) for k in node.keys)
                flatten(item, node.item or Node(ANY), prefix + (("k", ident),), out, False)
    elif node.kind == LIST and node.list_type == LIST_SET:
        for item in value:
            out[prefix + (("v", canon(item)),)] = canon(item)
    else:
        out[prefix] = canon(value)
    return out


def keyed(flat: Dict[Tuple[Any, ...], str]) -> Dict[Tuple[str, ...], str]:
    """Flattened leaves (``flatten``) by their fieldsV1 keys (``f:``, ``k:``, ``v:``)."""
    out = {}
    for raw, value in flat.items():
        keys = []
        for elem in raw:
            if elem[0] == "f":
                keys.append("f:" + elem[1])
            elif elem[0] == "k":
                keys.append("k:" + canon(dict(elem[1])))
            else:
                keys.append("v:" + elem[1])
        out[tuple(keys)] = value
    return out


def _key_refs(path: Path, made: MadeUp) -> Dict[str, Tuple[int, Any]]:
    """Marker (as JSON) -> (step index, old key field or None) for every key step along ``path``."""
    refs: Dict[str, Tuple[int, Any]] = {}
    for i, step in enumerate(path):
        marker = made.keys.get(path[:i + 1])
        if marker is None:
            continue
        if step[0] == "k" and isinstance(marker, dict):
            for field, value in marker.items():
                refs[canon(value)] = (i, field)
        else:
            refs[canon(marker)] = (i, None)
    return refs


def template_of(raw: RawPath, path: Path, made: MadeUp) -> Optional[Template]:
    """The template of a converted path, its keys expressed through the old path's key markers; None when
    a key of the converted path is not one of them (the item would not be found for another key)."""
    refs = _key_refs(path, made)
    out: List[Tuple[Any, ...]] = []
    for elem in raw:
        if elem[0] == "f":
            ref = refs.get(canon(elem[1]))
            out.append(("mkey", ref[0]) if ref is not None and ref[1] is None else ("lit", "f:" + elem[1]))
        elif elem[0] == "k":
            fields = []
            for field, value in elem[1]:
                ref = refs.get(canon(value))
                if ref is None or ref[1] is None:
                    return None
                fields.append((field, ref[0], ref[1]))
            out.append(("kkey", tuple(fields)))
        else:
            ref = refs.get(elem[1])
            if ref is None or ref[1] is not None:
                return None
            out.append(("vval", ref[0]))
    return tuple(out)


def match(made: MadeUp, converted: List[Dict[str, Any]], new_schema: Node) -> Dict[Path, Optional[Template]]:
    """Rules for every made-up path: the one converted path with the same values in every object."""
    flat = [flatten(obj, new_schema) for obj in converted]
    raw_paths = sorted(set(p for f in flat for p in f), key=repr)
    by_vector: Dict[Tuple[str, ...], List[RawPath]] = {}
    for raw in raw_paths:
        by_vector.setdefault(tuple(f.get(raw, MISSING) for f in flat), []).append(raw)
    old_by_vector: Dict[Tuple[str, ...], int] = {}
    vectors = dict((path, tuple(MISSING if v is OMITTED else canon(v) for v in values))
                   for path, values in made.leaves.items())
    for vector in vectors.values():
        old_by_vector[vector] = old_by_vector.get(vector, 0) + 1
    rules: Dict[Path, Optional[Template]] = {}
    for path, vector in vectors.items():
        found = by_vector.get(vector) or []
        if len(found) == 1 and old_by_vector[vector] == 1:
            rules[path] = template_of(found[0], path, made)
        else:
            rules[path] = None
    _whole_value_rules(made, flat, rules)
    for path in made.interior:
        if path not in rules:
            rules[path] = _item_rule(path, rules)
    return rules


def _whole_value_rules(made: MadeUp, flat: List[Dict[RawPath, str]], rules: Dict[Path, Optional[Template]]) -> None:
    """An atomic value not found whole (the conversion changed its inside) maps to where its markers went."""
    unmapped = [path for path in whole_value_paths(made.leaves) if rules.get(path) is None]
    if not unmapped:
        return
    values = WholeValues(made.leaves, flat)
    for path in unmapped:
        raw = values.image(path)
        if raw is not None:
            rules[path] = template_of(raw, path, made)


def _item_rule(path: Path, rules: Dict[Path, Optional[Template]]) -> Optional[Template]:
    """A list-map item or map key as a member (``.``): where its children went, when they all agree on the
    item (the template up to the element bound to this step)."""
    index = len(path) - 1
    found = set()
    for child, template in rules.items():
        if template is None or len(child) <= len(path) or child[:len(path)] != path:
            continue
        for cut, elem in enumerate(template):
            if (elem[0] == "mkey" and elem[1] == index) or (elem[0] == "kkey" and any(r[1] == index for r in elem[1])):
                found.add(template[:cut + 1])
                break
        else:
            return None
    return found.pop() if len(found) == 1 else None


class _Refusals:
    """Finds which made-up strings a webhook refuses (one review per question, bisecting), and a shape of each
    that it accepts; the ones it refuses in every shape are left out of the objects and stay unmapped."""

    def __init__(self, review: ReviewFn, schema: Node, guide: Optional[Mapping[str, Any]]) -> None:
        self.review = review
        self.schema = schema
        self.guide = guide
        self.reviews = 0

    def accepts(self, omit: Set[Path], styles: Dict[Path, str]) -> bool:
        self.reviews += 1
        if self.reviews > MAX_REVIEWS:
            raise ConversionWebhookError("the webhook refused made-up objects in more than %d ways" % MAX_REVIEWS)
        try:
            self.review(made_up(self.schema, self.guide, omit, styles).objects)
        except ConversionWebhookError:
            return False
        return True

    def refused(self, group: List[Path], everyone: Set[Path]) -> List[Path]:
        if self.accepts(everyone - set(group), {}):
            return []
        if len(group) == 1:
            return group
        half = len(group) // 2
        return self.refused(group[:half], everyone) + self.refused(group[half:], everyone)

    def settle(self, made: MadeUp, first_error: ConversionWebhookError) -> Tuple[Set[Path], Dict[Path, str]]:
        """(left out, other shapes) that make the webhook accept the objects; raises when nothing does."""
        strings = plain_strings(made)
        everyone = set(strings)
        if not strings or not self.accepts(everyone, {}):
            raise first_error  # not a string of ours: nothing to change
        styles: Dict[Path, str] = {}
        left_out: Set[Path] = set()
        for path in self.refused(strings, everyone):
            style = next((s for s in STYLES if self.accepts(everyone - {path}, {path: s})), None)
            if style is None:
                left_out.add(path)
            else:
                styles[path] = style
        return left_out, styles


def review_made_up(review: ReviewFn, schema: Node, guide: Optional[Mapping[str, Any]]
                   ) -> Tuple[MadeUp, List[Dict[str, Any]], Set[Path]]:
    """Made-up objects the webhook accepts, its answer, and the string fields it refused in every shape."""
    made = made_up(schema, guide)
    try:
        return made, review(made.objects), set()
    except ConversionWebhookError as exc:
        left_out, styles = _Refusals(review, schema, guide).settle(made, exc)
    made = made_up(schema, guide, left_out, styles)
    return made, review(made.objects), left_out


def learn_exact(review: ReviewFn, old_schema: Node, new_schema: Node, from_version: str, to_version: str,
                note: str = "") -> FieldMapping:
    """Ask the conversion about made-up objects of ``from_version``; more made-up objects later for paths
    under schema-less subtrees, the first time an entry names them."""

    def learn(guide: Optional[Mapping[str, Any]]) -> Dict[Path, Optional[Template]]:
        made, converted, refused = review_made_up(review, old_schema, guide)
        rules = match(made, converted, new_schema)
        rules.update((path, None) for path in refused)  # no value of it got through: dropped and named
        return rules

    failed: List[str] = []

    def learn_more(guide: Mapping[str, Any]) -> Dict[Path, Optional[Template]]:
        if failed:  # asked once: a webhook that failed is not asked again for every entry
            return {}
        try:
            return learn(guide)
        except Exception as exc:  # a failed later review leaves those paths unmapped (dropped and named)
            failed.append(str(exc))
            return {}

    mapping = FieldMapping(from_version, to_version, old_schema, EXACT, learn(None), note, learn_more)
    if has_atomic_maps(old_schema) or has_atomic_maps(new_schema):
        mapping.learn_inside = _inside_learner(review, mapping, new_schema)
    return mapping


def _inside_learner(review: ReviewFn, mapping: FieldMapping, new_schema: Node) -> Callable[[], FieldMapping]:
    """How to learn ``mapping`` again with atomic structs and maps opened, so that the fields inside them map one by
    one (kubectl's last-applied annotation needs their new names). Asked only when an annotation is translated."""

    def learn() -> FieldMapping:
        inside = opened(mapping.schema)
        try:
            return learn_exact(review, inside, opened(new_schema), mapping.from_version, mapping.to_version,
                               mapping.note)
        except Exception:  # the webhook failed this time: the inner fields get no rule, so they are named, not kept
            with mapping.lock:
                rules = dict(mapping.rules)
            return FieldMapping(mapping.from_version, mapping.to_version, inside, EXACT, rules, mapping.note,
                                mapping.learn_more)
    return learn

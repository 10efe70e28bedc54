"""The calibration chart as SVG, written by hand (no plotting library): objects/s (y) against an observer's GET p99
multiple (x), one panel per observer on shared axes; the in-tree migrator, ours at each budget (joined in budget
order), ours under the shipped APF objects and an earlier engine run beside ours (`--against`, hollow, not
joined); medians with min–max bars both ways. The dashed line is the ×2.0 target; the shaded corner is "at least
the in-tree migrator's objects/s at no more than its multiple".
"""
from __future__ import annotations

import math
from xml.sax.saxutils import escape

from .calibration import Point
from .observers import OBSERVERS, TITLE
from .suites import APF

WIDTH, HEIGHT = 980, 490
PANEL_W, PANEL_H = 390, 300
LEFT, TOP = 70, 70
GAP = 100
TARGET = 2.0
COLOURS = {"in-tree": "#b2182b", "ours": "#2166ac", "apf": "#1b7837", "earlier": "#6a6a6a"}
LEGEND_ROW = 20
FONT = 'font-family="sans-serif" font-size="12"'


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    raw = (hi - lo) / count if hi > lo else 1.0
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step) + 1)]


def finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


class Axes:
    """Shared data ranges; maps data to pixels within the panel at x offset `left`."""

    def __init__(self, pts: list[Point]):
        xs = [v for p in pts for o in OBSERVERS for v in (p.multiple[o].lo, p.multiple[o].hi) if finite(v)]
        ys = [p.rate.hi for p in pts if finite(p.rate.hi)]
        self.x0 = min([0.9] + [x - 0.1 for x in xs])
        self.x1 = max([TARGET + 0.3] + [x * 1.08 for x in xs])
        self.y1 = max([10.0] + [y * 1.15 for y in ys])

    def px(self, left: float, x: float) -> float:
        return left + (x - self.x0) / (self.x1 - self.x0) * PANEL_W

    def py(self, y: float) -> float:
        return TOP + PANEL_H - y / self.y1 * PANEL_H


def grid(ax: Axes, left: float) -> list[str]:
    out = [f'<rect x="{left}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="white" stroke="#444"/>']
    for x in nice_ticks(ax.x0, ax.x1):
        px = ax.px(left, x)
        out.append(f'<line x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" y2="{TOP + PANEL_H}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{px:.1f}" y="{TOP + PANEL_H + 16}" text-anchor="middle" {FONT}>×{x:g}</text>')
    for y in nice_ticks(0, ax.y1):
        py = ax.py(y)
        out.append(f'<line x1="{left}" y1="{py:.1f}" x2="{left + PANEL_W}" y2="{py:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6}" y="{py + 4:.1f}" text-anchor="end" {FONT}>{y:g}</text>')
    tx = ax.px(left, TARGET)
    out.append(f'<line x1="{tx:.1f}" y1="{TOP}" x2="{tx:.1f}" y2="{TOP + PANEL_H}" stroke="#d6604d" '
               'stroke-dasharray="6,4"/>')
    out.append(f'<text x="{tx + 4:.1f}" y="{TOP + 14}" {FONT} fill="#d6604d">×{TARGET:g} target</text>')
    return out


def corner(ax: Axes, left: float, intree: Point | None, obs: str) -> list[str]:
    """The region that is on or above the in-tree migrator's point."""
    if intree is None or not finite(intree.multiple[obs].median, intree.rate.median):
        return []
    x, y = ax.px(left, intree.multiple[obs].median), ax.py(intree.rate.median)
    return [f'<rect x="{left}" y="{TOP}" width="{x - left:.1f}" height="{y - TOP:.1f}" fill="#1b7837" '
            'fill-opacity="0.08"/>']


def marker(kind: str, x: float, y: float) -> str:
    colour = COLOURS[kind]
    if kind == "in-tree":
        return f'<rect x="{x - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" fill="{colour}"/>'
    if kind == "apf":
        return f'<polygon points="{x:.1f},{y - 7:.1f} {x - 6:.1f},{y + 5:.1f} {x + 6:.1f},{y + 5:.1f}" fill="{colour}"/>'
    if kind == "earlier":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="white" stroke="{colour}" stroke-width="2"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>'


def kind_of(p: Point) -> str:
    if not p.ours:
        return "in-tree"
    if p.earlier is not None:
        return "earlier"
    return "apf" if p.contender == APF else "ours"


def point_svg(ax: Axes, left: float, p: Point, obs: str) -> list[str]:
    m, r = p.multiple[obs], p.rate
    if not finite(m.median, r.median):
        return []
    x, y, colour = ax.px(left, m.median), ax.py(r.median), COLOURS[kind_of(p)]
    out = []
    if finite(m.lo, m.hi):
        out.append(f'<line x1="{ax.px(left, m.lo):.1f}" y1="{y:.1f}" x2="{ax.px(left, m.hi):.1f}" y2="{y:.1f}" '
                   f'stroke="{colour}"/>')
    if finite(r.lo, r.hi):
        out.append(f'<line x1="{x:.1f}" y1="{ax.py(r.lo):.1f}" x2="{x:.1f}" y2="{ax.py(r.hi):.1f}" stroke="{colour}"/>')
    out.append(marker(kind_of(p), x, y))
    return out


def label_at(x: float, y: float, text: str, placed: list) -> tuple[float, float]:
    """Up and right of the point, moved down a line at a time while it would cover a label already placed."""
    width, height = 7 * len(text), 14
    lx, ly = x + 8, y - 8
    for _attempt in range(6):
        if not any(lx < px + pw and px < lx + width and ly - height < py and py - ph < ly for px, py, pw, ph in placed):
            break
        ly += height
    placed.append((lx, ly, width, height))
    return lx, ly


def labels(ax: Axes, left: float, pts: list[Point], obs: str) -> list[str]:
    out: list = []
    placed: list = []
    for p in pts:
        if finite(p.multiple[obs].median, p.rate.median):
            lx, ly = label_at(ax.px(left, p.multiple[obs].median), ax.py(p.rate.median), p.label, placed)
            out.append(f'<text x="{lx:.1f}" y="{ly:.1f}" {FONT} fill="{COLOURS[kind_of(p)]}">{escape(p.label)}</text>')
    return out


def panel(ax: Axes, left: float, pts: list[Point], obs: str) -> list[str]:
    intree = next((p for p in pts if not p.ours), None)
    out = grid(ax, left) + corner(ax, left, intree, obs)
    ours = sorted((p for p in pts if p.this_engine and finite(p.multiple[obs].median, p.rate.median)),
                  key=lambda p: p.budget)
    if len(ours) > 1:
        line = " ".join(f"{ax.px(left, p.multiple[obs].median):.1f},{ax.py(p.rate.median):.1f}" for p in ours)
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLOURS["ours"]}" stroke-opacity="0.5"/>')
    for p in pts:
        out += point_svg(ax, left, p, obs)
    out += labels(ax, left, pts, obs)
    mid = left + PANEL_W / 2
    out.append(f'<text x="{mid}" y="{TOP - 10}" text-anchor="middle" {FONT} font-weight="bold">{escape(TITLE[obs])}</text>')
    out.append(f'<text x="{mid}" y="{TOP + PANEL_H + 36}" text-anchor="middle" {FONT}>GET p99 during ÷ idle</text>')
    return out


def legend_items(pts: list[Point]) -> list[tuple[str, str]]:
    items = [(marker("in-tree", 0, -4), "in-tree migrator (kube-controller-manager)"),
             (marker("ours", 0, -4), "ours at latency budget 1.5 … 4 (joined in budget order)"),
             (marker("apf", 0, -4), "ours at the default budget, with the shipped FlowSchema + PriorityLevel"),
             ('<rect x="-5" y="-10" width="10" height="10" fill="#1b7837" fill-opacity="0.15"/>',
              "on or above the in-tree migrator's point")]
    earlier = sorted({p.earlier for p in pts if p.earlier is not None})
    if earlier:
        items.append((marker("earlier", 0, -4), f"ours at the default budget, engine of {', '.join(earlier)}"))
    return items


def legend(y: float, items: list[tuple[str, str]]) -> list[str]:
    """Rows of two entries under the panels."""
    out = []
    for i, (symbol, text) in enumerate(items):
        x, row_y = LEFT + (i % 2) * (PANEL_W + GAP), y + (i // 2) * LEGEND_ROW
        out += [f'<g transform="translate({x},{row_y})">{symbol}</g>',
                f'<text x="{x + 12}" y="{row_y}" {FONT}>{escape(text)}</text>']
    return out


def chart(pts: list[Point], title: str, footnote: str, warning: str = "") -> str:
    ax = Axes(pts)
    items = legend_items(pts)
    height = HEIGHT + LEGEND_ROW * (math.ceil(len(items) / 2) - 2)  # the chart grows by any legend row past two
    body = [f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
            f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" font-family="sans-serif" font-size="15" '
            f'font-weight="bold">{escape(title)}</text>']
    for i, obs in enumerate(OBSERVERS):
        body += panel(ax, LEFT + i * (PANEL_W + GAP), pts, obs)
    body.append(f'<text x="{LEFT - 52}" y="{TOP + PANEL_H / 2}" text-anchor="middle" {FONT} '
                f'transform="rotate(-90 {LEFT - 52} {TOP + PANEL_H / 2})">objects/s</text>')
    body += legend(TOP + PANEL_H + 64, items)
    body.append(f'<text x="{LEFT}" y="{height - 12}" {FONT} fill="#555">{escape(footnote)}</text>')
    if warning:
        body.append(f'<text x="{WIDTH / 2}" y="{TOP + PANEL_H / 2}" text-anchor="middle" font-family="sans-serif" '
                    f'font-size="28" fill="#d6604d" fill-opacity="0.6">{escape(warning)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}">\n' + "\n".join(body) + "\n</svg>\n")

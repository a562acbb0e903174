"""The embedded world's object categories: a noun name and a glyph drawn from primitives.

Glyphs are defined in unit coordinates (0..1 in both axes, y down) so one definition renders
at any size. Each is a list of primitives:

* ``("poly", [(x, y), ...])``        filled polygon
* ``("ellipse", (x0, y0, x1, y1))``  filled ellipse
* ``("rect", (x0, y0, x1, y1))``     filled rectangle
* ``("ring", (x0, y0, x1, y1), w)``  ellipse outline, stroke ``w`` in unit coordinates
* ``("line", [(x, y), ...], w)``     polyline, stroke ``w``
"""
from __future__ import annotations

import math

from PIL import ImageDraw


def _regular_star(points: int, inner: float) -> list[tuple[float, float]]:
    out = []
    for k in range(2 * points):
        r = 0.5 if k % 2 == 0 else 0.5 * inner
        a = -math.pi / 2 + k * math.pi / points
        out.append((0.5 + r * math.cos(a), 0.5 + r * math.sin(a)))
    return out


def _crescent() -> list[tuple[float, float]]:
    # Outer arc of a circle minus an offset circle, traced as one polygon.
    outer = [(0.5 + 0.5 * math.cos(a), 0.5 + 0.5 * math.sin(a))
             for a in [math.pi / 2 + k * math.pi / 24 for k in range(25)]]
    inner = [(0.78 + 0.42 * math.cos(a), 0.5 + 0.42 * math.sin(a))
             for a in [3 * math.pi / 2 - k * math.pi / 24 for k in range(25)]]
    return outer + inner


def _heart() -> list[tuple[float, float]]:
    pts = []
    for k in range(48):
        t = 2 * math.pi * k / 48
        x = 16 * math.sin(t) ** 3
        y = 13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t) - math.cos(4 * t)
        pts.append((0.5 + x / 34, 0.45 - y / 34))
    return pts


GLYPHS: dict[str, list[tuple]] = {
    "ball": [("ellipse", (0.05, 0.05, 0.95, 0.95))],
    "ring": [("ring", (0.05, 0.05, 0.95, 0.95), 0.16)],
    "box": [("rect", (0.1, 0.1, 0.9, 0.9))],
    "frame": [("line", [(0.1, 0.1), (0.9, 0.1), (0.9, 0.9), (0.1, 0.9), (0.1, 0.1)], 0.14)],
    "tent": [("poly", [(0.5, 0.05), (0.95, 0.95), (0.05, 0.95)])],
    "star": [("poly", _regular_star(5, 0.42))],
    "cross": [("rect", (0.36, 0.05, 0.64, 0.95)), ("rect", (0.05, 0.36, 0.95, 0.64))],
    "diamond": [("poly", [(0.5, 0.02), (0.85, 0.5), (0.5, 0.98), (0.15, 0.5)])],
    "moon": [("poly", _crescent())],
    "heart": [("poly", _heart())],
    "arrow": [("poly", [(0.02, 0.38), (0.55, 0.38), (0.55, 0.12), (0.98, 0.5),
                        (0.55, 0.88), (0.55, 0.62), (0.02, 0.62)])],
    "house": [("rect", (0.18, 0.48, 0.82, 0.95)), ("poly", [(0.5, 0.05), (0.95, 0.5), (0.05, 0.5)])],
    "tree": [("poly", [(0.5, 0.02), (0.92, 0.72), (0.08, 0.72)]), ("rect", (0.4, 0.7, 0.6, 0.98))],
    "mushroom": [("poly", [(0.5 + 0.48 * math.cos(a), 0.5 - 0.45 * math.sin(a))
                           for a in [k * math.pi / 20 for k in range(21)]]),
                 ("rect", (0.36, 0.48, 0.64, 0.95))],
    "flag": [("rect", (0.08, 0.04, 0.18, 0.98)), ("poly", [(0.18, 0.06), (0.95, 0.28), (0.18, 0.5)])],
    "cup": [("poly", [(0.08, 0.2), (0.72, 0.2), (0.64, 0.92), (0.16, 0.92)]),
            ("ring", (0.6, 0.32, 0.96, 0.7), 0.09)],
    "umbrella": [("poly", [(0.5 + 0.48 * math.cos(a), 0.48 - 0.42 * math.sin(a))
                           for a in [k * math.pi / 20 for k in range(21)]]),
                 ("line", [(0.5, 0.46), (0.5, 0.9), (0.36, 0.94)], 0.08)],
    "hourglass": [("poly", [(0.12, 0.04), (0.88, 0.04), (0.54, 0.5), (0.88, 0.96),
                            (0.12, 0.96), (0.46, 0.5)])],
    "bolt": [("poly", [(0.58, 0.0), (0.16, 0.56), (0.46, 0.56), (0.36, 1.0),
                       (0.84, 0.4), (0.54, 0.4), (0.7, 0.0)])],
    "ladder": [("rect", (0.12, 0.02, 0.24, 0.98)), ("rect", (0.76, 0.02, 0.88, 0.98)),
               ("rect", (0.12, 0.18, 0.88, 0.28)), ("rect", (0.12, 0.45, 0.88, 0.55)),
               ("rect", (0.12, 0.72, 0.88, 0.82))],
    "kite": [("poly", [(0.5, 0.0), (0.85, 0.35), (0.5, 1.0), (0.15, 0.35)])],
    "fish": [("ellipse", (0.02, 0.22, 0.7, 0.78)), ("poly", [(0.6, 0.5), (0.98, 0.18), (0.98, 0.82)])],
    "boat": [("poly", [(0.02, 0.62), (0.98, 0.62), (0.78, 0.95), (0.22, 0.95)]),
             ("poly", [(0.52, 0.02), (0.52, 0.56), (0.88, 0.56)])],
    "car": [("rect", (0.02, 0.4, 0.98, 0.75)), ("poly", [(0.22, 0.4), (0.32, 0.12), (0.68, 0.12), (0.78, 0.4)]),
            ("ellipse", (0.12, 0.62, 0.38, 0.92)), ("ellipse", (0.62, 0.62, 0.88, 0.92))],
}

CATEGORY_NAMES: tuple[str, ...] = tuple(GLYPHS)

# Saturated object colours: all contrast with the mid-grey backgrounds.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 40),
    "blue": (30, 60, 220),
    "yellow": (245, 220, 20),
    "orange": (250, 130, 10),
    "purple": (140, 40, 180),
    "pink": (250, 120, 200),
    "white": (250, 250, 250),
    "black": (10, 10, 10),
    "cyan": (20, 210, 220),
}


def draw_glyph(draw: ImageDraw.ImageDraw, name: str, box: tuple[float, float, float, float],
               fill: tuple[int, int, int]) -> None:
    """Draw glyph ``name`` filling ``box`` = (x0, y0, x1, y1) in pixels."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0

    def pt(p):
        return (x0 + p[0] * w, y0 + p[1] * h)

    for prim in GLYPHS[name]:
        kind = prim[0]
        if kind == "poly":
            draw.polygon([pt(p) for p in prim[1]], fill=fill)
        elif kind == "ellipse":
            a, b, c, d = prim[1]
            draw.ellipse([*pt((a, b)), *pt((c, d))], fill=fill)
        elif kind == "rect":
            a, b, c, d = prim[1]
            draw.rectangle([*pt((a, b)), *pt((c, d))], fill=fill)
        elif kind == "ring":
            a, b, c, d = prim[1]
            draw.ellipse([*pt((a, b)), *pt((c, d))], outline=fill, width=max(1, round(prim[2] * w)))
        elif kind == "line":
            draw.line([pt(p) for p in prim[1]], fill=fill, width=max(1, round(prim[2] * w)), joint="curve")
        else:  # pragma: no cover - a typo in GLYPHS
            raise ValueError(f"glyph {name!r}: unknown primitive {kind!r}")

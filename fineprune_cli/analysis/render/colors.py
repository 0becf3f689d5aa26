"""The plots' line colours: each row its policy's own, unless that is taken or looks like one taken."""

from __future__ import annotations

from ..read.runs import policy_color

SPARE_COLORS = (
    "#17becf",
    "#bcbd22",
    "#e377c2",
    "#ff7f0e",
    "#aec7e8",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#dbdb8d",
    "#9edae5",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
)


def row_colors(rows: list[str]) -> dict[str, str]:
    """Each row its policy's colour, unless an earlier row took it or one like it (a variant, a
    second frontier arm; regular's dark grey beside a shorter arm's black): then a spare one, so
    no two lines of one plot share a colour or look alike."""
    used: list[str] = []
    out = {}
    for row in rows:
        color = policy_color(row)
        if any(alike(color, c) for c in used):
            color = next((c for c in SPARE_COLORS if not any(alike(c, u) for u in used)), color)
        used.append(color)
        out[row] = color
    return out


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def alike(a: str, b: str) -> bool:
    """Two '#rrggbb' colours a reader would mix up in thin lines: near in RGB, or two greys
    (black included) less than ~40% of the scale apart, which hue cannot tell apart."""
    (r1, g1, b1), (r2, g2, b2) = _rgb(a), _rgb(b)
    if (r1 - r2) ** 2 + (g1 - g2) ** 2 + (b1 - b2) ** 2 < 60**2:
        return True
    grey = all(max(c) - min(c) < 24 for c in ((r1, g1, b1), (r2, g2, b2)))
    return grey and abs((r1 + g1 + b1) - (r2 + g2 + b2)) / 3 < 100

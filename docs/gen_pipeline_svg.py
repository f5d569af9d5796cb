"""Draw the model-call pipeline as plain SVG: ``uv run python docs/gen_pipeline_svg.py``.

Writes ``docs/pipeline.svg`` next to this script. The units, their order, classes,
modules and roles come from ``PIPELINE_UNITS`` in ``agentgraph/middleware/pipeline.py``,
the list ``ContextPipeline.middleware`` walks (outermost first); a unit another one
builds (the prompt view, built by masking) shares a frame with its builder.
``tests/unit/test_middleware_pipeline.py`` checks that the committed SVG is what this
script draws, and that it draws every unit of a built pipeline in order.
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from agentgraph.middleware.pipeline import PIPELINE_UNITS, PipelineUnit  # noqa: E402
from agentgraph.runtime.nodes import model_call  # noqa: E402

OUT = Path(__file__).with_name("pipeline.svg")
# Pixels: box size, gap between boxes (the arrow), outer margin, a frame's inset around
# its boxes and the height of its caption.
BOX_W, BOX_H, GAP, MARGIN, INSET, CAPTION_H = 640, 72, 26, 30, 14, 24
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"
MONO = "font-family='DejaVu Sans Mono, monospace'"
UNIT_FILL, ENDS_FILL = "#eef4fb", "#f4f4f4"

# What the chain runs between: (title, where, what it does); drawn grey.
PLANNER = (
    "planner node",
    f"{model_call.__name__.replace('.', '/')}.py · compose()",
    "state → ModelRequest",
)
MODEL = ("chat model", "langchain-core / provider · invoke", "errors → langchain-core types")


def groups() -> list[list[PipelineUnit]]:
    """The units in order, a unit built by another one in its builder's group."""
    out: list[list[PipelineUnit]] = []
    for unit in PIPELINE_UNITS:
        if out and unit.built_by in {member.attribute for member in out[-1]}:
            out[-1].append(unit)
        else:
            out.append([unit])
    return out


def where(unit: PipelineUnit) -> str:
    """The unit's class and source file (relative to the repository root)."""
    return f"{unit.cls.__name__} · {unit.cls.__module__.replace('.', '/')}.py"


def caption(group: list[PipelineUnit]) -> str:
    """What a frame of several units says about them."""
    builder, built = group[0], group[1:]
    names = ", ".join(unit.title for unit in built)
    return f"{builder.title} builds the {names}; without {builder.title}, that unit stands here"


def box(x: int, y: int, fill: str, title: str, role: str, where: str) -> list[str]:
    """One box: a bold title, its role, then where it lives."""
    return [
        f"<rect x='{x}' y='{y}' width='{BOX_W}' height='{BOX_H}' rx='8' "
        f"fill='{fill}' stroke='#36c'/>",
        f"<text x='{x + 12}' y='{y + 22}' {FONT} font-size='15' font-weight='bold'>"
        f"{escape(title)}</text>",
        f"<text x='{x + 12}' y='{y + 42}' {FONT} font-size='12' fill='#333'>{escape(role)}</text>",
        f"<text x='{x + 12}' y='{y + 61}' {MONO} font-size='11' fill='#555'>{escape(where)}</text>",
    ]


def arrow(x: int, y: int) -> str:
    """The arrow from one step down to the next, starting at ``y``."""
    return (
        f"<line x1='{x}' y1='{y}' x2='{x}' y2='{y + GAP - 4}' "
        "stroke='#555' stroke-width='2' marker-end='url(#arrow)'/>"
    )


def group_height(group: list[PipelineUnit]) -> int:
    """A group's height: one box, or a frame with a caption around several."""
    if len(group) == 1:
        return BOX_H
    return CAPTION_H + len(group) * BOX_H + (len(group) - 1) * GAP + INSET


def render() -> str:
    """The SVG text."""
    steps = groups()
    x = MARGIN + INSET
    width = BOX_W + 2 * (MARGIN + INSET)
    height = 2 * MARGIN + sum(group_height(g) for g in steps) + 2 * BOX_H + (len(steps) + 1) * GAP
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}'>",
        "<defs><marker id='arrow' markerWidth='10' markerHeight='10' refX='5' refY='5' "
        "orient='auto'><path d='M0,0 L10,5 L0,10 z' fill='#555'/></marker></defs>",
        f"<rect width='{width}' height='{height}' fill='white'/>",
    ]
    mid = x + BOX_W // 2
    y = MARGIN
    parts += box(x, y, ENDS_FILL, PLANNER[0], PLANNER[2], PLANNER[1])
    y += BOX_H
    for group in steps:
        parts.append(arrow(mid, y))
        y += GAP
        if len(group) == 1:
            unit = group[0]
            parts += box(x, y, UNIT_FILL, unit.title, unit.role, where(unit))
            y += BOX_H
            continue
        parts.append(
            f"<rect x='{MARGIN}' y='{y}' width='{BOX_W + 2 * INSET}' "
            f"height='{group_height(group)}' rx='10' fill='none' stroke='#36c' "
            "stroke-dasharray='6,4'/>"
        )
        parts.append(
            f"<text x='{x}' y='{y + 17}' {FONT} font-size='12' font-style='italic' "
            f"fill='#36c'>{escape(caption(group))}</text>"
        )
        inner = y + CAPTION_H
        for i, unit in enumerate(group):
            if i:
                parts.append(
                    f"<line x1='{mid}' y1='{inner - GAP}' x2='{mid}' y2='{inner}' "
                    "stroke='#36c' stroke-width='2' stroke-dasharray='3,3'/>"
                )
            parts += box(x, inner, UNIT_FILL, unit.title, unit.role, where(unit))
            inner += BOX_H + GAP
        y += group_height(group)
    parts.append(arrow(mid, y))
    y += GAP
    parts += box(x, y, ENDS_FILL, MODEL[0], MODEL[2], MODEL[1])
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    """Write ``docs/pipeline.svg``."""
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

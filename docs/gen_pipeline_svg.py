"""Draw the model-call pipeline as plain SVG: ``python docs/gen_pipeline_svg.py``.

Writes ``docs/pipeline.svg`` next to this script (no dependencies beyond Python).
The order is that of ``ContextPipeline.middleware`` in ``agentgraph/middleware/
pipeline.py`` (outermost first; masking builds the prompt view, so the two share a box);
``tests/unit/test_middleware_pipeline.py`` checks that the committed SVG is what this
script draws.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

OUT = Path(__file__).with_name("pipeline.svg")
BOX_W, BOX_H, GAP, MARGIN = 640, 58, 26, 30
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"

# (title, module, hook, what it does); a unit still to come is drawn dashed.
UNITS: list[tuple[str, str, str, str]] = [
    ("planner node", "nodes/model_turn.py, model_call.py", "compose()", "state → ModelRequest"),
    (
        "observation masking → prompt view",
        "middleware/masking.py, prompt_view.py",
        "wrap_model_call",
        "old outputs → pointers, then the view",
    ),
    ("compaction", "middleware/compaction.py", "wrap_model_call", "auto · on overflow · /compact"),
    (
        "overflow recovery",
        "middleware/overflow.py",
        "wrap_model_call",
        "cut outputs · shrink max_tokens",
    ),
    ("retry", "middleware/retry.py", "wrap_model_call", "429 · 5xx · dropped connection"),
    (
        "text tool calls",
        "middleware/text_tool_calls.py",
        "wrap_model_call",
        "calls written as text → tool_calls",
    ),
    (
        "prompt caching",
        "middleware/prompt_caching.py",
        "wrap_model_call",
        "Anthropic: cache_control breakpoints",
    ),
    ("chat model", "langchain-core / provider", "invoke", "errors → langchain-core types"),
]


def render() -> str:
    """The SVG text."""
    height = MARGIN * 2 + len(UNITS) * BOX_H + (len(UNITS) - 1) * GAP
    width = BOX_W + MARGIN * 2
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}'>",
        "<defs><marker id='arrow' markerWidth='10' markerHeight='10' refX='5' refY='5' "
        "orient='auto'><path d='M0,0 L10,5 L0,10 z' fill='#555'/></marker></defs>",
        f"<rect width='{width}' height='{height}' fill='white'/>",
    ]
    for i, (title, module, hook, note) in enumerate(UNITS):
        y = MARGIN + i * (BOX_H + GAP)
        dashed = " stroke-dasharray='6,4'" if "to come" in title else ""
        fill = "#eef4fb" if hook == "wrap_model_call" else "#f4f4f4"
        parts.append(
            f"<rect x='{MARGIN}' y='{y}' width='{BOX_W}' height='{BOX_H}' rx='8' "
            f"fill='{fill}' stroke='#36c'{dashed}/>"
        )
        parts.append(
            f"<text x='{MARGIN + 12}' y='{y + 22}' {FONT} font-size='15' font-weight='bold'>"
            f"{escape(title)}</text>"
        )
        parts.append(
            f"<text x='{MARGIN + 12}' y='{y + 42}' {FONT} font-size='12' fill='#333'>"
            f"{escape(module)} · {escape(hook)} · {escape(note)}</text>"
        )
        if i < len(UNITS) - 1:
            x = MARGIN + BOX_W // 2
            parts.append(
                f"<line x1='{x}' y1='{y + BOX_H}' x2='{x}' y2='{y + BOX_H + GAP - 4}' "
                "stroke='#555' stroke-width='2' marker-end='url(#arrow)'/>"
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    """Write ``docs/pipeline.svg``."""
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

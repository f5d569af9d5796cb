"""Rebuild docs/benchmarks.md from the headline file and each benchmark's docs/bench/*.md.

Run: uv run python bench/collect.py (after re-running any bench/bench_*.py).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = (
    "tokens",
    "cuts",
    "history",
    "long_task",
    "context_v2",
    "context_v3",
    "storage",
    "undo",
    "startup",
    "delegation",
    "reliability",
)


def demote(text: str) -> str:
    """Shift every markdown heading one level down (each file becomes a section)."""
    return "\n".join("#" + line if line.startswith("#") else line for line in text.splitlines())


def main() -> None:
    bench = ROOT / "docs" / "bench"
    parts = [(ROOT / "docs" / "bench" / "_headline.md").read_text(encoding="utf-8").rstrip()]
    names = [n for n in ORDER if (bench / f"{n}.md").exists()]
    names += sorted(
        p.stem for p in bench.glob("*.md") if p.stem not in ORDER and p.stem != "_headline"
    )
    for name in names:
        text = (bench / f"{name}.md").read_text(encoding="utf-8").strip()
        parts.append(demote(text))
    (ROOT / "docs" / "benchmarks.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

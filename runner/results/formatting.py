"""Number and cell formatting shared by the text renderers (terminal, Markdown)."""

from __future__ import annotations

from typing import Any

SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    if abs(value) >= 1e5:   # 191.6 G, not 191,556,811,552
        scale, prefix = next((f, p) for f, p in SI_PREFIXES if abs(value) >= f)
        return f"{value / scale:.4g} {prefix}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def cell_text(summary: dict[str, Any] | None, key: str, best: float | None) -> str:
    if summary is None:
        return ""
    if summary["status"] == "not_applicable":
        return "NA"
    if summary["status"] != "ok":
        return summary["status"]
    value = summary.get(key)
    text = fmt(value)
    return f"**{text}**" if best is not None and value == best else text

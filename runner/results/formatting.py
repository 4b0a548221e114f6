"""Number and cell formatting shared by the text renderers (terminal, Markdown; the HTML page is
rendered from the Markdown). CSV and JSONL keep raw values and never pass through here.

Numbers print with significant figures, never a fixed count of decimals: a 4 µs step is
0.00400 ms and 2 mJ is 0.00200 J, never 0.00 (a zero that would read as "not measured" or "free").
"""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Iterable, Mapping

SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
SIGNIFICANT = 3
SCIENTIFIC_BELOW = 1e-4     # 0.000123 still reads; below it, 1.23e-05


def fmt(value: float | None, significant: int = SIGNIFICANT) -> str:
    """`significant` figures (3: 12.3, 1.50, 0.0500, 0.00123); thousands with a separator
    (7,953) and SI prefixes from 100 000 (191.6 G); "–" for unknown; 0 only for a true zero."""
    if value is None:
        return "–"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1e5:   # 191.6 G, not 191,556,811,552
        scale, prefix = next((f, p) for f, p in SI_PREFIXES if magnitude >= f)
        return f"{value / scale:.4g} {prefix}"
    if magnitude >= min(999.5, 10 ** significant - 0.5):   # no decimals left to show
        return f"{value:,.0f}"
    if magnitude < SCIENTIFIC_BELOW:
        return f"{value:.{significant - 1}e}"
    return f"{value:#.{significant}g}".rstrip(".")   # '#' keeps trailing zeros: 1.50, not 1.5


def usd(value: float | None) -> str:
    """Dollars: cents from $1 ($3.67, $1,204.50), significant figures below ($0.412,
    $0.00123), "–" for unknown."""
    if value is None:
        return "–"
    if abs(value) >= 1 or value == 0:
        return f"${value:,.2f}"
    return f"${fmt(value)}"


def percent(fraction: float | None, over: bool = False) -> str:
    """A fraction as a percentage with significant figures: 0.0004 → "0.0400 %"; with `over`
    (a % of peak), marked ‼ above 100 % (the cell's peak_note says why)."""
    if fraction is None:
        return "–"
    return f"{fmt(fraction * 100)} %" + (" ‼" if over and fraction > 1 else "")


def peak_notes(summaries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The notes of the cells above 100 % of their peak, each a paragraph."""
    return [line for s in summaries if s.get("peak_note") for line in (s["peak_note"], "")]


def best_text(values: Iterable[float | None], lower_is_better: bool = True,
              significant: int = SIGNIFICANT) -> str | None:
    """The printed form of the best value of a row, to be bolded wherever a value prints so; None
    (nothing bold) unless the row's values differ once printed: a tie as printed is all bold,
    and a row whose values all print the same (or a single value) has no best."""
    known = [v for v in values if v is not None]
    if len(known) < 2 or len({fmt(v, significant) for v in known}) < 2:
        return None
    best = min(known) if lower_is_better else max(known)
    return fmt(best, significant)


# A cell that computed a different answer from its row (runner.results.analysis.answers): marked in
# every table, never bold.
DIFFERENT_MARK = "≠"
# A float8 cell whose float8 was emulated (no float8 matmul where it ran): its time is shown,
# marked, never bold and never in a speed ratio (analysis/quantized.py).
EMULATED_MARK = "~"


def cell_text(summary: Mapping[str, Any] | None, key: str, best: str | None) -> str:
    """A table cell: NA, a status word, or the value, bold when it prints as `best`
    (best_text's answer); a cell with a different answer is marked and never bold."""
    if summary is None:
        return ""
    if summary["status"] == "not_applicable":
        return "NA"
    if summary["status"] != "ok":
        return summary["status"]
    text = fmt(summary.get(key))
    if summary.get("answer_differs"):
        return f"{text} {DIFFERENT_MARK}"
    if summary.get("emulated"):
        return f"{text} {EMULATED_MARK}"
    return f"**{text}**" if best is not None and text == best else text


def comparable_values(summaries: Iterable[Mapping[str, Any] | None], key: str) -> list[Any]:
    """The values of `key` among ok cells whose answer agrees with their row: what a "best"
    is chosen from."""
    return [s.get(key) for s in summaries
            if s is not None and s["status"] == "ok" and not s.get("answer_differs")
            and not s.get("emulated") and not s.get("column_group")]


# --- a user's string inside Markdown --------------------------------------------------------------
# report.md and compare's Markdown hold strings that a user, a file or a worker chose (option
# values, names, paths, error messages). Each goes through one of these two for the context it
# lands in, so that it reads as the characters it is: never a column of a table (`|`), a link
# (`[x](javascript:…)`), an HTML tag (`<img onerror=…>`), an entity (`&#106;`) or emphasis.
# report.html renders report.md with the same rules (render/html.py).

# Every character Markdown could read as its own: backslash-escaped (CommonMark takes `\` before
# any ASCII punctuation as that character). Brackets only where they would close a link's text
# (`](`: no line of a report is a link definition, so `[precision=float32]` is no link), `_`
# only where it could open or close emphasis (`sleep_ms` stays as written), and `>` never (it
# means something only at the start of a line, where no user's string is put; `<` opens tags).
MARKDOWN_SPECIAL = re.compile(r"[\\`*<|&~]|\](?=\()|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def md_text(text: object) -> str:
    """A user's string as literal Markdown text, on one line; safe in a table cell too."""
    line = " ".join(str(text).splitlines())
    return MARKDOWN_SPECIAL.sub(lambda found: "\\" + found.group(0), line)


def md_code(text: object, in_table: bool = False) -> str:
    """A user's string as a code span (monospace, nothing inside it is Markdown), on one line:
    fenced by more backticks than it holds in a row; in a table cell its `|` escaped (GFM reads
    `\\|` there as `|`, inside code too)."""
    line = " ".join(str(text).splitlines())
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line[:1] == "`" or line[-1:] == "`" or \
        (line[:1] == " " and line[-1:] == " " and line.strip()) else ""
    if in_table:
        line = line.replace("|", "\\|")
    return f"{fence}{pad}{line}{pad}{fence}"

"""report.html: the Markdown report rendered as one self-contained page (inline CSS, plots embedded
as base64 PNG), so it opens from disk without a server and travels as a single file.

report.md stays the one source of the report's content; this module renders the small Markdown
subset that runner.results.render.markdown writes (headings, paragraphs, pipe tables, bullet lists,
images, `code` and **bold**), which needs no Markdown library.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 2em auto; max-width: 1400px; padding: 0 1em; color: #1f2328; line-height: 1.45; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 1.8em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; display: block;
        overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; white-space: nowrap; }
th { background: #f6f8fa; }
tr:nth-child(even) td { background: #fbfcfd; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #eff1f3; padding: 1px 4px; border-radius: 4px; font-size: 12px; }
td strong { color: #116329; }
li { margin: .2em 0; }
img { max-width: 100%; border: 1px solid #d0d7de; margin: .5em 0; }
.missing { color: #9a6700; }
"""

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")


PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
BOLD = object()           # a `**` of the runner's own Markdown


def _inline(text: str) -> str:
    """Inline Markdown as report.md writes it, rendered as CommonMark would: code spans (any
    fence of backticks), backslash escapes (`\\<` is a `<`), **bold**; everything else is text,
    HTML-escaped. A user's string (formatting.md_text, md_code) never makes a tag or bold."""
    parts: list[object] = []          # text, BOLD, or ("code", text)
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in PUNCTUATION:
            parts.append(text[i + 1])
            i += 2
        elif char == "`":
            fence = text[i:len(text) - len(text[i:].lstrip("`"))]
            close = re.compile(rf"(?<!`){fence}(?!`)").search(text, i + len(fence))
            if close is None:
                parts.append(fence)
                i += len(fence)
                continue
            body = text[i + len(fence):close.start()]
            if len(body) > 1 and body[0] == body[-1] == " " and body.strip():
                body = body[1:-1]
            parts.append(("code", body))
            i = close.end()
        elif text.startswith("**", i):
            parts.append(BOLD)
            i += 2
        else:
            parts.append(char)
            i += 1
    bolds = [k for k, part in enumerate(parts) if part is BOLD]
    unpaired = set(bolds[len(bolds) - len(bolds) % 2:])        # an odd last `**` is text
    out, strong = [], False
    for k, part in enumerate(parts):
        if part is BOLD and k not in unpaired:
            out.append("</strong>" if strong else "<strong>")
            strong = not strong
        elif part is BOLD:
            out.append("**")
        elif isinstance(part, tuple):
            out.append(f"<code>{html.escape(part[1])}</code>")
        else:
            out.append(html.escape(str(part)))
    return "".join(out)


def _row(line: str) -> list[str]:
    """A table row's cells, split at its unescaped pipes; `\\|` in a cell is a `|` (GFM's rule,
    inside code spans too)."""
    cells, current, i = [], "", 0
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            current += body[i:i + 2]
            i += 2
        elif body[i] == "|":
            cells.append(current)
            current, i = "", i + 1
        else:
            current += body[i]
            i += 1
    if current.strip():
        cells.append(current)
    return [cell.strip().replace("\\|", "|") for cell in cells]


def _table(lines: list[str]) -> str:
    head, align, body = _row(lines[0]), _row(lines[1]), [_row(line) for line in lines[2:]]
    right = [a.endswith(":") for a in align]

    def cells(values: list[str], tag: str) -> str:
        return "".join(f'<{tag}{" class=num" if i < len(right) and right[i] else ""}>'
                       f"{_inline(v)}</{tag}>" for i, v in enumerate(values))

    rows = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in body)
    return f"<table><thead><tr>{cells(head, 'th')}</tr></thead><tbody>{rows}</tbody></table>"


def _image(alt: str, src: str, root: Path) -> str:
    """A plot of the run, embedded. Only a PNG file under the run's own plots/ folder is ever
    read (resolved, so no '..' or symbolic link leads elsewhere): a crafted report.md or name
    cannot embed a file of the host."""
    plots = root.resolve() / "plots"
    path = (root / src).resolve()
    if not (path.is_relative_to(plots) and (root / "plots").resolve() == plots
            and path.suffix == ".png" and path.is_file()):
        return f'<p class="missing">{html.escape(alt)}: image {html.escape(src)} missing</p>'
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></figure>'


def markdown_to_html(markdown: str, root: Path) -> str:
    """Body HTML for the Markdown subset runner.results.render.markdown writes; images read
    relative to root."""
    blocks: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            blocks.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            start = i
            while i < len(lines) and lines[i].startswith("|"):
                i += 1
            blocks.append(_table(lines[start:i]))
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            blocks.append(f"<ul>{''.join(items)}</ul>")
        elif match := _IMAGE.match(line.strip()):
            blocks.append(_image(match["alt"], match["src"], root))
            i += 1
        else:
            start = i
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ")) \
                    and not _IMAGE.match(lines[i].strip()):
                i += 1
            blocks.append(f"<p>{_inline(' '.join(lines[start:i]))}</p>")
    return "\n".join(blocks)


def render(markdown: str, root: Path, title: str) -> str:
    """The whole page: report.md's content, with plots under root embedded."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
            f"{markdown_to_html(markdown, root)}\n</body></html>\n")

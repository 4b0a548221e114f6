"""mkdocs hook: the parts of the manual made from the code (runner/manual.py), put into the
pages that ask for them with a marker line, at every build — so they cannot drift."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # the checkout's runner package

from runner import manual  # noqa: E402

MARKERS = {"<!-- generated: cli-reference -->": manual.cli_reference,
           "<!-- generated: settings -->": manual.settings_table,
           "<!-- generated: knobs -->": manual.knobs_table,
           "<!-- generated: record-fields -->": manual.record_fields_table}


def on_page_markdown(markdown: str, page, config, files) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown

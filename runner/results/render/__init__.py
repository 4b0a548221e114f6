"""One module per output, fed by the analysis and never by another renderer: terminal, markdown
(markdown_parts its parts), html, files (CSV, JSONL), plots, compare; write.py runs them all."""

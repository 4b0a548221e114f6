"""The front door: the README's first screen holds the set-up, run and test commands; the docs
site builds with --strict and every page renders in headless Chromium; the CLI reference is the
parsers' (generated, so it cannot drift); every command the README and the docs show runs as
typed (its subcommand's --help, and every option it names exists)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner import cli, manual
from runner.paths import RESULTS_DIR, REPO_ROOT as ROOT

ARTIFACTS = RESULTS_DIR / "test-artifacts"
SET_UP = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'"
RUN = ".venv/bin/python -m runner matrix.toml"
TEST = ".venv/bin/python -m pytest"


def documents() -> list[Path]:
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as CI builds it (mkdocs build --strict)."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(out)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def nav_pages() -> list[str]:
    """The Markdown files mkdocs.yml's nav names, in order (a title with a colon is quoted)."""
    return re.findall(r'^\s*- (?:"[^"\n]*": |[^:"\n]+: )?([\w./-]+\.md)\s*$',
                      (ROOT / "mkdocs.yml").read_text(), re.M)


def test_the_readme_first_screen_has_the_three_commands():
    readme = (ROOT / "README.md").read_text().splitlines()
    assert len(readme) <= 300
    first_screen = readme[:25]
    for command in (SET_UP, RUN, TEST):
        assert command in first_screen, f"{command!r} not in the README's first 25 lines"
    ci = (ROOT / ".ci" / "run").read_text()
    assert SET_UP in ci and TEST in ci and "mkdocs build --strict" in ci


def test_every_nav_page_is_built(site):
    pages = nav_pages()
    assert len(pages) >= 18 and "cli.md" in pages and "settings.md" in pages
    # Every page of the manual is in the nav (mkdocs only notes one that is not).
    assert sorted(pages) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    for page in pages:
        assert (site / page.replace(".md", ".html")).is_file(), page
    for page in ("cli.html", "settings.html", "results.html"):        # every marker filled
        assert "generated: " not in (site / page).read_text()
    from runner.settings import SETTINGS

    table = (site / "settings.html").read_text()
    assert all(f"<code>{name}</code>" in table for name in SETTINGS)


@pytest.mark.browser
def test_every_page_renders_in_chromium(site, chromium, tmp_path):
    pages = [site / page.replace(".md", ".html") for page in nav_pages()]

    def dump(page: Path) -> str:                # a profile each: they run side by side
        return chromium(f"--user-data-dir={tmp_path / page.stem}", "--dump-dom", page.as_uri())

    with ThreadPoolExecutor(4) as pool:         # Chromium mostly waits on its own start-up
        doms = list(pool.map(dump, pages))
    for page, dom in zip(pages, doms, strict=True):
        assert 'data-js-focus-visible' in dom, f"{page.name}: the theme's script did not run"
        assert re.search(r"<h1[^>]*>", dom), f"{page.name}: no title"
        article = dom[dom.index('<article'):dom.index('</article>')]
        assert len(re.sub(r"<[^>]+>", "", article)) > 300, f"{page.name}: empty"
        for link in re.findall(r'href="([^"#]+\.html)(?:#[^"]*)?"', article):
            if not link.startswith(("http:", "https:")):
                assert (page.parent / link).is_file(), f"{page.name} links to {link}"
    shot = tmp_path / "index.png"
    chromium("--window-size=1280,1000", f"--screenshot={shot}", (site / "index.html").as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    # The report's screenshot on the home page is drawn: plenty of non-white pixels.
    assert (pixels[..., :3].min(axis=2) < 0.8).sum() > 20_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "docs-index.png")


def parsers() -> list:
    """Every parser of the command line, subcommands' own included."""
    import argparse

    found, todo = [], [cli.build_parser(name) for name in cli.COMMANDS]
    while todo:
        parser = todo.pop()
        found.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
    return found


def test_the_cli_reference_is_generated_from_the_parsers(site):
    source = (ROOT / "docs" / "cli.md").read_text()
    assert "<!-- generated: cli-reference -->" in source
    assert "| `--" not in source                 # no option table written by hand
    page = (site / "cli.html").read_text()
    reference = manual.cli_reference()
    all_parsers = parsers()
    # history's six actions, profile's two, prices' three
    assert len(all_parsers) == len(cli.COMMANDS) + 6 + 2 + 3
    for parser in all_parsers:
        assert f"<code>{parser.prog}</code>" in page, parser.prog
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"<code>{option}" in page, f"{parser.prog} {option}"
                    assert f"`{option}" in reference
        usage = manual.usage(parser).split("\n")[0].strip()
        assert usage.replace(">", "&gt;").replace("<", "&lt;") in page, usage


def test_a_new_option_reaches_the_reference(monkeypatch):
    # The reference is the parsers': an option added to a command appears with its help.
    from runner.commands import compare

    original = compare.add_arguments

    def more(parser):
        original(parser)
        parser.add_argument("--brand-new", metavar="X", help="a brand-new option")

    monkeypatch.setattr(compare, "add_arguments", more)
    assert "| `--brand-new X` | a brand-new option |" in manual.cli_reference()


COMMAND = re.compile(r"(?:\.venv/bin/)?python3? -m runner\b([^`\n]*)")
HISTORY_ACTIONS = ("import", "list", "show", "diff", "regressions", "site")


def shown_commands() -> list[tuple[str, str]]:
    """(document, the words after `python -m runner`) of every command the documents show,
    in code blocks and inline code alike, a continued line (`\\`) joined."""
    found = []
    for path in documents():
        text = re.sub(r"\\\n\s*", " ", path.read_text())
        for match in COMMAND.finditer(text):
            words = match.group(1).split("#")[0].split(";")[0].split("|")[0]
            found.append((path.name, words.replace("]", " ").replace("[", " ")))
    return found


def command_of(words: str) -> tuple[str, ...]:
    tokens = words.split()
    if not tokens or tokens[0] not in cli.COMMANDS:
        return ("run",)
    if tokens[0] == "history" and len(tokens) > 1 and tokens[1] in HISTORY_ACTIONS:
        return ("history", tokens[1])
    if tokens[0] == "profile":            # `profile RUN_DIR` is `profile cells RUN_DIR`
        return ("profile", tokens[1] if len(tokens) > 1 and tokens[1] == "diff" else "cells")
    return (tokens[0],)


def test_every_documented_command_runs_as_typed():
    shown = shown_commands()
    assert len(shown) >= 40, len(shown)
    helps: dict[tuple[str, ...], str] = {}
    for _, words in shown:
        helps.setdefault(command_of(words), "")
    for command in helps:
        argv = [] if command == ("run",) else list(command)
        done = subprocess.run([sys.executable, "-m", "runner", *argv, "--help"], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"python -m runner {' '.join(argv)} --help: {done.stderr}"
        helps[command] = done.stdout
    for document, words in shown:
        help_text = helps[command_of(words)]
        for option in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", words):
            assert re.search(rf"{option}\b", help_text), \
                f"{document}: python -m runner{words}: no option {option}"


def test_no_document_spells_a_command_another_way():
    # `runner history …`, `runner doctor` and the like are not installed commands.
    other = re.compile(r"(?<![\w./-])(?<!-m )runner (?:" + "|".join(cli.COMMANDS) + r")\b")
    for path in documents():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not other.search(line), f"{path.name}:{number}: {line.strip()}"

"""The parts of the manual (docs/) made from the code, so they cannot drift from it: the CLI
reference from the argparse parsers of runner/cli.py, the settings table from the registry of
runner/settings.py, the tuned tier's knobs from the API records (runner/worker/catalog/apis.py),
the record's fields from their declaration (runner/worker/protocol.py's `Record`). docs/hooks.py
puts each into the page that asks for it (`<!-- generated: cli-reference -->`,
`<!-- generated: settings -->`, `<!-- generated: knobs -->`,
`<!-- generated: record-fields -->`) when mkdocs builds the site."""

from __future__ import annotations

import argparse
import re
import types
import typing

WIDTH = 100         # the usage lines are wrapped as a 100-column terminal would


def cli_reference() -> str:
    """Markdown: every command, its usage, its arguments (nested subcommands included)."""
    from .cli import COMMANDS, build_parser

    parts = ["| command | what it does |", "|---|---|"]
    parts += [f"| [`{_prog(name)}`](#{_anchor(_prog(name))}) | {_cell(summary)} |"
              for name, (_, summary) in COMMANDS.items()]
    for name, (_, summary) in COMMANDS.items():
        parts += _parser_section(build_parser(name), summary, level=3)
    return "\n".join(parts) + "\n"


def settings_table() -> str:
    """Markdown: a table of the settings users set, then one of those the runner and the
    matrices set for the workers."""
    from .settings import SETTINGS, USER

    head = ["| variable | value | default | what it does | where |", "|---|---|---|---|---|"]
    users = [s for s in SETTINGS.values() if s.set_by == USER]
    others = [s for s in SETTINGS.values() if s.set_by != USER]
    lines = head + [f"| `{s.name}` | {_cell(s.kind)} | {_cell(_default(s))} | "
                    f"{_cell(s.meaning)} | {_cell(s.applies)} |" for s in users]
    lines += ["", "Set by the runner for its workers, by an environment's `env` in a matrix, or "
              "by the test suite (not for users to set on the host):", "",
              "| variable | value | set by | what it does | where |", "|---|---|---|---|---|"]
    lines += [f"| `{s.name}` | {_cell(s.kind)} | {s.set_by} | {_cell(s.meaning)} | "
              f"{_cell(s.applies)} |" for s in others]
    return "\n".join(lines) + "\n"


def knobs_table() -> str:
    """Markdown: every API's knobs (on each Keras backend), their values (the default first),
    how each reaches the worker, and where it applies."""
    from .worker import catalog

    lines = ["| API | knob | values (default first; on a CPU) | sets | applies to | what it is |",
             "|---|---|---|---|---|---|"]
    for name, record in catalog.API_RECORDS.items():
        for backend in record.backends or (None,):
            where = f"{name} on {backend}" if backend else name
            for knob in record.on(backend).knobs or ():
                values = " · ".join(map(_code, knob.values))
                if knob.cpu_values is not None:
                    values += " (CPU: " + " · ".join(map(_code, knob.cpu_values)) + ")"
                sets = f"axis `{knob.axis}`" if knob.axis else \
                    f"`{knob.variable}` before import" if knob.variable else "its own code"
                filters = [f"{label} {', '.join(values_)}" for label, values_ in (
                    ("tasks", knob.tasks), ("precision", knob.precisions),
                    ("workloads", knob.workloads), ("families", knob.families),
                    ("devices", knob.devices)) if values_]
                if knob.only_with:
                    filters.append(f"with {knob.only_with} on")
                lines.append(f"| {where} | `{knob.name}` | {values} | {sets} | "
                             f"{_cell('; '.join(filters) or 'every cell')} | {_cell(knob.help)} |")
            if not record.on(backend).knobs:
                lines.append(f"| {where} | none | | | | its tuned cell is its defaults |")
    return "\n".join(lines) + "\n"


def _code(value: object) -> str:
    return '`""` (none)' if value == "" else f"`{value}`"


def record_fields_table() -> str:
    """Markdown: every field of the result record, in its order: its type, who fills it and
    what it means, as runner/worker/protocol.py declares it."""
    from .worker import catalog
    from .worker.protocol import RECORD_FIELDS, SPEC, Record

    declared = typing.get_type_hints(Record)
    lines = ["| field | type | filled by | what it means |", "|---|---|---|---|"]
    for name, filled in RECORD_FIELDS.items():
        meaning = filled.help
        if filled == SPEC and name in catalog.AXES:     # an axis: its declaration says
            meaning = f"the {name} axis: {catalog.AXES[name].help}"
        lines.append(f"| `{name}` | {_cell(type_text(declared.get(name, typing.Any)))} | "
                     f"{filled.origin} | {_cell(meaning).replace('<', '&lt;')} |")
    return "\n".join(lines) + "\n"


JSON_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean",
              type(None): "null"}


def type_text(kind: typing.Any) -> str:
    """A field's type in JSON's words: `number | null`, `list of number`, `object`."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is typing.Any:
        return "any"
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is list:
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict or typing.is_typeddict(kind):
        return "object"
    return JSON_NAMES.get(kind, getattr(kind, "__name__", str(kind)))


def _default(setting) -> str:
    if setting.default_text:
        return setting.default_text
    value = setting.default
    return "unset" if value is None else (", ".join(value) or "none") \
        if isinstance(value, tuple) else f"{value:g}" if isinstance(value, float) else str(value)


def _prog(command: str) -> str:
    return "python -m runner" + ("" if command == "run" else f" {command}")


def _anchor(title: str) -> str:
    """The id mkdocs (Python-Markdown's toc) gives a heading made of this code span."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def _parser_section(parser: argparse.ArgumentParser, summary: str, level: int) -> list[str]:
    lines = ["", f"{'#' * level} `{parser.prog}`", "", _cell(summary[0].upper() + summary[1:])
             + ("" if summary.endswith(".") else "."), "", "```", usage(parser).rstrip(), "```"]
    rows = [_row(action) for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))]
    if rows:
        lines += ["", "| argument | meaning |", "|---|---|", *rows]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            lines += ["", "| action | what it does |", "|---|---|"]
            lines += [f"| `{name}` | {_cell(helps.get(name, ''))} |" for name in action.choices]
            for name, sub in action.choices.items():
                lines += _parser_section(sub, helps.get(name, ""), level + 1)
    return lines


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help()


def _row(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = "" if action.nargs == 0 else " " + _metavar(action)
        name = ", ".join(f"`{option}{metavar}`" for option in action.option_strings)
    else:
        name = f"`{_metavar(action)}`"
    meaning = action.help or ""
    if action.choices and action.metavar is not None and not isinstance(action.choices, dict):
        meaning += f" (one of: {', '.join(str(c) for c in action.choices)})"
    if action.required and action.option_strings:
        meaning += " (required)"
    if action.nargs in ("*", "+") or isinstance(action, argparse._AppendAction):
        meaning += "" if "repeatable" in meaning else " (repeatable)"
    return f"| {name} | {_cell(meaning)} |"


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        text = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices:
        text = "|".join(str(c) for c in action.choices)
    else:
        text = action.dest.upper() if action.option_strings else action.dest
    return f"[{text}]" if action.nargs == "?" and action.option_strings else text


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")

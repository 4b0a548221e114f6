"""issue.md: an issue-ready regression report (results/analysis/issue.py made every figure), as
Markdown an upstream tracker takes as it is — and nothing of the user's machine: every path of
it, its name and its user's name are taken out of the text last (`scrub`), whatever string
brought them in (an error message, a matrix value)."""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Iterable
from pathlib import Path

import tomli_w

from ..analysis.ab import machine_text
from ..analysis.issue import IssueModel, SideFacts, variables_moved
from ..formatting import fmt, md_code, md_text, percent

NAME = "issue.md"
# An absolute path of this machine: a '/' that starts a path (not one inside a URL) and at least
# one more part, or a home folder (~/...).
ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~<>-])(?:~/|/)(?:[\w.@+-]+/)*[\w.@+-]+/?")


def ratio_text(ratio) -> str:
    if ratio.ratio is None:
        return "–"
    if ratio.low is None or ratio.high is None:
        return f"{ratio.ratio:.3f}×"
    return f"{ratio.ratio:.3f}× ({ratio.low:.3f}–{ratio.high:.3f})"


def time_text(summary, time_ms) -> str:
    low, high = summary.get("median_ci_low_ms"), summary.get("median_ci_high_ms")
    return fmt(time_ms) + (f" ({fmt(low)}–{fmt(high)})" if low is not None and high else "")


def builds_table(control: SideFacts, treatment: SideFacts) -> list[str]:
    def versions(side: SideFacts) -> str:
        v = side.versions
        said = [f"{v.get('framework_name', '')} {v.get('framework_version', '')}".strip()]
        if v.get("keras_backend"):
            said.append(f"backend {v['keras_backend']} {v.get('backend_version', '')}".strip())
        if v.get("python_version"):
            said.append(f"Python {v['python_version']}")
        return ", ".join(s for s in said if s) or "–"

    rows = [("Environment", lambda s: md_code(s.environment, True)),
            ("Build", lambda s: md_text(s.build_text)),
            ("Framework", lambda s: md_text(versions(s))),
            ("Lock (sha256)", lambda s: md_code(s.lock or "–", True)),
            ("Measured", lambda s: md_text(f"{s.ran_on}, run {s.run_id}"))]
    return ["| | Control (A) | Treatment (B) |", "|---|---|---|",
            *[f"| {name} | {get(control)} | {get(treatment)} |" for name, get in rows]]


def measurements(model: IssueModel) -> list[str]:
    answers = {(a.label, a.batch_size): a.verdict for a in model.answers}
    lines = ["| Workload (task) | Batch | A ms (95 % interval) | B ms (95 % interval) | "
             "B ÷ A (95 % interval) | Could have seen | Verdict | Same answer |",
             "|---|---:|---:|---:|---|---:|---|---|"]
    for row in model.table.rows:
        lines.append(f"| {md_text(row.label)} | {row.batch_size or '–'} | "
                     f"{time_text(row.summary_a, row.time_a_ms)} | "
                     f"{time_text(row.summary_b, row.time_b_ms)} | {ratio_text(row.ratio)} | "
                     f"{percent(row.detectable)} | {row.verdict} | "
                     f"{md_text(answers.get((row.label, row.batch_size), '–'))} |")
    if len(model.table.rows) > 1:
        lines.append(f"| Geometric mean | | | | {ratio_text(model.table.overall)} | | | |")
    return lines


def profile_lines(model: IssueModel) -> list[str]:
    if not model.profile_diffs:
        return ["Not profiled on both sides (`python -m runner profile RUN_DIR` profiles a "
                "finished run's cells)."]
    out = []
    for row, diff in model.profile_diffs:
        out += [f"**{md_text(row.label)}, batch {row.batch_size}** — ms per step, B − A:", "",
                "| Op | Category | A ms | B ms | B − A ms | Calls |", "|---|---|---:|---:|---:|---|"]
        out += [f"| {md_code(op['name'], True)} | {md_text(op['category'])} | {fmt(op['a_ms'])} | "
                f"{fmt(op['b_ms'])} | {fmt(op['delta_ms'])} | {md_text(op['mark'])} |"
                for op in diff["ops"]]
        if not diff["op_level"]:
            out += [f"| {md_text(c)} (category) | | {fmt(a)} | {fmt(b)} | {fmt(d)} | |"
                    for c, a, b, d in diff["categories"]]
        out.append("")
    return out


def reproduce_lines(model: IssueModel) -> list[str]:
    variables = [f"{md_code(side.environment)} sets {', '.join(map(md_code, side.variables))}"
                 for side in (model.control, model.treatment) if side.variables]
    said = [f"Variables the environments set for their workers, their values left out: "
            f"{'; '.join(variables)}.", ""] if variables else []
    return ["The two sides as one matrix (`matrix.toml`), A the control:", "", "```toml",
            tomli_w.dumps(model.matrix).rstrip(), "```", "", *said,
            "With dl-bench-runner (a checkout of it, set up as its README says):", "",
            "```sh",
            "python -m runner ab matrix.toml                     # A and B in pairs, A B B A …",
            "python -m runner ab matrix.toml --executor docker   # the same, each in its image",
            "python -m runner reproduce RUN_DIR                  # a finished run again, exactly",
            "```"]


def variable_lines(model: IssueModel) -> list[str]:
    moved = variables_moved(model.control, model.treatment)
    if not moved:
        return []
    return [f"- the workers' variables (values left out): {md_text('; '.join(moved))} — outside "
            "the stacks, and able to move a time by themselves"]


def markdown(model: IssueModel) -> str:
    table, top = model.table, model.headline
    summary = (f"{md_text(model.treatment.build_text)} against "
               f"{md_text(model.control.build_text)}: {len(table.slower)} of {len(table.rows)} "
               f"cells slower" + (f"; geometric mean B ÷ A {ratio_text(table.overall)}"
                                  if len(table.rows) > 1 else "") + ".")
    if top is not None and top.verdict != "slower":
        summary += f" The largest move, {md_text(top.label)}, is judged {top.verdict}."
    parts = [f"# {md_text(model.title)}", "", summary, "", *[f"- {md_text(n)}" for n in model.notes],
             "", "## Builds", "", *builds_table(model.control, model.treatment), "",
             "## What moved between the stacks", "",
             *([f"- {md_text(c)}" for c in table.stack] or ["- the same distributions"]),
             *variable_lines(model), "",
             "## Measurements", "", *measurements(model), "",
             "Each cell × repeat ran in a fresh process; a time is the geometric mean of the "
             "repeats' median step times, its interval the median's across repeats. B ÷ A: "
             "Welch's t on the logarithms of the repeat medians, min(n_A, n_B) − 1 degrees of "
             "freedom. *Could have seen*: the smallest change detected with 80 % power. A "
             f"verdict needs the test and the practical threshold ({md_text(table.threshold_source)}) "
             "to agree.", "",
             "## Machine", "", md_text(machine_text(model.machine)) + ("; " + md_text(
                 model.machine["host_os"]) if "host_os" in model.machine else ""), "",
             "## Where the time moved (profiles)", "", *profile_lines(model), "",
             "## Reproduce", "", *reproduce_lines(model), "",
             "<sub>Made by dl-bench-runner (`python -m runner report RUN --issue`).</sub>", ""]
    return "\n".join(parts)


def private_strings(folders: Iterable[Path]) -> list[str]:
    """What names this machine or its user: the run folders and the current folder (and their
    parents' home), the host's name, the user's name."""
    found = {str(Path.home()), os.getcwd(), *(str(Path(f).resolve()) for f in folders)}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name and len(name) > 2:
            found.add(name)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = ""
    if len(user) > 2:
        found.add(user)
    return sorted(found, key=len, reverse=True)


def scrub(text: str, private: Iterable[str]) -> str:
    """The text without this machine's paths, name or user: each a placeholder (a name only
    where it stands as a word of its own)."""
    for value in private:
        text = text.replace(value, "<private>") if "/" in value else \
            re.sub(rf"(?<![\w.-]){re.escape(value)}(?![\w-])", "<private>", text)
    return ABSOLUTE_PATH.sub("<path>", text)


def write_issue(model: IssueModel, folder: Path, seen: Iterable[Path] = ()) -> Path:
    """issue.md in `folder` (atomically), scrubbed of anything of this machine."""
    from ...worker.protocol import write_text_atomic

    target = folder / NAME
    write_text_atomic(target, scrub(markdown(model), private_strings([folder, *seen])))
    return target


def issue_from_runs(control: tuple[Path, str], treatment: tuple[Path, str],
                    notes: Iterable[str] = (), threshold: float | None = None) -> Path:
    """issue.md in the treatment's run folder: environment control[1] of run folder control[0]
    against treatment[1] of treatment[0] (the same folder for two sides of one run)."""
    from ..analysis.ab import side
    from ..analysis.issue import issue_model
    from ..data.store import open_run
    from ...schema.matrix import read_toml

    sides = []
    for folder, environment in (control, treatment):
        store, manifest = open_run(folder)
        sides.append(side(store.records(manifest), manifest, environment))
    matrix = treatment[0] / "matrix.toml"
    model = issue_model(sides[0], sides[1], (control[0], treatment[0]),
                        read_toml(matrix) if matrix.is_file() else {}, list(notes), threshold)
    return write_issue(model, treatment[0], (control[0],))

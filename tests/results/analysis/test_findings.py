"""The Findings open with their answer (issue 60 item 3): which environment is fastest here, by
how much, and whether this run can tell, in at most five bullets; with too few repeats to tell,
said once at the top with the setting that would; the rest below, grouped by kind."""

from __future__ import annotations

import shutil

import pytest

from runner import cli
from runner.results.analysis import effects, findings
from tests.fixtures import FIXTURE_RUNS
from tests.matrices import matrix_text, this_interpreter
from tests.results.rendered import report_of
from tests.results.synthetic import summary_of


def three_rows(repeats: int) -> list[dict]:
    """jax fastest in three rows (2×, 8× and 4× ahead of the next), torch in one (1.25×); jax
    runs one row alone, numpy another; jit varies on jax. `repeats` processes a cell, 1 % apart."""
    def cell(env: str, ms: float, workload: str, **axes) -> dict:
        spread = [ms * (1 + 0.01 * (k - repeats // 2)) for k in range(repeats)]
        return summary_of(env, spread, workload=workload, api=env, **axes)

    return [cell("jax", 1.0, "elementwise", jit=False), cell("jax", 0.5, "elementwise", jit=True),
            cell("torch", 2.0, "elementwise", jit=False),
            cell("jax", 1.0, "matmul"), cell("torch", 8.0, "matmul"), cell("numpy", 9.0, "matmul"),
            cell("torch", 4.0, "cnn"), cell("jax", 5.0, "cnn"),
            cell("jax", 1.0, "bert"), cell("numpy", 4.0, "bert"),
            cell("numpy", 3.0, "layer")]


def findings_of(cells: list[dict], profile: str | None = None) -> findings.Findings:
    return findings.of(cells, effects.analyse(cells), profile=profile)


def section(text: str) -> list[str]:
    return text.split("\n## Findings\n")[1].split("\n## ")[0].strip().splitlines()


def test_with_intervals_the_answer_names_the_fastest_and_its_lead():
    said = findings_of(three_rows(3))
    assert said.answer == [
        "**jax** is fastest in 3 of 4 rows, by 4.00× over each row's next fastest (geometric "
        "mean; from 2.00× to 8.00×); ahead of every other beyond noise in 3.",
        "**torch** is fastest in cnn (run) [n=1024], batch 1, 1.25× ahead of jax (1 of 4 rows); "
        "ahead of every other beyond noise in 1."]
    kinds = [kind for kind, _ in said.groups]
    assert kinds == ["Settings", "Environments"]        # no answers recorded: no answer check
    assert not any("cannot tell" in s or "no interval" in s for s in said.sentences)
    assert not any(" is fastest " in s for _, group in said.groups for s in group)


def test_with_one_repeat_the_answer_says_once_that_the_run_cannot_tell_and_what_would():
    said = findings_of(three_rows(1), profile="smoke")
    first, *winners = said.answer
    assert first.startswith("**This run cannot tell which is faster beyond noise**: 6 of 6 "
                            "ratios have no interval — too few repeats (1 and 1")
    assert first.endswith("`repeats = 3` or more would give each ratio its 95 % interval "
                          "(`[run] repeats`, or `[profiles.smoke] repeats` where the smoke "
                          "profile sets it).")
    assert [w.split(" is fastest")[0] for w in winners] == ["**jax**", "**torch**"]
    assert not any("beyond noise in" in w for w in winners)     # it cannot tell: never counted
    assert sum("interval" in s for s in said.sentences) == 1    # said once, not on every ratio
    assert len(findings_of(three_rows(1), profile="full").answer[0].split("`[run] repeats`")) == 2


def test_the_answer_holds_at_most_five_bullets_and_names_cells_it_does_not_rank():
    """Five environments each fastest in a row of their own, one cell with a different answer:
    the can-tell line, two winners, the rest of the rows in one line, the caveat."""
    envs = ["a", "b", "c", "d", "e"]
    cells = [summary_of(env, [1.0 + i], workload=f"w{i}", api="jax") for i, env in enumerate(envs)]
    cells += [summary_of("z", [10.0 + i], workload=f"w{i}", api="jax") for i in range(5)]
    cells.append(summary_of("y", [5.0], workload="w0", api="jax"))
    cells[-1]["answer_differs"] = True
    said = findings_of(cells)
    assert len(said.answer) == findings.ANSWER_BULLETS
    assert said.answer[0].startswith("**This run cannot tell")
    assert said.answer[1].startswith("**a** is fastest in w0 (run) [n=1024], batch 1, 10.0× "
                                     "ahead of z (1 of 5 rows)")
    assert said.answer[3].startswith("Fastest in the other rows: c in w2 (run) [n=1024], "
                                     "batch 1 (4.00× ahead of z); d in w3")
    assert said.answer[-1] == ("1 cell(s) computed a different answer from their row and are "
                               "not ranked (marked ≠; see Different answers).")


def test_with_nothing_to_rank_the_first_effects_answer():
    cells = [summary_of("jax", [1.0, 1.01, 0.99], jit=False),
             summary_of("jax", [0.25, 0.26, 0.24], jit=True)]
    said = findings_of(cells)
    (answer,) = said.answer
    assert answer.startswith("jit = true against false: 4.00× faster (95 % CI ")
    assert said.groups == []                 # said once: not again below


def test_report_md_opens_its_findings_with_the_answer_then_the_rest_by_kind():
    text = report_of({"name": "t", "profile": "smoke"}, three_rows(1),
                     analysis=effects.analyse(three_rows(1)))
    lines = section(text)
    bullets = lines[:lines.index("### Settings") - 1]
    assert 1 < len(bullets) <= findings.ANSWER_BULLETS and all(b.startswith("- **")
                                                                for b in bullets)
    assert "### Environments" in lines and lines.index("### Settings") < lines.index(
        "### Environments")


def test_the_fixture_runs_report_opens_with_its_answer(tmp_path, capsys):
    run = tmp_path / "base"
    shutil.copytree(FIXTURE_RUNS / "base", run)
    assert cli.main(["report", str(run)]) == 0
    lines = section((run / "report.md").read_text(encoding="utf-8"))
    assert lines[0] == ("- **keras-jax** is fastest in cnn (fit), batch 128, 1.09× ahead of "
                        "keras-tensorflow; in matmul (run), batch 1, 12.9× ahead of jax (2 of 2 "
                        "rows); ahead of every other beyond noise in 2.")
    assert "### Environments" in lines


@pytest.fixture
def one_repeat_run(tmp_path):
    """A real selftest run as a smoke run makes one: one process a cell, two environments."""
    text = matrix_text("first", profile="smoke", steps=3,
                       environments={"a": this_interpreter(), "b": this_interpreter()},
                       tables={"profiles": {"smoke": {"repeats": 1}}},
                       benchmarks=[{"workload": "selftest", "environments": ["*"],
                                    "options": {"sleep_ms": [1.0, 4.0]}}])
    matrix = tmp_path / "matrix.toml"
    matrix.write_text(text, encoding="utf-8")
    assert cli.main([str(matrix), "--results-dir", str(tmp_path / "results")]) == 0
    (run,) = (tmp_path / "results" / "first").iterdir()
    return run


def test_a_one_repeat_runs_report_says_first_that_it_cannot_tell(one_repeat_run):
    lines = section((one_repeat_run / "report.md").read_text(encoding="utf-8"))
    assert lines[0].startswith("- **This run cannot tell which is faster beyond noise**: 4 of "
                               "4 ratios have no interval")
    assert "`[profiles.smoke] repeats` where the smoke profile sets it" in lines[0]
    assert lines[1].startswith(("- **a** is fastest in ", "- **b** is fastest in "))
    assert sum("cannot tell" in line for line in lines) == 1

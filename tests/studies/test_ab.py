"""`runner ab` (runner/studies/ab.py): two environments' cells in pairs, A B B A …, each a fresh
process; then B ÷ A per cell with its interval and the detectable change as a PR-ready Markdown
table. One run of the selftest workload on this interpreter (nothing built), B planted 20 %
slower than A (A's steps sleep 1/1.2 of B's: DL_BENCH_SELFTEST_SHORTCUT), shared by the
assertions."""

from __future__ import annotations

import json
import re

import pytest

from runner import cli
from runner.run.plan import make_plan
from runner.schema import matrix as matrix_mod
from runner.studies import ab
from tests.matrices import matrix_text, this_interpreter

SLOWDOWN = 1.2
# Steps that sleep 20 ms, 25 of them a repeat: on a loaded machine a 4 ms sleep overshoots to
# 8 ms a third of the time; the median of 25 longer ones is the planted time.
BENCH = {"workload": "selftest", "options": {"sleep_ms": 20.0}, "environments": ["*"]}


def ab_matrix(**extra_environments) -> str:
    return matrix_text("ab", repeats=4, steps=25, environments={
        "release": this_interpreter(env={"DL_BENCH_SELFTEST_SHORTCUT": f"{1 / SLOWDOWN:.6f}"}),
        "patched": this_interpreter(), **extra_environments}, benchmarks=[BENCH])


@pytest.fixture(scope="module")
def ab_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ab")
    path = folder / "ab.toml"
    path.write_text(ab_matrix())
    code = cli.main(["ab", str(path), "--results-dir", str(folder / "results")])
    [run] = (folder / "results" / "ab").iterdir()
    return code, run


def test_the_two_sides_run_in_pairs_a_b_b_a(ab_run):
    _, run = ab_run
    manifest = json.loads((run / "manifest.json").read_text())
    environment = {c["id"]: c["environment"] for c in manifest["cells"]}
    written = [json.loads(line)["record"] for line in (run / "ledger.jsonl").read_text().splitlines()]
    order = [environment[re.match(r"cells/(\w+)-r\d+\.json", name).group(1)] for name in written]
    assert order == ["release", "patched", "patched", "release"] * 2
    assert manifest["report"]["baseline_environment"] == "release"


def test_b_over_a_is_the_planted_slowdown_with_its_interval(ab_run):
    code, run = ab_run
    assert code == 1                                   # B is slower: exit 1, as compare's
    text = (run / "ab.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith("| selftest")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    found = re.fullmatch(r"([\d.]+)× \(([\d.]+)–([\d.]+)\)", cells[4])
    ratio, low, high = map(float, found.groups())
    # The planted ratio within 0.1 (a step is a sleep and the clock around it: 20.1 ms against
    # 16.8, 1.198, on a quiet machine; 1.265 seen on a loaded one), its interval around it and
    # clear of "no change".
    assert abs(ratio - SLOWDOWN) < 0.1 and low <= ratio <= high and low > 1
    assert cells[6] == "**slower**" and cells[5].endswith("%")
    assert text.startswith("### patched ÷ release: ")
    assert "| Workload (task) | Batch | release ms | patched ms | patched ÷ release (95 % " \
           "interval) | Could have seen | Verdict |" in text
    assert "- Stack of patched against release: the same distributions" in text


def test_the_pairs_alternate_which_side_goes_first(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(matrix_text("pairs", repeats=3, environments={
        "a": this_interpreter(), "b": this_interpreter(env={"X_FLAG": "1"})},
        benchmarks=[BENCH, {**BENCH, "options": {"sleep_ms": 1.0}}]))
    matrix = matrix_mod.load(path)
    sides = ab.sides_of(matrix, None, None)
    pairs = ab.pairs_of(matrix.cells, sides)
    assert [(x.environment, y.environment) for x, y in pairs] == [("a", "b")] * 2
    order = ab.paired_order(make_plan(matrix.cells).to_run, pairs)
    said = [(e.cell.environment, e.cell.options["sleep_ms"], e.repeat) for e in order]
    assert said == [("a", 20.0, 1), ("b", 20.0, 1), ("a", 1.0, 1), ("b", 1.0, 1),
                    ("b", 20.0, 2), ("a", 20.0, 2), ("b", 1.0, 2), ("a", 1.0, 2),
                    ("a", 20.0, 3), ("b", 20.0, 3), ("a", 1.0, 3), ("b", 1.0, 3)]
    one_side = make_plan(matrix.cells, only=["-a-"]).to_run        # --only: A's cells alone
    assert ab.paired_order(one_side, ab.pairs_of(make_plan(matrix.cells, only=["-a-"]).cells,
                                                 sides)) == one_side      # nothing dropped


@pytest.mark.parametrize("args, said", [
    ((), "ab needs --a ENV --b ENV: the matrix has 3 environments (release, patched, third)"),
    (("--a", "release"), "give both --a and --b, or neither"),
    (("--a", "release", "--b", "pached"), "ab --b: 'pached' is no environment of"),
    (("--a", "release", "--b", "release"), "--a and --b name the same environment"),
])
def test_which_sides_is_one_clear_line(args, said, write_matrix, run_cli, results_dir):
    path = write_matrix(ab_matrix(third=this_interpreter()), with_environments=False)
    code, out, err = run_cli("ab", path, *args)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not any(results_dir.iterdir())


def test_a_resumed_ab_runs_what_is_left_and_tables_it_all(tmp_path):
    path = tmp_path / "ab.toml"
    path.write_text(matrix_text("resumed", repeats=3, steps=3, environments={
        "a": this_interpreter(), "b": this_interpreter()},
        benchmarks=[{**BENCH, "options": {"sleep_ms": 1.0}}]))
    results = tmp_path / "results"
    assert cli.main(["ab", str(path), "--results-dir", str(results)]) in (0, 1)
    [run] = (results / "resumed").iterdir()
    lost = sorted((run / "cells").glob("*-r2.json"))[0]
    lost.unlink()
    assert cli.main(["ab", str(path), "--results-dir", str(results), "--resume", str(run)]) \
        in (0, 1)
    assert lost.is_file()
    [row] = [line for line in (run / "ab.md").read_text().splitlines()
             if line.startswith("| selftest")]
    assert "× (" in row                               # 3 repeats a side again: an interval

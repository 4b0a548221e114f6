"""`runner compare` on the recorded fixture runs (tests/fixtures/make_runs.py says what they hold)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from runner import cli
from runner.errors import UsageError
from runner.results.analysis import comparison as compare
from tests.fixtures import FIXTURE_RUNS

MEASURED = 6  # ok cells in every fixture run; the failed cell is never comparable


@pytest.fixture
def runs(tmp_path) -> Path:
    """Copies of the fixture runs, so that compare-*.md lands in a temporary folder."""
    target = tmp_path / "runs"
    shutil.copytree(FIXTURE_RUNS, target)
    return target


def verdicts(comparison: compare.Comparison) -> dict[str, str]:
    return {c.cell_id: c.verdict for c in comparison.cells}


def test_identical_runs_are_the_same(runs):
    result = compare.compare_runs(runs / "base", runs / "base")
    assert result.count(compare.SAME) == MEASURED
    assert result.geometric_mean_ratio == pytest.approx(1.0)
    assert result.exit_code == 0
    notes = {c.cell_id: c.reason for c in result.cells}
    assert notes["m2mmkrjax0"].startswith("caution: warnings in A and B (see report.md); no "
                                          "change larger than")  # CV > 5 %
    # The threshold (5 %) is the floor of what a verdict can see.
    assert notes["f2cnnkrjax"] == ("no change larger than about 5 % would have gone unseen (80 % "
                                   "power, estimated at the 70 % upper bound of the spread "
                                   "between processes)")


def test_a_rerun_with_fresh_noise_is_the_same(runs):
    result = compare.compare_runs(runs / "base", runs / "same")
    assert result.count(compare.SAME) == MEASURED
    assert result.count(compare.SLOWER) == result.count(compare.FASTER) == 0
    assert result.geometric_mean_ratio == pytest.approx(1.0, abs=0.03)


# The fixture cell whose third repeat runs 30 % slower than the other two (see make_runs.py): its
# run-to-run spread is larger than a 20 % change, so no verdict can be drawn from 3 repeats.
DISAGREEING = "e1ewjax000"


def test_twenty_percent_slower_is_slower_and_exit_1(runs, capsys):
    result = compare.compare_runs(runs / "base", runs / "slower")
    by_id = {c.cell_id: c for c in result.cells}
    assert result.count(compare.SLOWER) == MEASURED - 1
    assert by_id[DISAGREEING].verdict == compare.SAME
    assert by_id[DISAGREEING].spread == pytest.approx(0.3, abs=0.05)
    # With 3 repeats a side the test has 2 degrees of freedom (ratios.welch_ratio): the noisy
    # matmul cell (CV > 5 %) gets p ≈ 0.02, the others below 0.001.
    assert all(c.p_value < 0.05 for c in result.comparable if c.cell_id != DISAGREEING)
    assert result.geometric_mean_ratio == pytest.approx(1.2, abs=0.01)
    code = cli.main(["compare", str(runs / "base"), str(runs / "slower")])
    assert code == 1
    written = (runs / "slower" / "compare-base.md").read_text(encoding="utf-8")
    assert "5 slower" in written and "| **slower** |" in written
    assert "geometric mean of B/A over 6 comparable cells: 1.2" in capsys.readouterr().out


def test_faster_in_the_other_direction_exits_0(runs, tmp_path):
    target = tmp_path / "out.md"
    code = cli.main(["compare", str(runs / "slower"), str(runs / "base"), "--markdown", str(target)])
    assert code == 0
    assert "5 faster" in target.read_text(encoding="utf-8")


def test_threshold_decides_practical_significance(runs):
    # 20 % slower is still "the same" when only a change above 25 % matters
    result = compare.compare_runs(runs / "base", runs / "slower", threshold=0.25)
    assert result.count(compare.SAME) == MEASURED and result.exit_code == 0


def test_differing_driver_is_not_comparable(runs):
    result = compare.compare_runs(runs / "base", runs / "driver")
    assert result.count(compare.NOT_COMPARABLE) == len(result.cells)
    cell = next(c for c in result.cells if c.cell_id == "f2cnnkrjax")
    assert cell.differing_keys == ["driver_version"]
    assert "driver_version 550.54.15 → 560.35.03" in cell.reason
    assert result.geometric_mean_ratio is None and result.exit_code == 0


def test_failed_and_missing_cells_are_not_comparable(runs):
    (runs / "same" / "cells" / "m1mmjax000-r1.json").unlink()  # one repeat less: 2 vs 3
    for path in (runs / "same" / "cells").glob("f3cnnkrs2x-*.json"):
        path.unlink()                                           # the whole cell missing in B
    result = compare.compare_runs(runs / "base", runs / "same")
    by_id = {c.cell_id: c for c in result.cells}
    assert by_id["m3mmkrtf00"].reason == "status A failed, B failed"
    assert by_id["f3cnnkrs2x"].reason == "only in run A"
    # 2 repeats against 3: no verdict (a test with 1 degree of freedom cannot see a change).
    assert by_id["m1mmjax000"].verdict == compare.NOT_COMPARABLE
    assert by_id["m1mmjax000"].reason.startswith("too few repeats (3 vs 2, need 3 per side")
    assert by_id["m1mmjax000"].samples_b == 40
    assert "m4mmkrs200" not in by_id  # not applicable on both sides: nothing to compare


def test_too_few_samples_is_not_comparable(runs):
    for path in (runs / "same" / "cells").glob("f1cnnkrtf0-*.json"):
        record = json.loads(path.read_text())
        record["samples_ms"] = record["samples_ms"][:1]
        path.write_text(json.dumps(record))
    cell = next(c for c in compare.compare_runs(runs / "base", runs / "same").cells
                if c.cell_id == "f1cnnkrtf0")
    assert cell.verdict == compare.NOT_COMPARABLE and cell.reason.startswith("too few samples (60 vs 3")


def test_bad_input_is_a_usage_error(runs, tmp_path, capsys):
    with pytest.raises(UsageError):
        compare.compare_runs(tmp_path, runs / "base")
    assert cli.main(["compare", str(tmp_path / "nowhere"), str(runs / "base")]) == 2
    assert cli.main(["compare", str(runs / "base")]) == 2
    assert cli.main(["compare", str(runs / "base"), str(runs / "same"), "--alpha", "2"]) == 2
    err = capsys.readouterr().err
    assert "no such run folder" in err and "--alpha" in err
    assert not (tmp_path / "logs").exists()  # comparing never writes into a folder it rejects


def synthetic_run(rng, repeats: int, steps: int, process_noise: float, step_noise: float,
                  scale: float = 1.0) -> list[dict]:
    """One cell's records: each repeat (a process) has its own offset, its steps share it."""
    records = []
    for repeat in range(1, repeats + 1):
        offset = scale * 10.0 * float(np.exp(rng.normal(0.0, process_noise)))
        samples = offset * np.exp(rng.normal(0.0, step_noise, steps))
        records.append({"cell_id": "c", "repeat": repeat, "status": "ok", "metadata": {},
                        "samples_ms": samples.tolist()})
    return records


def summary_of(records):
    return {"cell_id": "c", "cell_name": "c", "label": "matmul (run)", "batch_size": 1,
            "environment": "numpy", "status": "ok", "warnings": [],
            "median_ms": float(np.median([s for r in records for s in r["samples_ms"]]))}


def verdict(a, b, threshold=0.05, alpha=0.05):
    return compare.compare_cell(summary_of(a), summary_of(b), a, b, threshold, alpha).verdict


def test_identical_noisy_runs_see_false_verdicts_at_most_at_alpha():
    """Many pairs of runs of one unchanged setup (6 repeats × 20 steps, 5 % noise between
    processes, 2 % between steps): a verdict other than "same" is a false alarm. Pooling the
    steps as independent samples (the old test) cries wolf on many of them."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(12)
    pairs, alpha = 200, 0.05
    false_alarms = pooled_alarms = 0
    for _ in range(pairs):
        a = synthetic_run(rng, 6, 20, 0.05, 0.02)
        b = synthetic_run(rng, 6, 20, 0.05, 0.02)
        false_alarms += verdict(a, b, alpha=alpha) != compare.SAME
        pooled = [s for r in a for s in r["samples_ms"]], [s for r in b for s in r["samples_ms"]]
        ratio = np.median(pooled[1]) / np.median(pooled[0])
        pooled_alarms += (mannwhitneyu(*pooled).pvalue < alpha) and abs(np.log(ratio)) > np.log(1.05)
    assert false_alarms <= alpha * pairs
    # What the per-repeat test protects against: the pooled test alarms on more than alpha.
    assert pooled_alarms > alpha * pairs


def test_a_real_change_beyond_the_noise_is_found():
    rng = np.random.default_rng(3)
    a = synthetic_run(rng, 6, 20, 0.01, 0.02)
    assert verdict(a, synthetic_run(rng, 6, 20, 0.01, 0.02, scale=1.25)) == compare.SLOWER
    assert verdict(a, synthetic_run(rng, 6, 20, 0.01, 0.02, scale=0.75)) == compare.FASTER


def test_one_repeat_per_side_cannot_be_judged():
    rng = np.random.default_rng(5)
    a, b = synthetic_run(rng, 1, 50, 0.01, 0.02), synthetic_run(rng, 1, 50, 0.01, 0.02, 1.5)
    result = compare.compare_cell(summary_of(a), summary_of(b), a, b, 0.05, 0.05)
    assert result.verdict == compare.NOT_COMPARABLE
    assert result.reason.startswith("too few repeats (1 vs 1, need 3 per side")


def set_metadata(run_dir: Path, **values) -> None:
    for path in (run_dir / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        record["metadata"].update(values)
        path.write_text(json.dumps(record))


@pytest.mark.parametrize("key, a, b, shown, in_stack", [
    ("method_version", "aaaaaaaaaaaa", "bbbbbbbbbbbb",
     "method_version aaaaaaaaaaaa → bbbbbbbbbbbb", False),       # a cell's, not its stack's
    # Records made before method versions (the fixtures'): their runner_version was the method.
    ("runner_version", "aaaaaaaaaaaa", "bbbbbbbbbbbb",
     "method_version aaaaaaaaaaaa → bbbbbbbbbbbb", True),
    ("gpu_power_limit_w", 400.0, 300.0, "gpu_power_limit_w 400.0 → 300.0", True),
    ("worker_env", {}, {"XLA_FLAGS": "--xla_gpu_autotune_level=0"},
     "worker_env {} → {XLA_FLAGS=--xla_gpu_autotune_level=0}", True),
])
def test_a_changed_method_power_limit_or_worker_env_is_not_comparable(runs, key, a, b, shown,
                                                                       in_stack):
    """20 % slower, but the cell's method, the power limit or the worker's variables changed
    too: no verdict, the change named on every cell (and in every environment's stack where it
    is the stack's). Yet a slowdown significant and beyond the threshold never exits 0 (issue
    59 item 1): before, a CI gate passed it because something else had changed too."""
    set_metadata(runs / "base", **{key: a})
    set_metadata(runs / "slower", **{key: b})
    result = compare.compare_runs(runs / "base", runs / "slower")
    assert result.count(compare.SLOWER) == 0 and result.exit_code == 1
    hidden = {c.cell_id for c in result.slower_unjudged}
    assert len(hidden) == MEASURED - 1 and DISAGREEING not in hidden  # its spread is 30 %
    assert all(c.reason.startswith("slower ×1.2") for c in result.slower_unjudged)
    measured = [c for c in result.cells if c.ratio is not None]
    named = shown.split()[0]
    assert measured and all(c.verdict == compare.NOT_COMPARABLE and named in c.differing_keys
                            and shown in c.reason and c.stack_differs == in_stack
                            for c in measured)
    if in_stack:
        assert all(f"{key} " in " ".join(s.differs) for s in result.stacks)


def test_another_runner_with_the_same_method_still_compares(runs):
    """A runner update that left these cells' code alone: their numbers compare."""
    set_metadata(runs / "base", runner_version="aaaaaaaaaaaa", method_version="cccccccccccc")
    set_metadata(runs / "slower", runner_version="bbbbbbbbbbbb", method_version="cccccccccccc")
    result = compare.compare_runs(runs / "base", runs / "slower")
    assert result.count(compare.SLOWER) > 0
    assert all("runner_version" in " ".join(s.differs) for s in result.stacks)


def test_cells_pair_by_name_whatever_their_ids(runs):
    """A run made by another id scheme (ids also hold the runner version and the worker's
    variables) still pairs cell by cell with the same cells of another run."""
    for path in (runs / "same" / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        record["cell_id"] = "new" + record["cell_id"][3:]
        path.unlink()                    # a record's file is named by its own id and repeat
        path.with_name(f"{record['cell_id']}-r{record['repeat']}.json").write_text(
            json.dumps(record))
    manifest = json.loads((runs / "same" / "manifest.json").read_text())
    for cell in manifest["cells"]:       # its manifest lists its cells by their own ids
        cell["id"] = "new" + cell["id"][3:]
    (runs / "same" / "manifest.json").write_text(json.dumps(manifest))
    result = compare.compare_runs(runs / "base", runs / "same")
    assert result.count(compare.SAME) == MEASURED
    assert not any(c.reason.startswith("only in run") for c in result.cells)


@pytest.mark.parametrize("key, a, b", [("steps", 20, 10), ("warmup_steps", 2, 5),
                                       ("min_time_s", 1.0, 5.0), ("max_time_s", 60.0, 10.0)])
def test_a_changed_timing_setting_is_named_not_compared(runs, key, a, b):
    """The timed window's settings decide comparability (issue 37 item 7): before, a run timed
    over 10 steps was judged against one timed over 20 as if alike. The block size is not one
    of them (issue 59 item 1: tests/results/analysis/test_compare_blocks.py)."""
    for side, value in (("base", a), ("same", b)):
        for path in (runs / side / "cells").glob("f2cnnkrjax-*.json"):
            record = json.loads(path.read_text())
            record[key] = value
            path.write_text(json.dumps(record))
    cell = next(c for c in compare.compare_runs(runs / "base", runs / "same").cells
                if c.cell_id == "f2cnnkrjax")
    assert cell.verdict == compare.NOT_COMPARABLE and cell.differing_keys == [key]
    assert f"{key} {a} → {b}" in cell.reason


def test_host_variables_passed_by_inherit_env_are_named(runs):
    """DL_BENCH_INHERIT_ENV passes host variables (XLA_FLAGS, OMP_NUM_THREADS, ...) that change
    what a framework does: the records keep them (inherited_env) and compare names a change."""
    for side, value in (("base", "4"), ("same", "1")):
        for path in (runs / side / "cells").glob("*.json"):
            record = json.loads(path.read_text())
            record["metadata"]["inherited_env"] = {"OMP_NUM_THREADS": value}
            path.write_text(json.dumps(record))
    result = compare.compare_runs(runs / "base", runs / "same")
    cell = next(c for c in result.cells if c.cell_id == "f2cnnkrjax")
    assert cell.differing_keys == ["inherited_env"]
    assert "inherited_env {OMP_NUM_THREADS=4} → {OMP_NUM_THREADS=1}" in cell.reason
    assert all(s.differs == ["inherited_env {OMP_NUM_THREADS=4} → {OMP_NUM_THREADS=1}"]
               for s in result.stacks if s.only_in is None)


def test_the_times_beside_the_ratio_come_from_its_estimator():
    """Before: repeats 1, 1, 3 ms against 1.2 ms ×3 printed "A 1.0, B 1.2, B/A 0.832": the
    medians of the repeat medians beside a ratio of their geometric means (issue 49 item 5)."""
    from runner.results.analysis import summaries as summarize

    def side(medians):
        records = [{"cell_id": "c", "cell_name": "c", "environment": "e", "api": "jax",
                    "backend": None, "image": "e", "workload": "elementwise", "task": "run",
                    "batch_size": 1, **summarize.AXIS_DEFAULTS, "options": {"n": 1024},
                    "repeat": i + 1, "status": "ok", "samples_ms": [m] * 5, "metadata": {},
                    "extra": {}, "effective": {}} for i, m in enumerate(medians)]
        return summarize.cell_summaries(records)[0], records

    (a, ra), (b, rb) = side([1.0, 1.0, 3.0]), side([1.2, 1.2, 1.2])
    cell = compare.compare_cell(a, b, ra, rb, 0.05, 0.05)
    assert cell.time_a_ms == pytest.approx(3 ** (1 / 3)) and cell.time_b_ms == pytest.approx(1.2)
    assert cell.ratio == pytest.approx(cell.time_b_ms / cell.time_a_ms)


def test_the_repeat_test_says_what_it_does():
    """Stale text (issue 49 item 9): its docstring said "from 2 repeats per side" and the
    ratio's `df` "Welch–Satterthwaite" after both had changed (3 repeats, min(n) − 1)."""
    from runner.results.analysis import ratios

    assert f"from {compare.MIN_REPEATS} repeats per side" in (compare.repeat_test.__doc__ or "")
    assert compare.repeat_test([1.0, 1.1], [1.2, 1.3])[1] is None
    estimate = ratios.welch_ratio([1.0, 1.1, 1.05], [1.2, 1.3, 1.25, 1.22])
    assert estimate.df == 2                                  # min(3, 4) − 1, as documented
    import inspect
    assert "Welch-Satterthwaite degrees of freedom" not in inspect.getsource(ratios.Ratio)


def test_a_same_verdict_says_what_it_could_have_seen():
    """Before: "same" said nothing of the test's power; at 3 against 3 repeats with a 2 %
    spread between processes it sees a true 5 % change 28 % of the time (issue 49 item 6)."""
    import math

    from runner.results.analysis import power, summaries as summarize

    se = math.sqrt(2 * 0.02 ** 2 / 3)
    assert power.power_of(0.05, se, 2, 4) == pytest.approx(0.28, abs=0.01)
    assert power.detectable_change(0.02, 3, 0.02, 3) == pytest.approx(0.094, abs=0.002)
    assert power.repeats_for(0.02, 0.05) == 5

    def side(medians):
        records = [{"cell_id": "c", "cell_name": "c", "environment": "e", "api": "jax",
                    "backend": None, "image": "e", "workload": "elementwise", "task": "run",
                    "batch_size": 1, **summarize.AXIS_DEFAULTS, "options": {"n": 1024},
                    "repeat": i + 1, "status": "ok", "samples_ms": [m] * 5, "metadata": {},
                    "extra": {}, "effective": {}} for i, m in enumerate(medians)]
        return summarize.cell_summaries(records)[0], records

    (a, ra), (b, rb) = side([1.0, 1.02, 0.98]), side([1.01, 0.99, 1.03])
    cell = compare.compare_cell(a, b, ra, rb, 0.05, 0.05)
    assert cell.verdict == compare.SAME
    bound = power.spread_bound
    assert cell.detectable == pytest.approx(power.detectable_change(
        bound(power.log_spread([1.0, 1.02, 0.98]), 3), 3,
        bound(power.log_spread([1.01, 0.99, 1.03]), 3), 3))
    assert f"no change larger than about {cell.detectable * 100:.3g} % would have gone unseen " \
        "(80 % power, estimated at the 70 % upper bound" in cell.reason
    assert a["detectable_change"] == pytest.approx(power.detectable_change(
        bound(0.02, 3), 3, bound(0.02, 3), 3), rel=0.01)


def test_the_stated_detectable_change_is_seen_80_percent_of_the_time():
    """Issue 59 item 10: with 3 repeats a cell's own spread is a noisy plug-in; at the change
    it stated, the test's real power averaged 58.6 % (not 80 %). At the spread's 70 % upper bound
    it averages at least 80 %. (benchmarks/power.py prints both.)"""
    import math

    from runner.results.analysis import power

    rng = np.random.default_rng(59)
    sigma, repeats = 0.02, 3
    plug_in, bounded = [], []
    for _ in range(300):
        medians = list(np.exp(rng.normal(0.0, sigma, repeats)))
        se = math.sqrt(2 * sigma ** 2 / repeats)
        spread = power.log_spread(medians)
        for stated, out in ((power.detectable_change(spread, 3, spread, 3), plug_in),
                            (power.estimated_detectable(medians, medians), bounded)):
            out.append(power.power_of(stated, se, repeats - 1, 2 * repeats - 2))
    assert np.mean(plug_in) < 0.65 and np.mean(bounded) >= 0.78
    # The module's figures are the code's.
    assert f"must reach {power.detectable_change(0.02, 3, 0.02, 3) * 100:.2g} %" in power.__doc__

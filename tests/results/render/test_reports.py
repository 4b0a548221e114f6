"""Reports of the recorded fixture run: summary.csv, report.md, plots/*.png and report.html."""

from __future__ import annotations

import base64
import csv
import io
import re
import shutil
from pathlib import Path

import pytest

from runner import cli
from runner.results import formatting
from runner.results.analysis import effects, keras_table, summaries as summarize
from runner.results.data.store import Store
from runner.results.render import files, html, markdown, plots, terminal
from tests.fixtures import FIXTURE_RUNS
from tests.results.rendered import report_of, tables_of
from runner.results.analysis.report_model import build, table_view

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def run(tmp_path) -> Path:
    target = tmp_path / "base"
    shutil.copytree(FIXTURE_RUNS / "base", target)
    return target


@pytest.fixture
def summaries(run):
    store = Store(run)
    return summarize.cell_summaries(store.records(), [c["id"] for c in store.read_manifest()["cells"]])


def test_report_subcommand_regenerates_every_output(run, capsys):
    assert cli.main(["report", str(run)]) == 0
    for name in ("results.jsonl", "summary.csv", "report.md", "report.html"):
        assert (run / name).stat().st_size > 0, name
    for name in ("time.png", "keras_speedup.png", "memory.png", "energy.png"):
        assert (run / "plots" / name).read_bytes()[:8] == PNG_MAGIC, name
    assert len((run / "results.jsonl").read_text().splitlines()) == 22  # every record
    out = " ".join(capsys.readouterr().out.split())      # the caption wraps with the width
    assert "3 with warnings of the machine's noise" in out
    assert "elementwise (run) [jit=False]" in out or "[jit=False]" in out   # not eaten as markup


def record_like(**fields):
    base = {"cell_id": "c0", "cell_name": "x", "environment": "jax", "api": "jax",
            "backend": None, "image": "jax", "workload": "matmul", "task": "run",
            "batch_size": 1, "precision": "float32", "jit": "auto", "size": "full", "tf32": None,
            "steps_per_execution": 1, "data": "arrays", "device": "auto", "options": {"n": 4096},
            "repeat": 1, "status": "ok", "error": None, "samples_ms": [1.0, 1.1, 0.9, 1.0, 1.05],
            "items_per_step": 1, "flops_per_step": None, "metadata": {}, "extra": {}}
    return {**base, **fields}


def test_cells_that_differ_only_in_size_or_precision_get_rows_of_their_own():
    from rich.console import Console

    records = [
        record_like(cell_id="full", samples_ms=[50.0] * 5),
        record_like(cell_id="tiny", size="tiny", options={"n": 256}, samples_ms=[1.0] * 5),
        record_like(cell_id="bf16", precision="bfloat16", samples_ms=[20.0] * 5),
    ]
    summaries = summarize.cell_summaries(records, ["full", "tiny", "bf16"])
    labels = [s["label"] for s in summaries]
    assert labels == ["matmul (run)", "matmul (run) [size=tiny]",
                      "matmul (run) [precision=bfloat16]"]
    console = Console(width=200, record=True)
    console.print(terminal.terminal_table(table_view(summaries), "t"))
    text = console.export_text()
    assert "[size=tiny]" in text and "[precision=bfloat16]" in text
    for ms in ("50.0", "1.00", "20.0"):          # every cell is shown, none replaced
        assert ms in text
    table_md = markdown.markdown_table(table_view(summaries), "median_ms")
    assert table_md.count("| matmul (run)") == 3


def test_a_table_slot_is_never_shared():
    records = [record_like(cell_id="a", samples_ms=[2.0] * 5),
               record_like(cell_id="b", samples_ms=[3.0] * 5)]       # same coordinates shown
    summaries = summarize.cell_summaries(records, ["a", "b"])
    assert [s["label"] for s in summaries] == ["matmul (run)", "matmul (run) #b"]


def test_large_figures_use_si_prefixes():
    assert formatting.fmt(191_556_811_552) == "191.6 G"
    assert formatting.fmt(7_952.67) == "7,953"
    assert formatting.fmt(12.345) == "12.3"


def test_summary_csv_has_statistics_and_warnings(summaries):
    rows = {r["cell_id"]: r for r in csv.DictReader(io.StringIO(files.summary_csv(summaries)))}
    cnn = rows["f2cnnkrjax"]
    assert float(cnn["median_ci_low_ms"]) < float(cnn["median_ms"]) < float(cnn["median_ci_high_ms"])
    assert float(cnn["iqr_ms"]) > 0 and cnn["samples"] == "60" and cnn["warnings"] == ""
    assert cnn["epoch_s"] == "7.5"
    # the fixture run has no calibration: no "% of peak", never the fastest cell as 100 %
    assert rows["m2mmkrjax0"]["fraction_of_peak"] == rows["m1mmjax000"]["fraction_of_peak"] == ""
    assert rows["m1mmjax000"]["device_name"] == "NVIDIA A100-SXM4-80GB"
    assert rows["m2mmkrjax0"]["warnings"].startswith("CV ")
    assert "; timed window" in rows["m2mmkrjax0"]["warnings"]


def test_markdown_main_table_has_keras3_columns(summaries):
    text = report_of({"name": "fixture", "runner_version": "f1x7u4e0c0de"},
                                    summaries)
    assert "· runner `f1x7u4e0c0de`" in text.splitlines()[2]
    header = next(line for line in text.splitlines() if line.startswith("| Workload (task) | Batch size | keras"))
    assert header.endswith("| Best Keras 3 | Speedup of best Keras 3 over Keras 2 |")
    cnn = next(line for line in text.splitlines() if line.startswith("| cnn (fit) | 128 |"))
    # keras-jax 55 ms is the best Keras 3 backend; Keras 2 took ~80 ms: speedup ≈ 1.45, with
    # its interval from the 3 repeats on each side
    assert cnn.endswith("| 55.0 (jax) | 1.45× (1.43–1.47) |")
    assert "| **55.0** |" in cnn


def test_markdown_warnings_and_training_sections(summaries):
    text = report_of({"name": "fixture"}, summaries)
    warnings = text.split("## Warnings")[1].split("\n## ")[0]
    throttle = warnings.split("### The GPU throttled")[1].split("\n### ")[0]
    assert ("The GPU slowing its clocks (power or heat), 1 time(s): `matmul-run-jax-b1` (GPU clock "
            "slowdown: hw_thermal_slowdown in r2)") in throttle
    assert "hw_thermal_slowdown" not in warnings.split("### The GPU throttled")[0]
    assert "repeats disagree" in warnings and "energy window" in warnings
    assert "cnn-fit-keras-jax" not in warnings  # a clean cell is not listed
    training = text.split("## Training")[1].split("\n## ")[0]
    assert "| cnn (fit) | 128 | keras2 | – | 7.50 | 1.59 | 0.950 | 2.30 → 0.420 | 802 / 1,503 | 100 / 930 |" \
        in training
    assert "matmul" not in training


def test_nvml_memory_is_shown_with_the_allocator_settings(summaries):
    memory = report_of({"name": "fixture"}, summaries).split("## Peak memory")[1]
    memory = memory.split("\n## ")[0]
    assert "NVML device memory used, peak (MB)" in memory and "| 1,200 |" in memory
    settings = memory.split("Allocator settings in force")[1]
    assert ("- `keras-jax`: XLA_PYTHON_CLIENT_ALLOCATOR=unset, XLA_PYTHON_CLIENT_MEM_FRACTION=unset, "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false") in settings
    assert "- `keras2`: TF_FORCE_GPU_ALLOW_GROWTH=true, TF_GPU_ALLOCATOR=unset" in settings
    assert "bytes_limit" not in settings  # a measured figure, not a setting


def test_no_keras_columns_without_keras2(summaries):
    without = [s for s in summaries if s["api"] != "tf-keras"]
    text = report_of({"name": "fixture"}, without)
    assert "Best Keras 3" not in text
    assert effects.keras_speedups(without) == {}


def test_speedup_plot_is_skipped_with_a_note_without_keras2(summaries, tmp_path):
    without = [s for s in summaries if s["api"] != "tf-keras"]
    written = {p.title: p for p in plots.write_plots(tmp_path, build({}, without))}
    skipped = written["Speedup of the best Keras 3 backend over Keras 2"]
    assert skipped.path is None and "Keras 2" in skipped.note
    assert not (tmp_path / "plots" / "keras_speedup.png").exists()
    text = report_of({"name": "fixture"}, without, list(written.values()))
    assert "Speedup of the best Keras 3 backend over Keras 2: skipped, no row has both" in text


def test_html_is_self_contained(run):
    assert cli.main(["report", str(run)]) == 0
    page = (run / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 5                      # the forest plot of the effects, then four
    assert all(base64.b64decode(data)[:8] == PNG_MAGIC for data in images)
    # nothing is fetched from elsewhere: no links to files, scripts or stylesheets
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert "<h2>Warnings</h2>" in page and "<h2>Training</h2>" in page
    assert "<strong>55.0</strong>" in page and "<code>matmul-run-jax-b1</code>" in page


def test_plot_failure_keeps_the_other_outputs(run, monkeypatch, capsys):
    def broken(root, summaries, analysis=None):
        raise RuntimeError("no fonts today")

    monkeypatch.setattr(plots, "write_plots", broken)
    assert cli.main(["report", str(run)]) == 0
    assert "plots not written (RuntimeError: no fonts today)" in capsys.readouterr().err
    for name in ("results.jsonl", "summary.csv", "report.md", "report.html"):
        assert (run / name).exists(), name
    assert "## Plots" not in (run / "report.md").read_text()


def test_html_failure_keeps_the_other_outputs(run, monkeypatch, capsys):
    from runner.results.render import html

    def broken(*args, **kwargs):
        raise ValueError("bad page")

    monkeypatch.setattr(html, "render", broken)
    assert cli.main(["report", str(run)]) == 0
    assert "report.html not written (ValueError: bad page)" in capsys.readouterr().err
    assert (run / "report.md").exists() and (run / "plots" / "time.png").exists()
    assert not (run / "report.html").exists()


def test_energy_is_reported_only_where_nvml_resolves_it_and_per_step():
    short = record_like(cell_id="short", environment="torch", gpu_energy_j=0.0, train_s=0.2,
                        samples_ms=[2.0] * 100)
    long = record_like(cell_id="long", gpu_energy_j=300.0, train_s=1.5, calls_per_sample=2,
                       samples_ms=[7.5] * 100, items_per_step=4, gpu_energy_resolution_s=0.02)
    summaries = summarize.cell_summaries([short, long], ["short", "long"])
    by_id = {s["cell_id"]: s for s in summaries}
    assert by_id["short"]["gpu_energy_j"] is None and by_id["short"]["energy_per_step_j"] is None
    assert "shorter than NVML's energy counter resolves" in by_id["short"]["energy_note"]
    assert by_id["long"]["energy_per_step_j"] == pytest.approx(1.5)     # 300 J / 200 steps
    assert by_id["long"]["energy_per_item_j"] == pytest.approx(0.375)
    table = markdown.markdown_table(table_view(summaries), "energy_per_step_j")
    # a lone value has nothing to be best against: not bold
    assert "| 1.50 |" in table and "0.00" not in table and "**" not in table


def test_the_energy_window_is_judged_by_the_counters_resolution_and_idle_is_shown():
    """Before, any window of min_time's 1 s passed (the threshold was min_time itself), though
    a counter that moves every 0.1 s reads a 1.5 s window to ±7 %; and no figure said how much
    of a step's energy the device spends at rest (issue 37 item 10)."""
    coarse = record_like(cell_id="coarse", gpu_energy_j=300.0, train_s=1.5,
                         samples_ms=[7.5] * 200, gpu_energy_resolution_s=0.1)
    unknown = record_like(cell_id="unknown", environment="torch", gpu_energy_j=300.0,
                          train_s=1.5, samples_ms=[7.5] * 200)
    fine = record_like(cell_id="fine", environment="numpy", gpu_energy_j=300.0, train_s=1.5,
                       samples_ms=[7.5] * 200, gpu_energy_resolution_s=0.02,
                       gpu_idle_power_w=60.0)
    by_id = {s["cell_id"]: s for s in summarize.cell_summaries([coarse, unknown, fine])}
    for cell_id in ("coarse", "unknown"):       # 20 × 0.1 s = 2 s needed (0.1 s assumed)
        assert by_id[cell_id]["energy_per_step_j"] is None
        assert "needs ≥ 2.00 s, 20 of its update interval" in by_id[cell_id]["energy_note"]
        assert "energy window 1.50 s < 2.00 s" in " ".join(by_id[cell_id]["warnings"])
    assert by_id["fine"]["energy_per_step_j"] == pytest.approx(1.5)
    # 300 J less 60 W × 1.5 s at rest, over 200 steps
    assert by_id["fine"]["energy_per_step_above_idle_j"] == pytest.approx((300 - 90) / 200)
    assert by_id["fine"]["gpu_idle_power_w"] == 60.0
    text = report_of({"name": "t"}, list(by_id.values()))
    energy = text.split("## Energy per step")[1].split("\n## ")[0]
    assert "Above idle:" in energy and "| 1.05 |" in energy and "`x` 60.0" in energy
    # Said where the power at rest comes from (issue 49; since issue 59: before the import).
    assert "by each repeat before its framework is imported" in energy


def test_each_environments_fixed_cost_per_process_is_shown():
    records = [record_like(cell_id=f"c{i}", import_s=2.0, setup_s=0.5, warmup_s=[1.0, 0.1],
                           wall_s=6.0 + i, train_s=1.2) for i in range(3)]
    summaries = summarize.cell_summaries(records, ["c0", "c1", "c2"])
    (cost,) = summarize.fixed_costs(summaries)
    assert cost["environment"] == "jax" and cost["cells"] == 3
    assert cost["fixed_s"] == pytest.approx(5.8)          # median wall 7.0 − timed 1.2
    assert cost["other_s"] == pytest.approx(5.8 - 2.0 - 0.5 - 1.1)
    text = report_of({"name": "t"}, summaries)
    assert "## Where a process's time goes" in text
    assert "| jax | 3 | 2.00 | 0.500 | 1.10 | 2.20 | 5.80 | 1.20 |" in text


def test_the_published_table_stands_beside_the_run_with_ratios_only_where_comparable():
    from runner.results.analysis import reference

    rows = reference.published()["rows"]
    assert len(rows) == 12 and rows[6] == {"workload": "gemma", "task": "fit", "batch_size": 8,
                                           "keras3_tensorflow": 232.52, "keras3_jax": 273.67,
                                           "keras3_torch": 525.15}
    gpu = {"gpu_name": "NVIDIA A100-SXM4-40GB", "cpu_model": "EPYC"}
    cells = [
        record_like(cell_id="jax", environment="keras-jax", api="keras", backend="jax",
                    workload="gemma", task="fit", batch_size=8, options={},
                    effective={"device": "cuda:0"}, metadata=gpu, samples_ms=[547.34] * 5),
        record_like(cell_id="torch", environment="keras-torch", api="keras", backend="torch",
                    workload="gemma", task="fit", batch_size=8, options={}, size="tiny",
                    effective={"device": "cpu"}, metadata=gpu, samples_ms=[9.0] * 5),
    ]
    summaries = summarize.cell_summaries(cells, ["jax", "torch"])
    (row,) = reference.beside(summaries)
    assert row["columns"]["keras3_jax"]["ratio"] == pytest.approx(2.0)        # full, on a GPU
    assert row["columns"]["keras3_torch"]["ratio"] is None                    # tiny, on a CPU
    assert row["columns"]["keras3_torch"]["measured_ms"] == pytest.approx(9.0)
    assert row["columns"]["keras2"]["published_ms"] is None                   # NA in the study
    text = report_of({"name": "t"}, summaries)
    assert "## Beside the published figures (NVIDIA A100 40GB, ms/step)" in text
    assert "| gemma (fit) | 8 | – / NA | – / 233 | 547 / 274 (2.00×) | 9.00 / 525 |" in text
    assert "weights differ" in text


def test_the_keras_table_has_the_studys_layout_and_no_speedup_across_models():
    envs = [("keras-torch", "keras", "torch"), ("keras2", "tf-keras", None),
            ("keras-jax", "keras", "jax"), ("keras-tensorflow", "keras", "tensorflow")]
    records = []
    for workload, task, batch in (("sam", "fit", 1), ("stable_diffusion", "fit", 8)):
        for i, (env, api, backend) in enumerate(envs):
            records.append(record_like(
                cell_id=f"{workload}-{env}", environment=env, api=api, backend=backend,
                workload=workload, task=task, batch_size=batch, options={},
                effective={"jit_compile": False}, samples_ms=[100.0 + 10 * i] * 5))
    summaries = summarize.cell_summaries(records, [r["cell_id"] for r in records])
    rows, columns, titles = keras_table.keras_view(summaries)
    assert columns == ["keras2", "keras-tensorflow", "keras-jax", "keras-torch"]
    assert [titles[c] for c in columns] == ["Keras 2 (TensorFlow)", "Keras 3 (TensorFlow)",
                                            "Keras 3 (JAX)", "Keras 3 (PyTorch) (eager)"]
    speedups = effects.keras_speedups(summaries)
    assert speedups[("sam (fit)", 1)]["speedup"] == pytest.approx(110 / 100)   # K2 / best K3
    assert speedups[("stable_diffusion (fit)", 8)]["speedup"] is None      # v1.4 against SD3
    text = report_of({"name": "t"}, summaries)
    head = text.split("## The Keras 3 benchmark table")[1].splitlines()[2]
    assert head.startswith("| Workload (task) | Batch size | Keras 2 (TensorFlow) | "
                           "Keras 3 (TensorFlow) | Keras 3 (JAX) | Keras 3 (PyTorch) (eager) |")
    assert "| stable_diffusion (fit) | 8 | 110 | 130 | 120 | **100** | 100 (torch) | – |" in text
    printed = tables_of(summaries, "t")
    assert len(printed) == 2 and [c.header.replace("\n", " ") for c in printed[0].columns][2:] == [
        "Keras 2 (TensorFlow)", "Keras 3 (TensorFlow)", "Keras 3 (JAX)", "Keras 3 (PyTorch) (eager)"]


def test_small_values_print_with_significant_figures_never_as_zero():
    assert formatting.fmt(0.004) == "0.00400"          # a 4 µs step in ms
    assert formatting.fmt(0.0021) == "0.00210"         # 2.1 mJ in J
    assert formatting.fmt(0.5) == "0.500" and formatting.fmt(1.5) == "1.50"
    assert formatting.fmt(3.4e-6) == "3.40e-06"
    assert formatting.fmt(0.0) == "0" and formatting.fmt(None) == "–"
    assert formatting.fmt(999.7) == "1,000" and formatting.fmt(123.456, 4) == "123.5"
    assert formatting.percent(0.0004) == "0.0400 %"


def test_microsecond_steps_and_millijoules_print_everywhere_and_csv_keeps_raw_values():
    from rich.console import Console

    records = [record_like(cell_id="a", environment="jax", samples_ms=[0.0041] * 5,
                           gpu_energy_j=0.0123, train_s=2.0, extra={"telemetry_window_s": 2.0}),
               record_like(cell_id="b", environment="torch", samples_ms=[0.0052] * 5)]
    summaries = summarize.cell_summaries(records, ["a", "b"])
    text = report_of({"name": "t"}, summaries)
    assert "| matmul (run) | 1 | **0.00410** | 0.00520 |" in text
    assert "0.00 " not in text and "| 0.00 |" not in text
    energy = text.split("## Energy per step")[1].split("\n## ")[0]
    assert "| matmul (run) | 1 | 0.00246 | – |" in energy               # 12.3 mJ / 5 steps
    console = Console(width=200, record=True)
    console.print(terminal.terminal_table(table_view(summaries), "t"))
    printed = console.export_text()
    assert "0.00410" in printed and "0.00520" in printed
    page = html.render(text, Path("."), "t")
    assert "<strong>0.00410</strong>" in page
    rows = {r["cell_id"]: r for r in csv.DictReader(io.StringIO(files.summary_csv(summaries)))}
    assert float(rows["a"]["median_ms"]) == 0.0041 and rows["a"]["energy_per_step_j"] == "0.00246"


def test_best_is_bold_only_among_values_that_differ_as_printed():
    assert formatting.best_text([1.001, 1.002, 1.3]) == "1.00"     # a printed tie: both bold
    assert formatting.best_text([1.001, 1.002]) is None            # all print the same: none
    assert formatting.best_text([2.0]) is None                     # nothing to beat
    assert formatting.best_text([1.0, 2.0], lower_is_better=False) == "2.00"
    records = [record_like(cell_id=e, environment=e, samples_ms=[ms] * 5)
               for e, ms in (("jax", 1.001), ("torch", 1.002), ("numpy", 1.3))]
    table = markdown.markdown_table(table_view(summarize.cell_summaries(records,
                                                                        ["jax", "torch", "numpy"])),
                                    "median_ms")
    assert "| matmul (run) | 1 | **1.00** | **1.00** | 1.30 |" in table
    same = [record_like(cell_id=e, environment=e, samples_ms=[ms] * 5)
            for e, ms in (("jax", 1.001), ("torch", 1.002))]
    table = markdown.markdown_table(table_view(summarize.cell_summaries(same, ["jax", "torch"])),
                                    "median_ms")
    assert "**" not in table


def test_rows_whose_environments_differ_in_tf32_are_marked_in_every_table():
    from rich.console import Console

    gpu = {"gpu_name": "NVIDIA H100 80GB HBM3", "cpu_model": "EPYC"}
    records = [
        record_like(cell_id="jax", cell_name="cnn-fit-keras-jax-b128", environment="keras-jax",
                    api="keras", backend="jax", workload="cnn", task="fit", batch_size=128,
                    data="device", options={}, metadata=gpu, samples_ms=[2.0] * 5,
                    loss_first=2.3, loss_last=0.4,
                    effective={"device": "cuda:0", "tf32": True,
                               "tf32_detail": {"matmul": True, "conv": True,
                                               "compute_capability": "9.0"}}),
        record_like(cell_id="torch", cell_name="cnn-fit-keras-torch-b128",
                    environment="keras-torch", api="keras", backend="torch", workload="cnn",
                    task="fit", batch_size=128, data="device", options={}, metadata=gpu,
                    samples_ms=[8.8] * 5,
                    loss_first=2.3, loss_last=0.4,
                    effective={"device": "cuda:0", "tf32": False,
                               "tf32_detail": {"matmul": False, "conv": True}}),
        record_like(cell_id="mm-jax", environment="keras-jax", metadata=gpu, samples_ms=[3.0] * 5,
                    effective={"device": "cuda:0", "tf32": True}),
        record_like(cell_id="mm-torch", environment="keras-torch", metadata=gpu,
                    samples_ms=[21.0] * 5, effective={"device": "cuda:0", "tf32": True}),
    ]
    summaries = summarize.cell_summaries(records, [r["cell_id"] for r in records])
    assert summarize.tf32_rows(summaries) == {("cnn (fit)", 128)}
    text = report_of({"name": "t"}, summaries)
    time_table = text.split("## Time per step")[1].split("\n## ")[0]
    assert "| cnn (fit) † | 128 |" in time_table and "| matmul (run) | 1 |" in time_table
    assert summarize.TF32_NOTE in time_table
    memory = text.split("## Peak memory")[1].split("\n## ")[0]
    assert "| cnn (fit) † | 128 |" in memory
    assert "| cnn (fit) † | 128 | keras-jax |" in text.split("## Training")[1]
    section = text.split("## TF32")[1].split("\n## ")[0]
    # torch's cuDNN convolutions run TF32 by default: the torch CNN is TF32 too, on one path.
    assert ("- TF32 on: `cnn-fit-keras-jax-b128` (conv on, matmul on), "
            "`cnn-fit-keras-torch-b128` (conv on, matmul off), `x` (matmul on), "
            "`x` (matmul on)") in section
    console = Console(width=200, record=True)
    console.print(terminal.terminal_table(table_view(summaries), "t"))
    printed = console.export_text()
    assert "cnn (fit) †" in printed and "TF32 differs" in printed
    assert "matmul (run) †" not in printed
    rows = {r["cell_id"]: r for r in csv.DictReader(io.StringIO(files.summary_csv(summaries)))}
    assert rows["jax"]["tf32_effective"] == "True" and rows["torch"]["peak_kind"] == "tf32"


def test_a_cpu_run_has_no_tf32_marks_or_section():
    records = [record_like(cell_id=e, environment=e, samples_ms=[ms] * 5,
                           metadata={"cpu_model": "EPYC"}, effective={"device": "cpu"})
               for e, ms in (("jax", 1.0), ("torch", 2.0))]
    summaries = summarize.cell_summaries(records, ["jax", "torch"])
    text = report_of({"name": "t"}, summaries)
    assert "†" not in text and "## TF32" not in text
    assert [s["peak_kind"] for s in summaries] == ["float32", "float32"]


def test_the_time_plot_draws_the_tables_estimator():
    """Before: time.png drew the median of the repeat medians (1.0 for repeats 1, 1, 3) beside
    tables showing their geometric mean (1.44); now its bar is that, its whisker their range."""
    from tests.results.synthetic import summary_of

    value, below, above = plots.time_bar(summary_of("jax", [1.0, 1.0, 3.0]))
    assert value == pytest.approx(3 ** (1 / 3))
    assert (value - below, value + above) == (pytest.approx(1.0), pytest.approx(3.0))


def test_the_cells_table_says_what_a_comparison_could_see():
    """Per cell, the smallest change against a re-run like it that the ratio test detects with
    80 % power (issue 49 item 6): 9.4 % at 3 repeats with a 2 % spread between processes."""
    from tests.results.synthetic import summary_of

    cell = summary_of("jax", [1.0, 1.02, 0.98])
    cells = report_of({"name": "t"}, [cell]).split("## Cells")[1]
    assert "| Detectable change |" in cells
    assert f"| {formatting.percent(cell['detectable_change'])} |" in cells
    assert summary_of("jax", [1.0, 1.0])["detectable_change"] is None      # too few repeats


def test_the_cells_interval_is_labelled_as_what_it_is():
    """Issue 59 item 11: the column read "95 % CI of median" over a t interval around the
    geometric mean (3 to 5 repeats): it names which interval, by the repeats it had."""
    from tests.results.synthetic import summary_of

    cells = report_of({"name": "t"}, [summary_of("jax", [1.0, 1.02, 0.98])]).split("## Cells")[1]
    assert "| 95 % CI (across repeats) |" in cells and "CI of median" not in cells
    assert "a Student-t interval on their logarithms, around their geometric mean (the Time ms)" \
        in cells and "order-statistic interval of their median (the Median ms)" in cells

"""matrix.toml's smoke profile is a first look sized for a CPU (issue 60): every environment and
every workload family once, one cell of each capability a newcomer should see work (a variant
axis, an int8 cell beside its float row, a Hugging Face column beside Keras 3's backends, Keras
over its native engine, Keras 2 beside Keras 3), nothing not applicable; its full profile leaves
it out, and the wide CPU table it was before is examples/wide-cpu.toml."""

from __future__ import annotations

from collections import Counter

from runner.paths import REPO_ROOT
from runner.schema import matrix as matrix_mod
from runner.worker import catalog

SMOKE = matrix_mod.load(REPO_ROOT / "matrix.toml", "smoke")
FULL = matrix_mod.load(REPO_ROOT / "matrix.toml", "full", gpu_found=True)


def row(cell) -> tuple:
    """The report's row of a cell: its coordinates but the environment."""
    return (cell.workload, cell.task, cell.batch_size, cell.axes["precision"],
            cell.axes["jit"], tuple(sorted(cell.options.items())))


def test_the_smoke_profile_runs_every_environment_and_family_once_and_nothing_na():
    cells = SMOKE.cells
    assert {c.environment for c in cells} == set(SMOKE.spec.environments)
    families = {catalog.WORKLOADS[c.workload].family for c in cells}
    assert families == {"ops", "model", "hub", "layer"}
    assert not [c.name for c in cells if c.not_applicable]
    assert all(c.axes["size"] == "tiny" and c.repeats == 1 for c in cells)
    assert not SMOKE.spec.run.calibrate and not SMOKE.calibration
    assert len(cells) <= 20, [c.name for c in cells]


def test_the_smoke_profile_shows_each_capability_once():
    cells = SMOKE.cells
    by_row = Counter(row(c) for c in cells)
    # a variant axis: one environment's cells of one workload differing by jit
    varied = {(c.environment, c.workload) for c in cells if c.axes["jit"] is not False}
    assert any(c.axes["jit"] is False and (c.environment, c.workload) in varied for c in cells)
    # an int8 cell, beside the float32 cell of its row in the same environment
    (int8,) = [c for c in cells if catalog.is_quantized(c.axes["precision"])]
    assert any(c.environment == int8.environment and c.axes["precision"] == "float32" and
               (c.workload, c.task, c.batch_size) == (int8.workload, int8.task, int8.batch_size)
               for c in cells)
    # a Keras table row: Keras 3's three backends and Hugging Face's code side by side
    hub = [c for c in cells if catalog.is_hub(c.workload) and c.axes["precision"] == "float32"]
    assert {c.api for c in hub} == {"keras", "hf"}
    assert {c.backend for c in hub if c.api == "keras"} == {"tensorflow", "jax", "torch"}
    assert len({row(c) for c in hub}) == 1
    # Keras over its native engine (the CNN on torch), and Keras 2 beside Keras 3 and native
    # TensorFlow (a layer: the Keras tax)
    apis = [{(c.api, c.backend) for c in cells if row(c) == key} for key in by_row]
    assert {("keras", "torch"), ("torch", None)} in apis
    assert {("tf-keras", None), ("keras", "tensorflow"), ("tensorflow", None)} in apis


def test_the_full_profile_leaves_the_smoke_rows_out_and_keeps_its_own():
    assert not set(SMOKE.left_out) & set(FULL.left_out)
    assert sum(FULL.left_out.values()) == len(SMOKE.cells)
    assert sum(SMOKE.left_out.values()) == len(FULL.cells) == 558
    assert all(c.axes["size"] == "full" for c in FULL.cells)


def test_the_wide_cpu_table_is_the_full_profiles_rows_at_tiny_sizes():
    """examples/wide-cpu.toml: what the smoke profile ran before it became a first look, every
    row of the full profile at tiny sizes but the compiled Hugging Face cells, the data-parallel
    rows and the layers."""
    wide = matrix_mod.load(REPO_ROOT / "examples" / "wide-cpu.toml")

    def coordinates(cell) -> tuple:
        return (cell.environment, cell.workload, cell.task, cell.batch_size,
                *(v for k, v in cell.axes.items() if k != "size"))

    kept = [c for c in FULL.cells if c.workload != "layer" and c.axes["devices"] == 1
            and not (c.api == "hf" and c.axes["jit"] is True and catalog.is_hub(c.workload))]
    assert [coordinates(c) for c in wide.cells] == [coordinates(c) for c in kept]
    assert all(c.axes["size"] == "tiny" for c in wide.cells)
    assert sum(c.not_applicable is None for c in wide.cells) == 94

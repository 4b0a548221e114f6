"""Expansion of a valid matrix into cells: cartesian product, '*', profiles, stable ids, NA."""

from __future__ import annotations

from runner.schema import matrix as matrix_mod
from runner.worker import catalog

BENCH = """
[run]
steps = 50
repeats = 3

[profiles.smoke]
steps = 4
repeats = 1
size = "tiny"

[[benchmarks]]
workload = "matmul"
environments = ["*"]
precision = ["float32", "bfloat16"]
batch_size = [1, 2]
"""


def test_cartesian_product_over_list_axes_and_all_environments(write_matrix):
    m = matrix_mod.load(write_matrix(BENCH), profile="full")
    assert len(m.cells) == 2 * 2 * 2  # environments × precision × batch_size
    coords = {(c.environment, c.axes["precision"], c.batch_size) for c in m.cells}
    assert ("numpy", "bfloat16", 2) in coords and ("keras-jax", "float32", 1) in coords
    assert all(c.steps == 50 and c.repeats == 3 for c in m.cells)
    assert {c.options["n"] for c in m.cells} == {4096}  # the full size preset


def test_smoke_profile_overrides_run_keys_and_axes(write_matrix):
    m = matrix_mod.load(write_matrix(BENCH), profile="smoke")
    assert m.profile == "smoke"
    assert all(c.steps == 4 and c.repeats == 1 and c.axes["size"] == "tiny" for c in m.cells)
    assert {c.options["n"] for c in m.cells} == {catalog.default_sizes("matmul", "tiny")["n"]}
    assert m.resolved["run"]["profile"] == "smoke"


def test_a_benchmark_for_one_profile_is_left_out_of_the_other_and_counted(write_matrix,
                                                                         run_cli):
    """A benchmark's `profiles` keep it out of the other profile's run altogether (no NA row in
    its report), counted on the profile's line; the same cell in a benchmark of each profile is
    no repeated cell."""
    text = BENCH + """
[[benchmarks]]
workload = "elementwise"
environments = ["numpy", "keras-jax"]
jit = false
profiles = ["full"]

[[benchmarks]]
workload = "elementwise"
environments = ["numpy"]
jit = false
profiles = ["smoke"]
"""
    full = matrix_mod.load(write_matrix(text), profile="full")
    smoke = matrix_mod.load(write_matrix(text), profile="smoke")
    assert [c.environment for c in full.cells if c.workload == "elementwise"] == ["numpy",
                                                                                 "keras-jax"]
    assert [c.environment for c in smoke.cells if c.workload == "elementwise"] == ["numpy"]
    assert not any(c.not_applicable for c in full.cells + smoke.cells
                   if c.workload == "elementwise")
    assert full.left_out == {2: 1} and smoke.left_out == {1: 2}
    code, out, _ = run_cli(write_matrix(text), "--dry-run", "--profile", "smoke")
    assert code == 0
    assert "leaves out 1 benchmark (2 cells) that run under another profile (--profile full " \
           "runs them)" in out
    assert "2 of another profile" in out and "elementwise-run-keras-jax" not in out
    code, _, err = run_cli(write_matrix(text.replace('["full"]', '["ful"]')), "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "benchmarks[1].profiles" in err


def test_auto_profile_follows_the_gpu(write_matrix):
    path = write_matrix(BENCH)
    no_gpu = matrix_mod.load(path, gpu_found=False)
    assert no_gpu.profile == "smoke" and "no GPU" in no_gpu.profile_reason
    assert matrix_mod.load(path, gpu_found=True).profile == "full"


def test_cell_ids_are_stable_and_depend_on_coordinates(write_matrix):
    first = matrix_mod.load(write_matrix(BENCH), profile="full").cells
    again = matrix_mod.load(write_matrix(BENCH), profile="full").cells
    assert [c.id for c in first] == [c.id for c in again]
    assert len({c.id for c in first}) == len(first)
    smoke = matrix_mod.load(write_matrix(BENCH), profile="smoke").cells
    assert not {c.id for c in smoke} & {c.id for c in first}  # tiny cells are other cells


def test_not_applicable_cells_are_kept_with_a_reason(write_matrix):
    m = matrix_mod.load(write_matrix(BENCH), profile="full")
    numpy_bf16 = [c for c in m.cells if c.environment == "numpy" and c.axes["precision"] == "bfloat16"]
    assert numpy_bf16 and all("bfloat16" in c.not_applicable for c in numpy_bf16)
    keras = [c for c in m.cells if c.environment == "keras-jax"]
    assert all(c.not_applicable is None for c in keras)


def test_steps_per_execution_not_applicable_outside_keras(write_matrix):
    m = matrix_mod.load(write_matrix("""
        [environments.torch]
        image = "torch"
        api = "torch"
        [environments.keras-torch]
        image = "torch"
        api = "keras"
        backend = "torch"
        [[benchmarks]]
        workload = "cnn"
        batch_size = 32
        environments = ["torch", "keras-torch", "keras-jax"]
        steps_per_execution = [1, 8]
    """), profile="full")
    reasons = {(c.environment, c.axes["steps_per_execution"]): c.not_applicable for c in m.cells}
    assert reasons[("torch", 1)] is None
    assert "Keras setting" in reasons[("torch", 8)]
    assert "steps_per_execution = 1" in reasons[("keras-torch", 8)]
    assert reasons[("keras-jax", 8)] is None


def test_cell_names_show_non_default_axes(write_matrix):
    m = matrix_mod.load(write_matrix(BENCH), profile="full")
    names = {c.name for c in m.cells}
    assert "matmul-run-numpy-b1" in names
    assert "matmul-run-keras-jax-b2-bfloat16" in names


def test_calibrate_measures_one_peak_per_environment_and_precision(write_matrix):
    m = matrix_mod.load(write_matrix("""
        [run]
        calibrate = true
        [profiles.smoke]
        size = "tiny"
        [[benchmarks]]
        workload = "elementwise"
        environments = ["numpy"]
    """), profile="full")
    assert not [c for c in m.cells if c.workload == "matmul"]     # never cells of the run
    got = {(c.environment, c.axes["precision"], tuple(c.settings["calibration_sizes"]))
           for c in m.calibration}
    # NumPy has no bfloat16, so its bfloat16 calibration is left out rather than listed as NA.
    sizes = (4096, 8192, 16384)
    assert got == {("numpy", "float32", sizes), ("keras-jax", "float32", sizes),
                   ("keras-jax", "bfloat16", sizes)}
    assert all(c.repeats == 1 and c.steps == "auto" for c in m.calibration)
    assert not {c.id for c in m.calibration} & {c.id for c in m.cells}
    smoke = matrix_mod.load(write_matrix("""
        [run]
        calibrate = true
        [profiles.smoke]
        size = "tiny"
        [[benchmarks]]
        workload = "elementwise"
        environments = ["numpy"]
    """), profile="smoke")
    assert {tuple(c.settings["calibration_sizes"]) for c in smoke.calibration} == {(128, 256)}


def test_preallocate_false_sets_the_frameworks_switches_unless_the_environment_does(write_matrix):
    text = """
        [run]
        preallocate = false
        [environments.keras-tf]
        image = "tensorflow"
        api = "keras"
        backend = "tensorflow"
        env = { TF_FORCE_GPU_ALLOW_GROWTH = "false" }
        [[benchmarks]]
        workload = "matmul"
        environments = ["*"]
    """
    cells = {c.environment: c for c in matrix_mod.load(write_matrix(text), profile="full").cells}
    assert cells["keras-jax"].env == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                                      "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert cells["keras-tf"].env["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"  # the environment's wins
    default = matrix_mod.load(write_matrix(text.replace("preallocate = false", "")), profile="full")
    assert {c.environment: c.env for c in default.cells}["keras-jax"] == {}

"""The layer family in the real environments, on the CPU, at the tiny shapes: every layer of the
table builds on Keras 3 (three backends) and Keras 2 from its declared arguments and takes the
recipe's weights, every native twin (torch, JAX, TensorFlow) gives the Keras layer's answer
within the precision's tolerance — forward, one train step and the gradients — and the records
carry phase, shapes and jit.

One shared run: each environment runs all its cells in ONE worker process (the framework
imported once, through the worker's own entry point), two environments at a time, so the 28
layers × 3 phases × 7 environments take minutes, not hours; tests/worker/test_layers_run.py runs a few cells through
the runner itself (a process per repeat, the report, the CI gate)."""

from __future__ import annotations

import itertools
import json
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.environments import venvs
from runner.paths import REPO_ROOT as ROOT
from runner.results.analysis.answers import differences
from runner.worker import catalog
from runner.worker.apis import layer_common
from runner.worker.catalog.layers import LAYERS, PHASES
from runner.worker.protocol import CellSpec

pytestmark = pytest.mark.slow

# environment → (image, api, backend)
ENVIRONMENTS = {
    "keras-tensorflow": ("tensorflow", "keras", "tensorflow"), "keras-jax": ("jax", "keras", "jax"),
    "keras-torch": ("torch", "keras", "torch"), "keras2": ("tf-keras", "tf-keras", None),
    "torch": ("torch", "torch", None), "jax": ("jax", "jax", None),
    "tensorflow": ("tensorflow", "tensorflow", None),
}
# (layer, phase, jit, precision): every layer and phase at the defaults, and a compiled and
# bfloat16 cells (compiling takes a while on a CPU: one layer); the recurrent layers in bfloat16
# too (Keras's default recurrent initializer needs a QR no framework has in bfloat16).
CELLS = [(layer, phase, "auto", "float32") for layer, phase in itertools.product(LAYERS, PHASES)]
CELLS += [("Dense", "forward", True, "float32"), ("Dense", "train", "auto", "bfloat16"),
          ("LSTM", "forward", "auto", "bfloat16"), ("GRU", "forward", "auto", "bfloat16")]
BATCH = 3

BATCH_SCRIPT = textwrap.dedent("""
    import json, sys
    from runner.worker.__main__ import main
    for spec_path, result_path in json.load(open(sys.argv[1])):
        main([spec_path, result_path])
""")


def planned(environment: str) -> list[tuple]:
    image, api, backend = ENVIRONMENTS[environment]
    axes = dict(catalog.AXIS_DEFAULTS)
    return [cell for cell in CELLS if not catalog.not_applicable_reason(
        "layer", api, backend, {**axes, "jit": cell[2], "precision": cell[3]}, cell[1], BATCH,
        {"layer": cell[0]})]


def name_of(cell: tuple) -> str:
    return "-".join(map(str, cell))


def run_environment(environment: str, folder: Path) -> dict[str, dict]:
    image, api, backend = ENVIRONMENTS[environment]
    pairs = []
    for cell in planned(environment):
        layer, phase, jit, precision = cell
        spec = CellSpec(run_id="layers", cell_id=name_of(cell), cell_name=name_of(cell),
                        repeat=1, environment=environment, api=api, backend=backend, image=image,
                        workload="layer", task=phase, batch_size=BATCH, precision=precision,
                        jit=jit, size="tiny", tf32=None, steps_per_execution=1, data="device",
                        device="cpu", options={"layer": layer, "shapes": "tiny"}, steps=2,
                        warmup_steps=1, seed=0,
                        result_path=str(folder / f"{name_of(cell)}.result.json"))
        path = folder / f"{name_of(cell)}.spec.json"
        path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        pairs.append((name_of(cell), [str(path), spec.result_path]))
    listing = folder / "cells.json"
    listing.write_text(json.dumps([pair for _, pair in pairs]), encoding="utf-8")
    process = subprocess.run([str(venvs.build(image).python), "-c", BATCH_SCRIPT, str(listing)],
                             cwd=ROOT, capture_output=True, text=True, timeout=3000)
    found = {}
    for name, (_, result) in pairs:
        assert Path(result).exists(), f"{environment} {name}: no result\n{process.stderr[-3000:]}"
        found[name] = json.loads(Path(result).read_text(encoding="utf-8"))
    return found


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict[str, dict[str, dict]]:
    """environment → cell name → its record: the one shared run of this module, two
    environments at a time (nothing here is timed: the answers are what is checked)."""
    folders = {env: tmp_path_factory.mktemp(env) for env in ENVIRONMENTS}
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {env: pool.submit(run_environment, env, folder) for env, folder in folders.items()}
        return {env: future.result() for env, future in done.items()}


def test_every_layer_runs_in_every_environment_that_has_it(records):
    failed = {(env, name): (r["error"] or "")[-300:] for env, found in records.items()
              for name, r in found.items() if r["status"] != "ok"}
    assert not failed, failed
    for env in ("keras-tensorflow", "keras-jax", "keras-torch", "torch", "jax", "tensorflow"):
        assert {name_of((layer, "forward", "auto", "float32")) for layer in LAYERS} \
            <= set(records[env]), env
    keras2 = {name.split("-")[0] for name in records["keras2"]}
    assert keras2 == {name for name, layer in LAYERS.items() if "tf-keras" not in layer.missing}


def test_the_table_builds_on_the_installed_keras(records):
    """Each layer's class exists and its arguments build (the cell ran), and the recipe's weights
    are all of the Keras layer's (set_weights took them; the counts agree)."""
    for env in ("keras-tensorflow", "keras-jax", "keras-torch", "keras2"):
        for name, r in records[env].items():
            assert r["extra"]["parameters"] == r["extra"]["keras_parameters"], (env, name)


def test_every_native_twin_gives_the_keras_answer(records):
    compared = 0
    for cell in CELLS:
        name = name_of(cell)
        answers = {env: found[name]["answer"] for env, found in records.items() if name in found}
        if LAYERS[cell[0]].random and cell[1] != "forward":
            assert not any(answers.values()), name        # each framework's own dropout mask
            continue
        assert all(answers.values()), name
        tolerance = "bfloat16" if cell[3] == "bfloat16" else "float32"
        for (env_a, a), (env_b, b) in itertools.combinations(answers.items(), 2):
            found, count = differences(a, b, tolerance)
            assert count and not found, (name, env_a, env_b, found)
            compared += 1
    assert compared > 400


def test_a_train_step_changes_the_weights_and_backward_has_gradients(records):
    for env, found in records.items():
        for name, r in found.items():
            layer = LAYERS[name.split("-")[0]]
            if r["task"] == "train":
                assert r["answer"]["update"]["rms"] > 0, (env, name)
            if r["task"] == "backward" and layer.trainable:
                assert r["answer"]["weight_grads"]["rms"] > 0, (env, name)


def test_records_carry_phase_shapes_and_jit(records):
    for env, found in records.items():
        for name, r in found.items():
            layer, phase, jit, precision = name.split("-")
            assert (r["workload"], r["task"], r["options"]) == \
                ("layer", phase, {"layer": layer, "shapes": "tiny"}), (env, name)
            assert str(r["jit"]) == jit and r["precision"] == precision, (env, name)
            assert r["timing"].endswith(layer_common.TIMINGS[phase]) and r["samples_ms"], name
            assert r["extra"]["layer"] == layer and r["extra"]["shapes"] == "tiny", name
            assert r["rss_peak_mb"] > 0, name
    compiled = {env: found[name_of(("Dense", "forward", True, "float32"))]["effective"]
                for env, found in records.items()}
    assert compiled["torch"]["jit"].startswith("torch.compile")
    assert compiled["jax"]["jit"] == "jax.jit"
    assert compiled["tensorflow"]["jit"] == "tf.function(jit_compile=True)"
    assert all(compiled[env]["jit_compile"] is True
               for env in ("keras-tensorflow", "keras-jax", "keras-torch", "keras2"))

"""The layer family's one table (runner/worker/catalog/layers.py) and what reads it, without a
framework: every layer has every shape set and a weight list where it has weights, every native
API has a twin for every layer, the plan's not-applicable rules come from the table, the schema
refuses a name it does not hold, and the manual lists every layer. That the table builds on the
installed Keras and that the twins compute Keras's answer: tests/worker/test_layers.py."""

from __future__ import annotations

import ast

import pytest

from runner.paths import REPO_ROOT
from runner.worker import catalog
from runner.worker.apis import layer_common
from runner.worker.catalog.layers import FAMILIES, LAYERS, SHAPE_SETS
from runner.worker.protocol import CellSpec
from tests.matrices import matrix_text

NATIVE_TWINS = ("torch_api", "jax_api", "tensorflow_api")


def spec(layer: str, shapes: str = "small", task: str = "forward") -> CellSpec:
    return CellSpec(run_id="r", cell_id="c", cell_name="c", repeat=1, environment="e", api="torch",
                    backend=None, image=None, workload="layer", task=task, batch_size=2,
                    precision="float32", jit="auto", size="full", tf32=None,
                    steps_per_execution=1, data="device", device="cpu",
                    options={"layer": layer, "shapes": shapes}, steps=1, warmup_steps=1, seed=0,
                    result_path="x")


def twin_names(package: str) -> set[str]:
    """The keys of TWINS in an API's layer.py, read with ast (the host imports no framework)."""
    tree = ast.parse((REPO_ROOT / "runner/worker/apis" / package / "layer.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "TWINS":
            return {key.value for key in node.value.keys}      # type: ignore[union-attr]
    raise AssertionError(f"{package}/layer.py has no TWINS")


def test_every_layer_is_complete():
    assert len(LAYERS) >= 28 and set(FAMILIES) == {layer.family for layer in LAYERS.values()}
    for name, layer in LAYERS.items():
        assert set(layer.shapes) == set(SHAPE_SETS), name
        assert layer.keras in ("keras.layers", "keras_hub.layers", "recipe"), name
        for shapes in SHAPE_SETS:
            weights = layer_common.weight_specs(spec(name, shapes))
            assert bool(weights) == layer.trainable, (name, shapes)
            if shapes == "model":           # hundreds of MB of numbers: their shapes only
                continue
            made = layer_common.initial_weights(spec(name, shapes))
            assert [w.shape for w in made.values()] == [w[1] for w in weights]
            assert all(x.shape[0] == 2 for x in layer_common.inputs(spec(name, shapes)))


def test_every_native_api_has_a_twin_for_every_layer():
    for package in NATIVE_TWINS:
        assert twin_names(package) == set(LAYERS), package


def test_the_weights_and_inputs_are_the_seeds_and_the_same_everywhere():
    first, again = (layer_common.initial_weights(spec("LSTM")) for _ in range(2))
    assert all((first[k] == again[k]).all() for k in first)
    other = layer_common.initial_weights(spec("LSTM").__class__(**{**spec("LSTM").to_dict(),
                                                                    "seed": 1}))
    assert not (first["kernel"] == other["kernel"]).all()
    ids = layer_common.inputs(spec("Embedding"))[0]
    assert ids.dtype.name == "int32" and 0 <= ids.min() and ids.max() < 30
    assert layer_common.trainable(layer_common.initial_weights(spec("BatchNormalization"))) == \
        ["gamma", "beta"]


@pytest.mark.parametrize(("layer", "api", "task", "reason"), [
    ("GroupQueryAttention", "tf-keras", "forward", "Keras 2 (tf-keras) has no GroupQueryAttention"),
    ("RMSNormalization", "tf-keras", "train", "Keras 2 (tf-keras) has no RMSNormalization"),
    ("RotaryEmbedding", "tf-keras", "forward", "Keras 2 (tf-keras) has no rotary embedding"),
    ("ReLU", "torch", "train", "ReLU has no weights"),
    ("Dense", "numpy", "forward", "layer has no numpy implementation"),
    ("Dense", "hf", "forward", "layer has no hf implementation"),
])
def test_the_plan_says_why_a_layer_does_not_apply(layer, api, task, reason):
    axes = dict(catalog.AXIS_DEFAULTS)
    found = catalog.not_applicable_reason("layer", api, None, axes, task, 2, {"layer": layer})
    assert found is not None and found.startswith(reason), found


def test_what_applies_is_planned_to_run():
    axes = dict(catalog.AXIS_DEFAULTS)
    for api, backend in (("keras", "torch"), ("keras", "jax"), ("tf-keras", None), ("jax", None)):
        for task in ("forward", "train", "backward"):
            assert catalog.not_applicable_reason("layer", api, backend, axes, task, 2,
                                                 {"layer": "Dense"}) is None, (api, task)
    assert catalog.not_applicable_reason("layer", "keras", "torch", {**axes, "jit": True},
                                         "train", 2, {"layer": "LSTM"}) is None
    assert catalog.not_applicable_reason("layer", "keras", "torch", {
        **axes, "steps_per_execution": 4}, "forward", 2, {"layer": "Dense"}) is not None


def test_the_schema_refuses_a_layer_the_table_does_not_hold(write_matrix, run_cli):
    path = write_matrix(matrix_text("bad", environments=["torch"], benchmarks=[
        {"workload": "layer", "options": {"layer": "Dens"}}]), with_environments=False)
    code, out, err = run_cli(path, "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "options.layer: 'Dens' is not one of the 28 values it allows (did you mean " \
           "'Dense'?)" in err
    path = write_matrix(matrix_text("bad", environments=["torch"], benchmarks=[
        {"workload": "layer", "options": {"layer": "Dense", "shapes": "huge"}}]),
        with_environments=False)
    code, out, err = run_cli(path, "--dry-run")
    assert code == 2 and "options.shapes: 'huge' is not one of tiny, small, model" in err


def test_the_shapes_follow_the_size_and_the_phase_is_the_task(write_matrix, run_cli):
    path = write_matrix(matrix_text("layers", environments=["torch"], benchmarks=[
        {"workload": "layer", "task": ["forward", "backward"], "size": "tiny",
         "options": {"layer": ["Dense", "LSTM"]}}]), with_environments=False)
    code, out, err = run_cli(path, "--dry-run")
    assert code == 0, err
    assert out.count("layer-forward-torch-b1-size=tiny-layer=") == 2
    assert out.count("layer-backward-torch-b1-size=tiny-layer=") == 2


def test_the_manual_lists_every_layer():
    text = (REPO_ROOT / "docs" / "layers.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in text for name in LAYERS)

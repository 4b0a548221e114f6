"""The CNN's recipe and its adapters, without a framework: the per-API modules stay thin (the
skeleton lives in apis/cnn_recipe.py, the data axis in apis/feeds.py), the channels-first weights
compute the function the Keras layout does, and the shared order a pipeline draws epoch by epoch.
The adapters themselves run in the real environments: tests/worker/test_cnn.py (every API
trains, one same answer) and test_feeds.py (the same seeded batches on every API)."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import numpy as np
import pytest

from runner.paths import REPO_ROOT
from runner.worker.apis import cnn_common as cc
from runner.worker.apis import cnn_recipe, feeds

APIS = REPO_ROOT / "runner" / "worker" / "apis"
# Code lines (blank lines, comments and docstrings not counted) an API's CNN adapter may hold:
# its model, step, logits and feeds (the modules held 122 to 143 before the recipe took the rest).
MAX_ADAPTER_CODE_LINES = 90


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    docstrings: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines: set[int] = set()
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
               tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skipped:
            lines.update(n for n in range(token.start[0], token.end[0] + 1) if n not in docstrings)
    return len(lines)


def adapters() -> list[Path]:
    return sorted(APIS.glob("*_api/cnn.py"))


def test_every_apis_cnn_module_is_a_thin_adapter_over_the_recipe():
    found = {path.parent.name: code_lines(path.read_text(encoding="utf-8")) for path in adapters()}
    assert set(found) == {"keras_api", "tf_keras_api", "torch_api", "jax_api", "tensorflow_api"}
    too_long = {name: lines for name, lines in found.items() if lines > MAX_ADAPTER_CODE_LINES}
    assert not too_long, f"over {MAX_ADAPTER_CODE_LINES} lines of code: {too_long}"
    for path in adapters():                 # each one builds through the recipe
        assert "recipe.build(spec, fw, predictor, trainer)" in path.read_text(encoding="utf-8")


def test_the_thinness_rule_counts_code_and_catches_a_planted_long_adapter():
    documented = '"""A docstring\nof three\nlines."""\n\n# a comment\nx = 1\n\n\ny = [\n    2,\n]\n'
    assert code_lines(documented) == 4
    planted = "".join(f"x{i} = {i}\n" for i in range(MAX_ADAPTER_CODE_LINES + 1))
    assert code_lines(planted) > MAX_ADAPTER_CODE_LINES


def dense_input(weights: list[np.ndarray], feature_map: np.ndarray) -> np.ndarray:
    """The first dense layer on a (7, 7, 64) feature map flattened height-width-channel."""
    return feature_map.reshape(-1) @ weights[-4]


def test_channels_first_weights_compute_the_same_function():
    """torch's layout of the shared weights: a conv kernel applied channels-first and the first
    dense layer on a channels-first flatten give what the Keras layout gives."""
    weights = cc.initial_weights(0)
    moved = cnn_recipe.channels_first(weights)
    assert [w.shape for w in moved[:2]] == [(32, 1, 3, 3), (32,)]
    assert moved[-4].shape == (cc.HIDDEN, cc.FLAT) and moved[-2].shape == (cc.CLASSES, cc.HIDDEN)
    rng = np.random.default_rng(1)
    patch = rng.standard_normal((3, 3, 1)).astype(np.float32)            # HWC
    keras_conv = np.einsum("hwi,hwio->o", patch, weights[0])
    torch_conv = np.einsum("ihw,oihw->o", patch.transpose(2, 0, 1), moved[0])
    np.testing.assert_allclose(torch_conv, keras_conv, rtol=1e-5)
    feature_map = rng.standard_normal((7, 7, cc.CONV_FILTERS[-1])).astype(np.float32)
    channels_first_flat = feature_map.transpose(2, 0, 1).reshape(-1)
    np.testing.assert_allclose(moved[-4] @ channels_first_flat, dense_input(weights, feature_map),
                               rtol=1e-4, atol=1e-5)


def test_a_pipeline_draws_the_shared_order_one_epoch_per_pass():
    rows = feeds.EpochRows(1024, 64, seed=3)
    shared = cc.batch_indices(1024, 64, 3)
    assert len(rows) == 16
    for _ in range(3):                                   # three passes: three epochs, in order
        assert list(rows) == [next(shared).tolist() for _ in range(16)]


def test_the_data_axis_switch_takes_the_apis_way():
    made = []
    ways = feeds.Ways(*(lambda mode=mode: (made.append(mode) or iter(()), mode)
                        for mode in ("arrays", "dataset", "device")))
    for mode in ("device", "arrays", "dataset"):
        assert feeds.chosen(mode, ways)[1] == mode
    assert made == ["device", "arrays", "dataset"]
    with pytest.raises(ValueError, match="data = 'disk'"):
        feeds.chosen("disk", ways)


def test_the_precision_axis_maps_to_each_frameworks_dtypes():
    table = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}

    def dtypes(precision: str) -> tuple[str, str]:
        spec = type("Spec", (), {"precision": precision})()
        return cnn_recipe.precision_dtypes(spec, table)

    assert dtypes("float32") == ("f32", "f32")
    assert dtypes("mixed_float16") == ("f32", "f16")
    assert dtypes("bfloat16") == ("bf16", "bf16")
    assert dtypes("int8_from_bfloat16") == ("bf16", "bf16")     # a quantized cell's float base

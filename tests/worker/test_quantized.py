"""The quantized tier in the real environments on the CPU (docs/quantized.md): int8 predict for
the tiny CNN, BERT and Gemma's generate on every Keras 3 backend, int8 for native torch (CNN)
and hf (BERT), Keras's float8 on a CPU labelled emulated, and Keras's quantized training (QLoRA,
float8 training) on JAX. Each environment runs its cells in
ONE worker process (the framework imported once), through the worker's own entry point; every
assertion reads those records."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from runner.environments import venvs
from runner.paths import REPO_ROOT as ROOT
from runner.worker import catalog
from runner.worker.protocol import CellSpec

ENVIRONMENTS = {"keras-jax": ("jax", "keras", "jax"),
                "jax": ("jax", "jax", None), "tensorflow": ("tensorflow", "tensorflow", None),
                "keras2": ("tf-keras", "tf-keras", None),
                "keras-tensorflow": ("tensorflow", "keras", "tensorflow"),
                "keras-torch": ("torch", "keras", "torch"),
                "torch": ("torch", "torch", None), "hf": ("hf-torch", "hf", None)}
KERAS_CELLS = [("cnn", "predict", 16, "int8", {}), ("bert", "predict", 4, "int8", {}),
               ("gemma", "generate", 2, "int8", {"max_length": 12})]
# Quantized training where Keras has it: QLoRA (Gemma's LoRA fit over int8 kernels) and
# float8 training (the CNN's fit).
CELLS = {"keras-jax": KERAS_CELLS + [("cnn", "predict", 16, "float8", {}),
                                     ("gemma", "fit", 2, "int8", {"sequence_length": 16}),
                                     ("cnn", "fit", 32, "float8", {})],
         "keras-tensorflow": KERAS_CELLS, "keras-torch": KERAS_CELLS,
         "torch": [("cnn", "predict", 16, "int8", {})],
         "hf": [("bert", "predict", 4, "int8", {})]}
BATCH_SCRIPT = textwrap.dedent("""
    import json, sys
    from runner.worker.__main__ import main
    for spec_path, result_path in json.load(open(sys.argv[1])):
        main([spec_path, result_path])
""")


def run_environment(environment: str, folder: Path,
                    cells: list[tuple] | None = None) -> list[tuple[tuple, dict]]:
    image, api, backend = ENVIRONMENTS[environment]
    env = venvs.build(image)
    pairs, cells = [], cells or CELLS[environment]
    for index, (workload, task, batch, precision, options) in enumerate(cells):
        spec = CellSpec(
            run_id="test", cell_id=f"q{index}", cell_name=f"{workload}-{task}-{precision}",
            repeat=1, environment=environment, api=api, backend=backend, image=image,
            workload=workload, task=task, batch_size=batch, precision=precision, jit="auto",
            size="tiny", tf32=None, steps_per_execution=1, data="device", device="cpu",
            options={**catalog.default_sizes(workload, "tiny"), **options}, steps=2,
            warmup_steps=1, seed=0, result_path=str(folder / f"q{index}.result.json"))
        (folder / f"q{index}.spec.json").write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        pairs.append([str(folder / f"q{index}.spec.json"), spec.result_path])
    (folder / "cells.json").write_text(json.dumps(pairs), encoding="utf-8")
    done = subprocess.run([str(env.python), "-c", BATCH_SCRIPT, str(folder / "cells.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500)
    out = []
    for cell, (_, result) in zip(cells, pairs, strict=True):
        assert Path(result).exists(), f"{cell}: no result\n{done.stderr[-3000:]}"
        out.append((cell, json.loads(Path(result).read_text(encoding="utf-8"))))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("environment", list(CELLS))
def test_int8_quantizes_shrinks_and_measures_its_error(environment, tmp_path):
    library = "torchao" if environment in ("torch", "hf") else "keras"
    for (workload, task, _, precision, _), r in run_environment(environment, tmp_path):
        where = f"{workload} {task} {precision} on {environment}"
        assert r["status"] == "ok", f"{where}: {r['error']}"
        ran, measured = r["effective"]["quantization"], r["extra"]["quantization"]
        assert ran["mode"] == precision and ran["library"].startswith(library), where
        assert ran["built_in"] == "float32" and ran["layers_quantized"] >= 2, where
        assert 0 < ran["params_quantized"] <= ran["params_total"], where
        error = measured["error"]
        assert error["rows"] >= 2 and 0.0 <= error["top1_agreement"] <= 1.0, where
        assert 0.0 < error["relative_error"] < 0.15, where          # computed, and plausible
        assert r["answer"], where
        if precision == "float8":
            # Keras's float8 on a CPU: quantize-dequantize around float32 matmuls, labelled so;
            # its kernels stay float32 (scales and amax histories are added).
            assert ran["float8"].startswith("emulated"), where
            assert measured["model_bytes_after"] > measured["model_bytes_before"], where
        else:
            assert "float8" not in ran, where
            assert measured["model_bytes_after"] < 0.8 * measured["model_bytes_before"], where
        if task == "fit":
            assert r["loss_first"] != r["loss_last"], f"{where}: the loss did not change"
        if task == "generate":
            # Time to first token and per-token decode, as for every generate row.
            assert len(r["extra"]["prefill_ms"]) >= 3 and r["extra"]["tokens_per_s"] > 0, where


@pytest.mark.slow
def test_the_cnn_predicts_the_same_logits_on_every_api(tmp_path):
    """The CNN's predict task (the quantized tier's small model) in float32 on every API that
    has the CNN: the same weights and batch give the same logits."""
    cell = ("cnn", "predict", 16, "float32", {})
    logits = {}
    for environment in ("keras-jax", "jax", "tensorflow", "keras2", "torch"):
        folder = tmp_path / environment
        folder.mkdir()
        ((_, record),) = run_environment(environment, folder, [cell])
        assert record["status"] == "ok", f"{environment}: {record['error']}"
        assert record["items_per_step"] == 16 and record["samples_ms"], environment
        logits[environment] = record["answer"]["logits"]
    reference = logits.pop("keras-jax")
    scale = max(abs(v) for v in reference)
    for environment, values in logits.items():
        worst = max(abs(a - b) for a, b in zip(reference, values, strict=True))
        assert worst <= 1e-3 * scale, f"{environment}: {values[:4]} against {reference[:4]}"


@pytest.mark.slow
def test_torchao_int4_asks_for_the_kernels_torch_itself_has():
    """torchao's default int4 layout ("plain") runs on mslk's kernels, which no stack here
    installs, so every int4 cell failed on a GPU; the worker asks for tinygemm's packed layout,
    whose matmul is torch's own (aten._weight_int4pack_mm)."""
    script = textwrap.dedent("""
        import torch
        from torchao import quantization
        from runner.worker.apis.torchao_quantize import CONFIGS
        name, kwargs = CONFIGS["int4"]
        config = getattr(quantization, name)(**kwargs)
        assert name == "Int4WeightOnlyConfig" and config.group_size == 128
        print(str(getattr(config.int4_packing_format, "value", config.int4_packing_format)),
              hasattr(torch.ops.aten, "_weight_int4pack_mm"))
    """)
    done = subprocess.run([str(venvs.build("torch").python), "-c", script], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["tile_packed_to_4d", "True"]

"""The keras-hub workloads of the Keras 3 benchmark table (BERT, SAM, StableDiffusion, Gemma,
Mistral) on every Keras 3 backend and on Keras 2 (keras-nlp / keras-cv 0.8, image keras2-tf215).

Real frameworks on CPU at tiny sizes: every model × task runs through the real worker, the loss is
finite and changes under fit, generate returns the requested length, and the batch size and
sequence length recorded are the configured ones. To stay within a few minutes on a 2-core
machine, each environment runs all its cells in ONE worker process (framework import paid once)
instead of the runner's process per cell; test_matrix_rows checks what the runner plans for the
table. The full-size configurations are checked against the presets' parameter counts under
jax.eval_shape, which builds the models without allocating a single weight.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from runner.environments import venvs
from runner.paths import REPO_ROOT as ROOT
from runner.schema import matrix
from runner.worker import catalog
from runner.worker.apis.kerashub import benches, configs, models
from runner.worker.apis.kerashub import stable_diffusion as sd
from runner.worker.protocol import CellSpec


# environment -> (image, api, backend)
ENVIRONMENTS = {
    "keras-tensorflow": ("tensorflow", "keras", "tensorflow"),
    "keras-jax": ("jax", "keras", "jax"),
    "keras-torch": ("torch", "keras", "torch"),
    "keras2": ("keras2-tf215", "tf-keras", None),
}

# (workload, task, batch size, precision, options): tiny configurations, small batches; the
# options differ from the size defaults so that the test sees the configured values recorded.
KERAS3_CELLS = [
    ("bert", "fit", 4, "float32", {"sequence_length": 16}),
    ("bert", "predict", 8, "float32", {"sequence_length": 24}),
    ("sam", "fit", 1, "float32", {}),
    ("sam", "predict", 2, "float32", {}),
    ("stable_diffusion", "fit", 2, "float32", {"image_size": 96}),
    ("stable_diffusion", "predict", 2, "float32", {"num_steps": 2, "image_size": 96}),
    ("gemma", "fit", 2, "bfloat16", {"sequence_length": 16, "lora_rank": 4}),
    ("gemma", "generate", 2, "bfloat16", {"max_length": 12}),
    ("mistral", "fit", 2, "bfloat16", {"sequence_length": 16, "lora_rank": 4}),
    ("mistral", "generate", 2, "bfloat16", {"max_length": 12}),
]
KERAS2_CELLS = [cell for cell in KERAS3_CELLS if cell[0] in ("bert", "sam")]

# Runs every spec of a list in one process, through the worker's own entry point.
BATCH_SCRIPT = textwrap.dedent("""
    import json, sys
    from runner.worker.__main__ import main
    for spec_path, result_path in json.load(open(sys.argv[1])):
        main([spec_path, result_path])
""")


def make_spec(environment: str, cell: tuple, result_path: Path) -> CellSpec:
    image, api, backend = ENVIRONMENTS[environment]
    workload, task, batch, precision, options = cell
    return CellSpec(
        run_id="test", cell_id=f"{workload}-{task}", cell_name=f"{workload}-{task}-{environment}",
        repeat=1, environment=environment, api=api, backend=backend, image=image,
        workload=workload, task=task, batch_size=batch, precision=precision, jit="auto",
        size="tiny", tf32=None, steps_per_execution=1, data="arrays", device="cpu",
        options={**catalog.default_sizes(workload, "tiny"), **options}, steps=2, warmup_steps=1,
        seed=0, result_path=str(result_path))


def run_cells(environment: str, cells: list[tuple], folder: Path) -> list[tuple[tuple, dict]]:
    env = venvs.build(ENVIRONMENTS[environment][0])
    pairs, specs = [], {}
    for cell in cells:
        name = f"{cell[0]}-{cell[1]}"
        spec = make_spec(environment, cell, folder / f"{name}.result.json")
        spec_path = folder / f"{name}.spec.json"
        spec_path.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
        pairs.append([str(spec_path), spec.result_path])
        specs[name] = (cell, spec)
    listing = folder / "cells.json"
    listing.write_text(json.dumps(pairs), encoding="utf-8")
    process = subprocess.run([str(env.python), "-c", BATCH_SCRIPT, str(listing)], cwd=ROOT,
                             capture_output=True, text=True, timeout=1500)
    results = []
    for name, (cell, spec) in specs.items():
        path = Path(spec.result_path)
        assert path.exists(), f"{name}: no result\n{process.stdout[-3000:]}\n{process.stderr[-3000:]}"
        results.append((cell, json.loads(path.read_text(encoding="utf-8"))))
    return results


@pytest.fixture(scope="module")
def results_of(tmp_path_factory):
    """results_of(environment) -> [(cell, record)]: every cell of an environment, run once."""
    cache: dict[str, list[tuple[tuple, dict]]] = {}

    def get(environment: str) -> list[tuple[tuple, dict]]:
        if environment not in cache:
            cells = KERAS2_CELLS if environment == "keras2" else KERAS3_CELLS
            cache[environment] = run_cells(environment, cells, tmp_path_factory.mktemp(environment))
        return cache[environment]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("environment", list(ENVIRONMENTS))
def test_every_model_and_task(environment, results_of):
    results = results_of(environment)
    failures = {f"{c[0]}-{c[1]}": r["error"] for c, r in results if r["status"] != "ok"}
    assert not failures, failures
    for (workload, task, batch, precision, options), r in results:
        where = f"{workload} {task} on {environment}"
        assert r["batch_size"] == batch and r["extra"]["batch_size"] == batch, where
        assert len(r["samples_ms"]) >= 1 and all(s > 0 for s in r["samples_ms"]), where
        assert r["compile_s"] > 0 and r["timing"], where
        assert r["effective"]["dtype_policy"] == precision, where
        if environment == "keras-torch":       # cuDNN's autotuner, as it was after the window
            assert r["effective"]["cudnn_benchmark"] is False, where
        if task == "fit":
            assert math.isfinite(r["loss_first"]) and math.isfinite(r["loss_last"]), where
            assert r["loss_first"] != r["loss_last"], f"{where}: the loss did not change"
        if workload == "bert" or (task == "fit" and "sequence_length" in options):
            assert r["extra"]["sequence_length"] == options["sequence_length"], where
        if workload in ("gemma", "mistral"):
            if task == "fit":
                assert r["extra"]["lora_rank"] == options["lora_rank"] == r["effective"]["lora_rank"]
                assert 0 < r["extra"]["trainable_params"] < r["extra"]["params"], where
            else:
                assert r["extra"]["generated_length"] == options["max_length"], where
                assert r["extra"]["tokens_per_s"] > 0, where
                # Time to first token (apis/first_token.py): one-new-token calls, and N, the
                # decoding loop's steps from the shortest prompt to max_length.
                assert len(r["extra"]["prefill_ms"]) >= 3, where
                assert all(t > 0 for t in r["extra"]["prefill_ms"]), where
                # T(1) of the decode latency over the timed call's own buffer (issue 59 item 7)
                assert len(r["extra"]["decode_base_ms"]) >= 3, where
                assert all(t > 0 for t in r["extra"]["decode_base_ms"]), where
                assert r["extra"]["first_token_call"]["loop_iterations_after_prefill"] == 1
                assert 2 <= r["extra"]["generated_tokens"] < options["max_length"], where
                # The same work as the hf cells' (issue 49): prompts of one length, as many
                # loop iterations as new tokens, greedy on every model; the prefill keras-hub's
                # own, over its whole buffer.
                work = r["effective"]
                assert work["decode_iterations"] == work["new_tokens_per_sequence"] == \
                    r["extra"]["generated_tokens"] == options["max_length"] - \
                    work["prompt_positions"], where
                assert work["prefill_positions"] == options["max_length"], where
                assert r["extra"]["prompt_tokens"] == batch * work["prompt_positions"], where
                assert r["extra"]["sampler"] == "GreedySampler", where
        if workload == "stable_diffusion":
            # The model is built for options.image_size (not the config's default side).
            assert r["effective"]["image_size"] == r["extra"]["image_size"] == 96, where
        if workload == "sam" and task == "fit":
            # The study's step: the image encoder alone, its embeddings at 1/16 of the side.
            side = r["extra"]["image_size"]
            assert r["extra"]["target_shape"][:2] == [side // 16, side // 16], where
            assert r["extra"]["trained_params"] < r["extra"]["params"], where
        if workload == "stable_diffusion" and task == "fit":
            # The study's step: the VAE image encoder, its output at 1/8 of the image side.
            assert r["extra"]["target_shape"][:2] == [12, 12], where
            assert r["extra"]["trained_params"] < r["extra"]["params"], where
        if workload == "stable_diffusion" and task == "predict":
            # A sample is one denoising step: the call's time divided by num_steps.
            assert r["steps_per_call"] == options["num_steps"], where
            assert r["extra"]["images_shape"][:3] == [batch, 96, 96], where
            # Items are images: batch per call, so batch / num_steps per denoising step.
            assert r["items_per_step"] * options["num_steps"] == pytest.approx(batch), where
            # Also timed as the study did, after the window: (T(N+2) − T(2)) / N per round.
            assert len(r["extra"]["study_step_ms"]) == sd.STUDY_ROUNDS, where
            assert all(math.isfinite(t) for t in r["extra"]["study_step_ms"]), where
        if workload in ("bert", "sam"):
            feed = benches.KERAS2_FEED if environment == "keras2" else benches.KERAS3_FEED
            assert r["effective"]["feed"] == feed, where


@pytest.mark.slow
def test_the_keras3_backends_compute_the_same_answers(results_of):
    """The same seeded inputs and the same NumPy weights (redrawn per weight path: Keras on torch
    lists SAM's weights in another order) give the same answer on TensorFlow, JAX and torch,
    within the tolerance of the precision; Stable Diffusion predict draws its initial latents
    with each backend's own generator (matrix.toml: check_answers = false)."""
    from runner.results.analysis import answers

    cells = []
    for environment in ("keras-tensorflow", "keras-jax", "keras-torch"):
        for (workload, task, batch, precision, _), record in results_of(environment):
            cells.append({"cell_id": f"{workload}-{task}-{environment}", "status": "ok",
                          "environment": environment, "api": "keras", "workload": workload,
                          "label": f"{workload} ({task})", "batch_size": batch,
                          "precision": precision, "tf32_effective": False, "on_gpu": False,
                          "answer": record["answer"]})
    cells = answers.checked(cells)
    verdicts = {c["cell_id"]: (c["answer_check"], c["answer_detail"]) for c in cells}
    for cell_id, (verdict, detail) in verdicts.items():
        if cell_id.startswith("bert-fit"):
            assert verdict == "not recorded", cell_id        # dropout: no answer
        elif not cell_id.startswith("stable_diffusion-predict"):
            assert verdict == "same", (cell_id, detail)


@pytest.mark.slow
def test_full_size_configurations_match_the_presets(tmp_path):
    """Parameter counts of the full configurations, built under jax.eval_shape (no weights are
    allocated: an 8.5 B-parameter Gemma costs a few seconds and no memory)."""
    env = venvs.build("jax")
    script = textwrap.dedent("""
        import json, os
        os.environ["KERAS_BACKEND"] = "jax"
        import jax, keras_hub
        from runner.worker.apis.kerashub import configs, models

        def count(workload):
            out = {}
            def build():
                model = models.keras_hub_backbone(keras_hub, workload, "full")
                if workload == "sam":  # the mask decoder sits outside SAMBackbone's graph
                    model = keras_hub.models.SAMImageSegmenter(backbone=model, preprocessor=None)
                out["n"] = model.count_params()
                return 0
            jax.eval_shape(build)
            return out["n"]

        print(json.dumps({w: count(w) for w in configs.PRESET_PARAMS}))
    """)
    process = subprocess.run([str(env.python), "-c", script], cwd=ROOT, capture_output=True,
                             text=True, timeout=600, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert process.returncode == 0, process.stderr[-3000:]
    counts = json.loads(process.stdout.strip().splitlines()[-1])
    assert counts == {w: n for w, (_, n) in configs.PRESET_PARAMS.items()}
    assert counts["bert"] == 109_482_240 and counts["gemma"] == 8_537_680_896
    assert counts["mistral"] == 7_241_732_096 and counts["sam"] == 641_090_864


def test_matrix_rows():
    """matrix.toml carries the study's table: rows, batch sizes, full sizes under the full
    profile, Gemma/Mistral not applicable on Keras 2; examples/wide-cpu.toml the same rows at
    tiny sizes (the smoke profile of matrix.toml is a first look: tests/test_matrix_toml.py)."""
    expected = {("bert", "fit"): {32}, ("bert", "predict"): {256}, ("sam", "fit"): {1},
                ("sam", "predict"): {4}, ("stable_diffusion", "fit"): {8},
                ("stable_diffusion", "predict"): {13}, ("gemma", "fit"): {8},
                ("gemma", "generate"): {32, 1}, ("mistral", "fit"): {8},
                ("mistral", "generate"): {32, 1}}
    full = matrix.load(ROOT / "matrix.toml", profile="full")
    cells = [c for c in full.cells if c.workload in configs.PRESET_PARAMS
             and c.axes["devices"] == 1 and not catalog.is_quantized(c.axes["precision"])]
    scaling = {(c.environment, c.axes["devices"]): c.not_applicable for c in full.cells
               if c.workload == "bert" and c.axes["devices"] > 1}      # docs/scaling.md
    assert {n for _, n in scaling} == {2, 4, 8} and all(c.task == "fit" for c in full.cells
                                                        if c.axes["devices"] > 1)
    assert {env for (env, _), why in scaling.items() if why} == {"keras-torch"}
    # The quantized tier's int8 columns (docs/quantized.md): BERT predict from float32, Gemma
    # and Mistral generate from bfloat16, on every Keras 3 backend and hf-torch; NA on Keras 2.
    quantized = {(c.workload, c.task, c.batch_size, c.axes["precision"], c.environment):
                 c.not_applicable for c in full.cells if catalog.is_quantized(c.axes["precision"])}
    keras3 = [e for e in ENVIRONMENTS if e != "keras2"] + ["hf-torch"]
    assert quantized == {
        **{(w, t, b, p, e): None for w, t, b, p in (
            ("bert", "predict", 256, "int8"), ("gemma", "generate", 32, "int8_from_bfloat16"),
            ("mistral", "generate", 32, "int8_from_bfloat16")) for e in keras3},
        ("bert", "predict", 256, "int8", "keras2"): catalog.api("tf-keras").quantizer.reason,
        **{(w, "generate", 32, "int8_from_bfloat16", "keras2"):
           "Keras 2 (keras-nlp 0.8) has no Gemma or Mistral" for w in ("gemma", "mistral")}}
    seen: dict[tuple, set] = {}
    for cell in cells:
        seen.setdefault((cell.workload, cell.task), set()).add(cell.batch_size)
        assert cell.axes["size"] == "full"
        assert cell.environment in ENVIRONMENTS or cell.environment == "hf-torch"
        # hf-torch: the same rows on Hugging Face's code, eager and torch.compile'd
        assert cell.axes["jit"] == "auto" or (cell.environment, cell.axes["jit"]) == ("hf-torch", True)
        if cell.workload in ("gemma", "mistral"):
            assert cell.axes["precision"] == "bfloat16"
            assert (cell.not_applicable is not None) == (cell.environment == "keras2")
        else:
            assert cell.not_applicable is None, cell.name
        if cell.workload == "bert":
            assert cell.options["sequence_length"] == 512
        if cell.workload in ("gemma", "mistral"):
            assert cell.options["sequence_length"] == 128 and cell.options["lora_rank"] == 4
            assert cell.options["max_length"] == 50
    assert seen == expected
    assert {c.environment for c in cells} == set(ENVIRONMENTS) | {"hf-torch"}
    for workload, task in expected:      # one eager and one compiled hf cell per row
        hf = [c for c in cells if c.environment == "hf-torch" and (c.workload, c.task) ==
              (workload, task)]
        batches = len(expected[(workload, task)])
        assert sorted(str(c.axes["jit"]) for c in hf) == sorted(["True", "auto"] * batches)
    # The study's order: SAM, Stable Diffusion, BERT, Gemma, Mistral; fit before predict.
    rows = list(dict.fromkeys((c.workload, c.task, c.batch_size) for c in cells))
    assert rows == [("sam", "fit", 1), ("sam", "predict", 4), ("stable_diffusion", "fit", 8),
                    ("stable_diffusion", "predict", 13), ("bert", "fit", 32),
                    ("bert", "predict", 256), ("gemma", "fit", 8), ("gemma", "generate", 32),
                    ("gemma", "generate", 1), ("mistral", "fit", 8), ("mistral", "generate", 32),
                    ("mistral", "generate", 1)]
    keras2 = {c.environment for c in full.cells if c.api == "tf-keras"}
    assert keras2 == {"keras2"}               # one Keras 2 column, CNN and models alike
    wide = matrix.load(ROOT / "examples" / "wide-cpu.toml")
    tiny = [c for c in wide.cells if c.workload in configs.PRESET_PARAMS]
    assert tiny and all(c.axes["size"] == "tiny" and c.axes["devices"] == 1 for c in tiny)
    # every eager row and the quantized rows, tiny; not the compiled hf cells (a minute each)
    assert len(tiny) == len(cells) - len(expected) - 2 + len(quantized)
    assert not any(c.axes["jit"] is True for c in tiny)
    assert all(c.not_applicable is None for c in tiny if c.environment == "hf-torch")


def test_presets_only_from_local_folders(tmp_path):
    assert models.local_preset({}) is None
    assert models.local_preset({"preset": str(tmp_path)}) == str(tmp_path)
    with pytest.raises(ValueError, match="never downloads"):
        models.local_preset({"preset": "bert_base_en_uncased"})
    with pytest.raises(ValueError, match="not an existing local folder"):
        models.local_preset({"preset": "kaggle://keras/gemma/keras/gemma_7b_en/2"})


def test_an_image_side_sd3_cannot_take_is_an_error():

    for side, size in ((512, "full"), (1024, "full"), (96, "tiny")):
        configs.check_sd3_side(side, configs.config(configs.SD3, size))
    for side, size in ((500, "full"), (144, "tiny")):
        with pytest.raises(ValueError, match="StableDiffusion3 needs a multiple of 16"):
            configs.check_sd3_side(side, configs.config(configs.SD3, size))


def test_stable_diffusion_predict_counts_images_not_denoising_steps():
    """A sample is one denoising step (call time / num_steps); items/s must still be images/s and
    energy per item energy per image (they were num_steps times off: per image per step)."""
    from runner.results.analysis import stats
    from runner.results.data.records import throughput

    num_steps, batch, calls, call_ms = 4, 2, 10, 400.0
    record = {"samples_ms": [call_ms / num_steps] * calls, "median_ms": call_ms / num_steps,
              "calls_per_sample": 1, "steps_per_call": num_steps,
              "items_per_step": sd.images_per_step(batch, num_steps),
              "gpu_energy_j": 100.0, "train_s": 4.0, "extra": {"telemetry_window_s": 4.0}}
    images_per_s = batch * 1000.0 / call_ms                       # 5 images per second
    assert throughput(record)["items_per_s"] == pytest.approx(images_per_s)
    figures, note = stats.energy_of(record)
    assert note is None
    assert figures["energy_per_item_j"] == pytest.approx(100.0 / (calls * batch))   # J per image
    assert figures["energy_per_step_j"] == pytest.approx(100.0 / (calls * num_steps))


def test_berts_configuration_is_named_bert_base_en_uncased_everywhere():
    """The full BERT configuration (vocabulary 30 522, 109 482 240 parameters) is keras-hub's
    bert_base_en_uncased; bert_base_en is the cased model (28 996 tokens, 108 310 272): the
    catalog's help, the modules, the matrices and docs/ named the wrong one (issue 37)."""
    assert configs.PRESET_PARAMS["bert"] == ("bert_base_en_uncased", 109_482_240)
    assert configs.BERT["full"]["vocabulary_size"] == 30_522
    assert "bert_base_en_uncased architecture (109 482 240 parameters, vocabulary 30 522" in \
        catalog.WORKLOADS["bert"].help
    cased = re.compile(r"bert_base_en(?!_uncased)")
    files = [*ROOT.joinpath("runner").rglob("*.py"), *ROOT.glob("*.toml"),
             *ROOT.joinpath("examples").glob("*.toml"), *ROOT.joinpath("docs").rglob("*.md")]
    # The cased name only where a line says it is the cased model (what the study loaded).
    named = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in files
             for line in p.read_text(encoding="utf-8").splitlines()
             if cased.search(line) and "cased" not in cased.sub("", line)]
    assert named == []


def test_stable_diffusion_predict_is_also_timed_as_the_study_did():
    """(T(N+2 steps) − T(2 steps)) / N (keras-benchmarks' predict.py): the fixed part of a call
    (text encoders, VAE decode) drops out, where call time / N spreads it over the steps. A fake
    generate: 60 ms fixed plus 10 ms a step, N = 4."""
    import time as clock

    made: list[int] = []

    def generate_with(steps: int):
        made.append(steps)
        return lambda: clock.sleep(0.060 + 0.010 * steps) or np.zeros((2, 8, 8, 3))

    bench = sd.predict_bench(generate_with, batch=2, num_steps=4, effective={}, facts={})
    started = clock.perf_counter()
    bench.step()
    per_call_step_ms = (clock.perf_counter() - started) * 1000 / bench.steps_per_call
    assert per_call_step_ms == pytest.approx(25.0, abs=6)           # (60 + 40) / 4
    study = bench.evaluate()
    assert made == [4, 2, 6] and len(study["study_step_ms"]) == sd.STUDY_ROUNDS
    assert study["study_step_median_ms"] == pytest.approx(10.0, abs=3)
    assert "(T(N+2 steps) − T(2 steps)) / N" in study["study_step_method"]


def test_the_published_stable_diffusion_ratio_uses_the_studys_method():
    from runner.results.analysis import reference

    def cell(column_api: str, backend: str | None, study: float | None) -> dict:
        return {"workload": "stable_diffusion", "task": "predict", "batch_size": 13,
                "api": column_api, "backend": backend, "status": "ok", "size": "full",
                "on_gpu": True, "geomean_ms": 900.0, "study_step_ms": study}

    (row,) = reference.beside([cell("keras", "jax", 600.0), cell("keras", "torch", None)])
    jax, torch = row["columns"]["keras3_jax"], row["columns"]["keras3_torch"]
    assert jax["measured_ms"] == 600.0 and jax["ratio"] == pytest.approx(600.0 / 627.27)
    assert torch["measured_ms"] is None and torch["ratio"] is None   # no study figure: no ratio

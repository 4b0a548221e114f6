"""TF32 decided per API from the framework's flags and the device (runner/worker/apis/tf32.py).

No GPU here: the decisions are checked with the values the frameworks report on one (a compute
capability of "8.0" from JAX, (8, 0) from torch and TensorFlow). What every real framework
records on this machine's CPU is checked in tests/worker/test_cnn.py."""

from __future__ import annotations

import pytest

from runner.worker.apis import tf32

A100, V100 = "8.0", "7.0"


@pytest.mark.parametrize("setting, allowed", [
    (None, True), ("default", True), ("bfloat16", True), ("fastest", True),
    ("tensorfloat32", True), ("high", True), ("TF32_TF32_F32", True),
    ("highest", False), ("float32", False), ("F32_F32_F32", False),
    ("BF16_BF16_F32_X3", False), ("TF32_TF32_F32_X3", False),
])
def test_jax_precision_settings(setting, allowed):
    assert tf32.jax_precision_allows_tf32(setting) is allowed


def test_jax_default_on_an_ampere_gpu_is_tf32():
    """JAX never set effective tf32; its default precision is TF32 on sm_80+."""
    allowed = tf32.jax_precision_allows_tf32(None)
    effective, detail = tf32.decide(gpu=True, capability=A100, matmul=allowed, conv=allowed,
                                    flags={"jax_default_matmul_precision": None})
    assert effective is True and detail["conv"] is True and detail["compute_capability"] == "8.0"


def test_no_tf32_before_ampere_or_on_a_cpu():
    for gpu, capability in ((True, V100), (True, (7, 5)), (False, None), (True, None)):
        effective, detail = tf32.decide(gpu=gpu, capability=capability, matmul=True, conv=True,
                                        flags={})
        assert effective is False and detail["conv"] is False, (gpu, capability)


def test_torch_defaults_differ_per_path():
    """torch's defaults: matmuls in full float32, convolutions in TF32; tf32 is the matmul path
    (the measured peak's), the detail keeps both."""
    effective, detail = tf32.decide(gpu=True, capability=(8, 0), matmul=False, conv=True,
                                    flags={"torch.backends.cudnn.allow_tf32": True})
    assert effective is False and detail["matmul"] is False and detail["conv"] is True
    assert detail["torch.backends.cudnn.allow_tf32"] is True


def test_the_environment_override_turns_tf32_off_everywhere(monkeypatch):
    monkeypatch.setenv(tf32.OVERRIDE_ENV, "0")
    effective, detail = tf32.decide(gpu=True, capability=(9, 0), matmul=True, conv=True, flags={})
    assert effective is False and detail["conv"] is False
    assert detail[tf32.OVERRIDE_ENV] == "0"


@pytest.mark.parametrize("value, expected", [
    ("8.0", (8, 0)), ("9.0", (9, 0)), ((8, 6), (8, 6)), ([7, 0], (7, 0)), (8.0, (8, 0)),
    (None, None), ("", None), ("sm", None),
])
def test_capability_forms(value, expected):
    assert tf32.capability_tuple(value) == expected


def test_numpy_never_uses_tf32():
    effective, detail = tf32.cpu_only()
    assert effective is False and detail["matmul"] is False

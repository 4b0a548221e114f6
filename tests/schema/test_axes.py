"""A cell's axes (runner/schema/axes.py): one frozen value holding every setting axis of the
catalog, in its order, typed where the host reads an axis by name."""

from __future__ import annotations

import typing

import pytest

from runner.schema.axes import Axes, AxisValue
from runner.worker import catalog


def typed_attributes() -> dict[str, AxisValue]:
    return {name: value for name, value in vars(Axes).items() if isinstance(value, AxisValue)}


def test_each_typed_axis_has_the_catalogs_type():
    attributes = typed_attributes()
    assert attributes, "Axes reads no axis by name"
    for name, attribute in attributes.items():
        assert name in catalog.setting_axes(), name
        (declared,) = typing.get_args(attribute.__orig_class__)
        assert declared == catalog.AXES[name].type, name


def test_the_axes_are_the_catalogs_in_its_order_and_nothing_else():
    axes = Axes.defaults(precision="bfloat16")
    assert tuple(axes) == catalog.setting_axes()
    assert dict(axes) == {**catalog.AXIS_DEFAULTS, "precision": "bfloat16"}
    assert axes.precision == "bfloat16" and axes.device == "auto" and axes.devices == 1
    with pytest.raises(ValueError, match=r"unknown \['colour'\]"):
        Axes({**axes, "colour": "red"})
    with pytest.raises(ValueError, match=r"missing \['device'\]"):
        Axes({k: v for k, v in axes.items() if k != "device"})


def test_the_axes_are_frozen_and_compare_as_their_values():
    axes = Axes.defaults()
    with pytest.raises(AttributeError):
        axes.device = "cpu"               # type: ignore[misc]
    with pytest.raises(TypeError):
        axes["device"] = "cpu"            # type: ignore[index]
    changed = axes.replace(device="cpu")
    assert changed.device == "cpu" and axes.device == "auto"
    assert changed == {**catalog.AXIS_DEFAULTS, "device": "cpu"} and changed != axes
    assert hash(changed) == hash(Axes.defaults(device="cpu"))
    assert {**changed}["device"] == "cpu"       # a spec and a cell's coordinates unpack it


def test_a_matrixs_cells_carry_their_axes(write_matrix):
    from runner.schema import matrix as matrix_mod
    from tests.matrices import matrix_text

    path = write_matrix(matrix_text("axes", benchmarks=[
        {"workload": "matmul", "precision": ["float32", "bfloat16"], "options": {"n": 8}}]),
        with_environments=False)
    cells = matrix_mod.load(path, "smoke").cells
    assert all(isinstance(c.axes, Axes) for c in cells)
    assert [c.axes.precision for c in cells] == ["float32", "bfloat16"]

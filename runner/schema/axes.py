"""A cell's axis values, as one frozen value: every setting axis the catalog declares
(catalog.setting_axes(): precision to scaling; task and batch_size are the cell's own fields), in
the catalog's order.

It is a read-only mapping (a cell spec, a cell's coordinates and the catalog's rules take it as
one) whose axes the host reads by name are typed attributes: `cell.axes.device` is a str to mypy,
where `cell.axes["device"]` was Any. An axis declared in the catalog is an axis here with no edit;
an attribute for it is added when the host first reads it by name (tests/schema/test_axes.py
holds each attribute's type to the catalog's declaration)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from ..worker import catalog

T = TypeVar("T")


class AxisValue(Generic[T]):
    """An axis read by name, typed (its type is the catalog's declaration of the axis)."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, axes: None, owner: type) -> AxisValue[T]: ...

    @overload
    def __get__(self, axes: Axes, owner: type) -> T: ...

    def __get__(self, axes: Axes | None, owner: type) -> AxisValue[T] | T:
        return self if axes is None else axes[self.name]


class Axes(Mapping[str, Any]):
    """Every setting axis of a cell with its value, frozen (and hashable)."""

    __slots__ = ("_values",)
    _values: dict[str, Any]

    precision = AxisValue[str]()
    jit = AxisValue[bool | str]()
    size = AxisValue[str]()
    tf32 = AxisValue[bool | None]()
    steps_per_execution = AxisValue[int]()
    data = AxisValue[str]()
    device = AxisValue[str]()
    devices = AxisValue[int]()
    scaling = AxisValue[str]()
    tier = AxisValue[str]()

    def __init__(self, values: Mapping[str, Any]) -> None:
        names = catalog.setting_axes()
        unknown = set(values) - set(names)
        missing = [name for name in names if name not in values]
        if unknown or missing:
            raise ValueError(f"not the catalog's axes: unknown {sorted(unknown)}, "
                             f"missing {missing}")
        object.__setattr__(self, "_values", {name: values[name] for name in names})

    @classmethod
    def defaults(cls, **values: Any) -> Axes:
        """Every axis at its catalog default but those given."""
        return cls({**{name: catalog.AXIS_DEFAULTS[name] for name in catalog.setting_axes()},
                    **values})

    def replace(self, **values: Any) -> Axes:
        return Axes({**self._values, **values})

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a cell's axes are frozen: replace() makes another")

    def __repr__(self) -> str:
        return f"Axes({self._values!r})"

"""What an XLA fusion computes, read from the HLO modules a JAX profile carries.

XLA on a CPU runs a dot and a convolution with their fused epilogues as one thunk named after
the library that runs it (`ynn_fusion.5`): its name says neither, so by name alone a CNN's
convolutions read as matrix products. jax.profiler writes each compiled module into the
profile's XSpace (`<host>.xplane.pb`, plane `/host:metadata`, stat "Hlo Proto"); this reads the
fusions' called computations there and names, per module and fusion, the first of KINDS it
holds (seen on this project's VM, jax 0.10.2: `ynn_fusion` thunks holding a dot, a convolution
or a reduction). The reducer then counts `ynn_fusion.5` as `ynn_fusion.5 (convolution)`, and the
category rules read that; a fusion holding none of them keeps its name (elementwise).

Standard library only: a protobuf wire-format walk over the few fields needed (XSpace.planes 1,
XPlane.name 2 / event_metadata 4 / stat_metadata 5, XEventMetadata.stats 5, XStatMetadata.name
2, XStat.metadata_id 1 / bytes_value 6; HloProto.hlo_module 1, HloModuleProto.name 1 /
computations 3, HloComputationProto.instructions 2 / id 5, HloInstructionProto.name 1 / opcode
2 / called_computation_ids 38). A profile it cannot read gives no names, never an error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

METADATA_PLANE = "/host:metadata"
HLO_STAT = "Hlo Proto"
# What a fusion is named by, the first it holds: a convolution's implicit product is still a
# convolution, a product's reduction still a product.
KINDS = ("convolution", "dot", "reduce-window", "reduce")


def _varint(data: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        byte = data[i]
        i += 1
        out |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return out, i


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of a message: an int for a varint, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = data[i:i + size], i + size
        else:
            raise ValueError(f"wire type {wire}")
        yield number, value


def _all(data: bytes, number: int) -> list[bytes]:
    return [v for n, v in fields(data) if n == number and isinstance(v, bytes)]


def _first(data: bytes, number: int) -> int | bytes | None:
    return next((v for n, v in fields(data) if n == number), None)


def _text(value: int | bytes | None) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else ""


def _packed(values: list[int | bytes]) -> list[int]:
    out: list[int] = []
    for value in values:
        if isinstance(value, int):
            out.append(value)
            continue
        i = 0
        while i < len(value):
            number, i = _varint(value, i)
            out.append(number)
    return out


def hlo_protos(xspace: bytes) -> Iterator[bytes]:
    """Every serialized HloProto of the XSpace's metadata plane."""
    for plane in _all(xspace, 1):
        if _text(_first(plane, 2)) != METADATA_PLANE:
            continue
        names = {}
        for entry in _all(plane, 5):
            key, value = _first(entry, 1), _first(entry, 2)
            if isinstance(key, int) and isinstance(value, bytes):
                names[key] = _text(_first(value, 2))
        for entry in _all(plane, 4):
            value = _first(entry, 2)
            for stat in _all(value, 5) if isinstance(value, bytes) else []:
                found, named = _first(stat, 6), _first(stat, 1)
                if isinstance(named, int) and names.get(named) == HLO_STAT \
                        and isinstance(found, bytes):
                    yield found


def module_fusions(hlo_proto: bytes) -> tuple[str, dict[str, str]]:
    """(the module's name, {fusion instruction: the first of KINDS it holds})."""
    module = _first(hlo_proto, 1)
    if not isinstance(module, bytes):
        return "", {}
    computations: dict[int, list[tuple[str, str, list[int]]]] = {}
    for computation in _all(module, 3):
        ident = _first(computation, 5)
        computations[ident if isinstance(ident, int) else -1] = [
            (_text(_first(i, 1)), _text(_first(i, 2)),
             _packed([v for n, v in fields(i) if n == 38]))
            for i in _all(computation, 2)]

    def holds(ident: int, seen: frozenset[int] = frozenset()) -> set[str]:
        found: set[str] = set()
        for _, opcode, called in computations.get(ident, []):
            if opcode in KINDS:
                found.add(opcode)
            for callee in called:
                if callee not in seen:
                    found |= holds(callee, seen | {ident})
        return found

    out = {}
    for instructions in computations.values():
        for name, opcode, called in instructions:
            if opcode == "fusion":
                kinds = set().union(*(holds(c) for c in called)) if called else set()
                kind = next((k for k in KINDS if k in kinds), None)
                if kind:
                    out[name] = kind
    return _text(_first(module, 1)), out


def fusion_kinds(path: Path) -> dict[tuple[str, str], str]:
    """(module, fusion) → what it computes, from a profile's XSpace file; empty when the file
    holds no HLO or cannot be read. A name two modules give different contents is left out."""
    try:
        data = path.read_bytes()
        out: dict[tuple[str, str], str] = {}
        clash: set[tuple[str, str]] = set()
        for proto in hlo_protos(data):
            module, fusions = module_fusions(proto)
            for name, kind in fusions.items():
                key = (module, name)
                if out.get(key, kind) != kind:
                    clash.add(key)
                out[key] = kind
        return {key: kind for key, kind in out.items() if key not in clash}
    except (OSError, ValueError, IndexError, RecursionError):
        return {}

"""What an XLA fusion computes, read from the HLO a JAX profile carries (profiling/hlo.py; issue
59 item 5): XLA's CPU thunks are named after their library (`ynn_fusion.5`), so a CNN's
convolutions read as gemm by name. An XSpace is built here with the protobuf fields the reader
walks (tested against jax 0.10.2's own profile in tests/run/test_profiles_e2e.py)."""

from __future__ import annotations

from runner.worker.profiling import hlo


def varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def field(number: int, value: int | bytes | str) -> bytes:
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def instruction(name: str, opcode: str, calls: tuple[int, ...] = ()) -> bytes:
    packed = b"".join(varint(c) for c in calls)
    return field(1, name) + field(2, opcode) + (field(38, packed) if calls else b"")


def computation(ident: int, name: str, *instructions: bytes) -> bytes:
    return field(1, name) + b"".join(field(2, i) for i in instructions) + field(5, ident)


def xspace(module_name: str, *computations: bytes) -> bytes:
    module = field(1, module_name) + b"".join(field(3, c) for c in computations)
    hlo_proto = field(1, module)
    stat_names = field(5, field(1, 7) + field(2, field(1, 7) + field(2, "Hlo Proto")))
    stat = field(1, 7) + field(6, hlo_proto)
    metadata = field(4, field(1, 1) + field(2, field(1, 1) + field(2, module_name)
                                               + field(5, stat)))
    plane = field(2, "/host:metadata") + stat_names + metadata
    return field(1, field(2, "/host:CPU")) + field(1, plane)


def test_each_fusion_is_named_by_what_it_holds(tmp_path):
    path = tmp_path / "vm.xplane.pb"
    path.write_bytes(xspace(
        "jit_train_step",
        computation(5, "fused_computation", instruction("reduce_sum.0", "reduce", (2,))),
        computation(6, "fused_computation.1", instruction("dot_general.0", "dot")),
        computation(7, "fused_computation.2", instruction("conv.0", "convolution"),
                    instruction("add.0", "add")),
        computation(8, "fused_computation.3", instruction("add.1", "add")),
        computation(4, "main", instruction("ynn_fusion", "fusion", (5,)),
                    instruction("ynn_fusion.1", "fusion", (6,)),
                    instruction("ynn_fusion.2", "fusion", (7,)),
                    instruction("add_fusion", "fusion", (8,)),
                    instruction("convolution", "convolution"))))
    assert hlo.fusion_kinds(path) == {("jit_train_step", "ynn_fusion"): "reduce",
                                      ("jit_train_step", "ynn_fusion.1"): "dot",
                                      ("jit_train_step", "ynn_fusion.2"): "convolution"}


def test_a_profile_it_cannot_read_names_nothing(tmp_path):
    path = tmp_path / "vm.xplane.pb"
    path.write_bytes(b"\xff\xff\xff")
    assert hlo.fusion_kinds(path) == {}
    assert hlo.fusion_kinds(tmp_path / "missing.xplane.pb") == {}

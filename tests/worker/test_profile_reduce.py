"""The reducer of per-op profiles (runner/worker/profiling/reduce.py) and the trace bound of the
profiled pass, on traces shaped as each profiler writes them: torch's (cpu_op events on the
host, kernel events on a GPU, ProfilerStep markers), XLA's (hlo_op thunks on the host; a GPU
plane whose kernels are on `Stream` lines and repeated on `XLA Ops`), TensorFlow's (kernels as
`name:Type`, converted with tf_op/op_type)."""

from __future__ import annotations

import gzip
import json

import pytest

from runner.worker.profiling import reduce
from runner.worker.profiling.profiled import bounded_trace


def x(name, ts, dur, pid=1, tid=1, cat=None, **args):
    event = {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}
    if cat:
        event["cat"] = cat
    return event


def meta(pid, name, tid=None):
    event = {"ph": "M", "pid": pid, "name": "thread_name" if tid else "process_name",
             "args": {"name": name}}
    if tid:
        event["tid"] = tid
    return event


def torch_cpu_trace(first_step_us=1000.0):
    """Three steps; aten::linear holds aten::addmm (nested: self times must not double)."""
    events = []
    start = 0.0
    for k, step in enumerate([first_step_us, 100.0, 100.0], 1):
        events.append(x(f"ProfilerStep#{k}", start, step, cat="user_annotation"))
        events.append(x("aten::linear", start + 10, 60, cat="cpu_op"))
        events.append(x("aten::addmm", start + 15, 50, cat="cpu_op"))
        events.append(x("aten::relu", start + 75, 10, cat="cpu_op"))
        start += step + 5
    return events


def test_host_ops_count_self_time_nesting_counted_once():
    table = reduce.reduce_trace(torch_cpu_trace(), source="torch.profiler")
    rows = {r["name"]: r for r in table["rows"]}
    assert table["device"] == "cpu" and table["steps"] == 3
    assert rows["aten::linear"]["us_per_step"] == pytest.approx(10)     # 60 less its addmm
    assert rows["aten::addmm"]["us_per_step"] == pytest.approx(50)
    assert rows["aten::addmm"]["category"] == "gemm"
    assert rows["aten::relu"]["category"] == "elementwise"
    assert table["launches_per_step"] == 2                     # top-level ops: linear, relu
    assert table["device_busy_us"] == pytest.approx(70)        # 60 + 10, the union
    assert table["categories"] == {"gemm": pytest.approx(60), "elementwise": pytest.approx(10)}


def test_a_slow_first_step_does_not_make_the_table():
    """The profiler's first traced step can carry its own start-up: figures are medians."""
    table = reduce.reduce_trace(torch_cpu_trace(first_step_us=100_000), source="torch.profiler")
    assert table["step_ms"] == pytest.approx(0.1)
    assert table["device_idle_pct"] == pytest.approx(30)


def test_gpu_kernels_are_the_ops_when_there_are_any():
    events = [x("ProfilerStep#1", 0, 1000, cat="user_annotation"),
              x("aten::mm", 10, 30, cat="cpu_op"),
              x("cudaLaunchKernel", 15, 5, cat="cuda_runtime"),
              x("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 100, 400, pid=0,
                tid=7, cat="kernel"),
              x("Memcpy DtoH (Device -> Pageable)", 600, 50, pid=0, tid=7, cat="gpu_memcpy")]
    table = reduce.reduce_trace(events, source="torch.profiler")
    assert table["device"] == "gpu"
    assert [r["category"] for r in table["rows"]] == ["gemm", "memcpy"]
    assert table["launches_per_step"] == 2
    assert table["device_busy_us"] == pytest.approx(450)
    assert table["device_idle_pct"] == pytest.approx(55)
    assert table["time_basis"] == "kernel time"


def test_xla_gpu_kernels_are_read_once_from_the_stream_lines_by_their_kernel_name():
    """A GPU kernel's `hlo_op` names what launched it: cuBLAS's product is `custom-call.1` and
    a CUDA graph's kernels all carry `command_buffer_54`, which read 100 % and 95 % "other" on
    an H200 (2026-11-28); the kernel's own name says what it computes."""
    events = [meta(2, "/device:GPU:0"), meta(2, "Stream #14(Compute)", tid=1),
              meta(2, "XLA Ops", tid=2), meta(2, "XLA Modules", tid=3),
              meta(1, "/host:CPU"), meta(1, "python", tid=1),
              x(reduce.STEP_NAME, 0, 1000, pid=1, tid=1, step_num="0"),
              x("jit_step", 50, 800, pid=2, tid=3),
              x("custom-call.1", 60, 300, pid=2, tid=2, hlo_op="custom-call.1"),
              x("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", 60, 300, pid=2, tid=1,
                hlo_op="custom-call.1"),
              x("loop_add_fusion", 400, 100, pid=2, tid=1, hlo_op="command_buffer_54"),
              x("gemm_fusion_dot_148", 520, 50, pid=2, tid=1, hlo_op="command_buffer_54")]
    table = reduce.reduce_trace(events, source="jax.profiler")
    rows = {r["name"]: (r["us_per_step"], r["category"]) for r in table["rows"]}
    assert rows == {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT": (300, "gemm"),
                    "loop_add_fusion": (100, "elementwise"), "gemm_fusion_dot_148": (50, "gemm")}
    assert table["launches_per_step"] == 3 and table["device"] == "gpu"


def test_xla_and_tensorflow_host_ops_by_their_op():
    events = [meta(1, "/host:CPU"),
              x(reduce.STEP_NAME, 0, 500, step_num="0"),
              x("ynn_fusion", 10, 200, tid=2, hlo_op="ynn_fusion", hlo_module="jit_f"),
              x("ThreadpoolListener::Record", 20, 0, tid=2),
              x("matmul:_MklMatMul", 250, 100, tid=3, tf_op="matmul:_MklMatMul",
                op_type="_MklMatMul"),
              x("EagerExecute", 240, 150, tid=1)]
    table = reduce.reduce_trace(events, source="tf.profiler",
                                fusions={("jit_f", "ynn_fusion"): "dot"})
    assert {r["name"] for r in table["rows"]} == {"ynn_fusion (dot)", "_MklMatMul"}
    assert table["categories"] == {"gemm": pytest.approx(300)}


def test_ops_on_several_threads_at_once_add_up_to_the_busy_time():
    """Issue 59 item 5: XLA runs thunks on several threads at once; their self times summed
    read 122–130 % of the step for JAX. Two 200 µs ops at once on two threads in a 300 µs step
    (busy 200 µs, the union): each counts its share of the busy time, 100 µs, not 200."""
    events = [meta(1, "/host:CPU"),
              x(reduce.STEP_NAME, 0, 300, step_num="0"),
              x("ynn_fusion", 10, 200, tid=2, hlo_op="ynn_fusion", hlo_module="jit_f"),
              x("wrapped_tanh", 10, 200, tid=3, hlo_op="wrapped_tanh", hlo_module="jit_f")]
    table = reduce.reduce_trace(events, source="jax.profiler")
    assert table["device_busy_us"] == pytest.approx(200)
    assert sum(table["categories"].values()) == pytest.approx(200)       # ≤ the step, 300
    assert {r["name"]: r["us_per_step"] for r in table["rows"]} == {
        "ynn_fusion": pytest.approx(100), "wrapped_tanh": pytest.approx(100)}
    assert table["threads_overlap"] == pytest.approx(2.0)
    one_thread = reduce.reduce_trace(torch_cpu_trace(), source="torch.profiler")
    assert one_thread["threads_overlap"] == 1.0                          # nothing scaled


def test_ops_outside_every_step_are_left_out_and_no_marker_means_one_step():
    events = [x("ProfilerStep#1", 100, 100, cat="user_annotation"),
              x("aten::mm", 10, 20, cat="cpu_op"),            # before the step
              x("aten::mm", 120, 20, cat="cpu_op")]
    assert reduce.reduce_trace(events, source="t")["rows"][0]["count_per_step"] == 1
    unmarked = reduce.reduce_trace([x("aten::mm", 0, 20, cat="cpu_op")], source="t")
    assert unmarked["steps"] == 1 and unmarked["rows"][0]["us_per_step"] == 20


def test_a_trace_over_its_bound_is_cut_to_whole_steps_and_says_so():
    events = torch_cpu_trace()
    events += [x("aten::add", 300 + i, 1, cat="cpu_op", pad="p" * 200) for i in range(50)]
    trace = {"traceEvents": events}
    whole, kept, note = bounded_trace(trace, max_mb=1.0)
    assert note is None and kept == 3
    assert json.loads(gzip.decompress(whole)) == trace
    size = len(json.dumps(trace))
    cut, kept, note = bounded_trace(trace, max_mb=(size - 100) / 2**20)
    assert kept == 2 and "cut to its first 2 of 3 steps" in note
    steps = [e for e in json.loads(gzip.decompress(cut))["traceEvents"]
             if str(e["name"]).startswith("ProfilerStep")]
    assert len(steps) == 2
    none, kept, note = bounded_trace(trace, max_mb=100 / 2**20)
    assert none is None and kept == 0 and "no trace kept" in note

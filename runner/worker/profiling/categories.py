"""What an op is, from its name: one category per op, the same rules for GPU kernels (cuBLAS,
CUTLASS, cuDNN, Triton, XLA) and CPU host ops (torch's aten::, XLA's HLO ops, TensorFlow op
types, NumPy functions), and a short name without template arguments, argument lists and
numeric suffixes. Each rule is tested on real names (tests/worker/test_profile_categories.py).

XLA's CPU thunks named after their library (`ynn_fusion.5`) hold a dot, a convolution or a
reduction: their name says none, so the profiled pass names what the profile's HLO says they
hold (`ynn_fusion.5 (convolution)`, profiling/hlo.py) and these rules read that; a bare
`ynn_fusion` is a fusion like any other (elementwise), never a product by its name alone (a
CNN's convolutions read as gemm that way).
"""

from __future__ import annotations

import re

CATEGORIES = ("gemm", "conv", "attention", "norm", "elementwise", "reduction", "memcpy",
              "collective", "other")

# Asked in this order: the first rule whose pattern is found in the lower-cased name wins (an
# attention kernel built on gemm tiles is attention; a conv's implicit gemm is conv).
RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((category, re.compile(pattern)) for
                                                      category, pattern in (
    ("collective", r"nccl|all[-_]?reduce|all[-_]?gather|reduce[-_]?scatter|all[-_]?to[-_]?all|collective"
                   r"|broadcast_coalesced|c10d::|psum|ppermute"),
    ("memcpy", r"memcpy|memset|^transpose$|copy_?d2d|copy_?h2d|copy_?d2h|dtoh|htod|dtod|aten::copy_|"
               r"aten::_to_copy|aten::to\b|^copy[._]|^copy$|^identity$|^cast$|transfer"),
    ("attention", r"flash|fmha|attention|sdpa|_efficient_attention|mha_|softmax.*dot|"
                  r"dot_product"),
    ("conv", r"conv(?!ert)|cudnn.*fprop|fprop|dgrad|wgrad|implicit_?gemm|winograd|im2col|col2im|"
             r"_mklconv|depthwise|flip_filter|nhwctonchw|nchwtonhwc|cudnn.*converttensor"),
    ("norm", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|"
             r"fusedbatchnorm|welford|normali[sz]"),
    ("gemm", r"gemm|sgemm|hgemm|xmma|cutlass|cublas|matmul|\bmm\b|aten::mm|aten::addmm|"
             r"aten::bmm|aten::baddbmm|aten::linear|^dot[._]|^dot$|dot_general|einsum|"
             r"batchmatmul|_mklmatmul|tensorop|wgmma|\bdot\b|gemv|^nvjet_"),
    ("reduction", r"reduce|reduction|triton_red|triton_per|\bsum\b|aten::sum|aten::mean|"
                  r"aten::max|aten::min|argmax|argmin|softmax|log_softmax|cross_entropy|"
                  r"nll_loss|\bmean\b|\bmax\b|\bmin\b|^sum$|^mean$|^max$|^prod$|cumsum|"
                  r"_reduce_|scan|pool"),
    ("elementwise", r"elementwise|catarray|multi_tensor_apply|triton_poi|vectorized|unrolled|pointwise|fusion|loop_|"
                    r"aten::(add|sub|mul|div|tanh|relu|gelu|silu|sigmoid|exp|log|neg|pow|"
                    r"sqrt|rsqrt|where|fill_|zero_|clamp|abs|erf|threshold|dropout|"
                    r"native_dropout|elu|selu|leaky_relu|hardtanh|add_|mul_|div_|sub_|"
                    r"clamp_min|clamp_max|sqrt_|addcmul_|addcdiv_|lerp_)(_backward)?\b|"
                    r"^(add|addv2|sub|mul|div|realdiv|tanh|relu|gelu|sigmoid|exp|log|neg|"
                    r"pow|sqrt|rsqrt|select|selectv2|maximum|minimum|square|biasadd|"
                    r"biasaddgrad|relugrad|tanhgrad|erf|elu|selu|softplus|cast|"
                    r"broadcast|multiply|subtract|divide|negate|exponential|tanh|"
                    r"logistic|compare|convert)$|numpy\.(add|multiply|subtract|exp|tanh|"
                    r"maximum|where)|ufunc"),
))


def category(name: str) -> str:
    """The category of an op or kernel named `name` (its full name, or its short name; XLA's
    GPU kernel `wrapped_compare` is its one HLO op, `compare`, wrapped in a fusion)."""
    lowered = name.lower()
    short = short_name(name).lower().removeprefix("wrapped_")
    for found, pattern in RULES:
        if pattern.search(lowered) or pattern.search(short):
            return found
    return "other"


_TEMPLATE = re.compile(r"<[^<>]*>")
_ARGUMENTS = re.compile(r"\([^()]*\)")


def short_name(name: str) -> str:
    """`name` without `void `, template arguments, argument lists and numeric suffixes:
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_…>(Params)" → "cutlass::Kernel2",
    "fusion.123" → "fusion", "triton_poi_fused_add_0" → "triton_poi_fused_add",
    "matmul:_MklMatMul" → "_MklMatMul" (a TensorFlow op: its type)."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    previous = None
    while previous != text:                  # nested templates and argument lists, inside out
        previous = text
        text = _TEMPLATE.sub("", text)
        text = _ARGUMENTS.sub("", text)
    text = text.strip()
    tf_op = re.fullmatch(r"[^:\s]+:([A-Z_][A-Za-z0-9_]*)", text)
    if tf_op:
        text = tf_op.group(1)
    text = re.sub(r"(\.\d+)+$", "", text)              # fusion.123, dot.3.1
    text = re.sub(r"_\d+$", "", text)                  # triton_poi_fused_add_0
    text = re.sub(r"#\d+$", "", text)                  # ProfilerStep#3
    return text or name

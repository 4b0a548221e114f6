"""Time to first token and per-token decode latency of the generate cells (keras-hub's and the hf
api's), from what their workers recorded in `extra` (runner/worker/apis/first_token.py): the times
of generate calls that make one new token (`prefill_ms`), and N, the tokens each timed call makes
per sequence (`generated_tokens`). As optimum-benchmark: the time to first token is the
one-new-token call; the decode latency per token is (T(N) − T(1)) / (N − 1), T the median call
times of a repeat. Each repeat (a process) gives one value; a cell's figure is their median, as
its median ms.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..formatting import fmt, md_text


def _samples(value: Any) -> list[float]:
    """The finite positive numbers of a recorded list (a hostile or older record: none)."""
    if not isinstance(value, list):
        return []
    return [float(v) for v in value if isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v > 0]


def repeat_first_token(record: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(time to first token ms, decode ms per token) of one repeat, or None each where it did
    not record them."""
    extra = record.get("extra") or {}
    prefill = _samples(extra.get("prefill_ms"))
    if not prefill:
        return None, None
    ttft = statistics.median(prefill)
    tokens = extra.get("generated_tokens")
    median = record.get("median_ms")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 2 or \
            not isinstance(median, (int, float)):
        return ttft, None
    return ttft, (float(median) - ttft) / (tokens - 1)


def first_token_figures(ok: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """ttft_ms, decode_ms_per_token and tokens_per_s of a cell: medians over its ok repeats
    (None where no repeat recorded them: a workload other than generate, or a run made before
    they were)."""
    pairs = [repeat_first_token(r) for r in ok]
    ttft = [t for t, _ in pairs if t is not None]
    decode = [d for _, d in pairs if d is not None]
    rates = [v for r in ok for v in _samples([(r.get("extra") or {}).get("tokens_per_s")])]
    return {"ttft_ms": statistics.median(ttft) if ttft else None,
            "decode_ms_per_token": statistics.median(decode) if decode else None,
            "tokens_per_s": statistics.median(rates) if rates else None}


def markdown_lines(summaries: Sequence[Mapping[str, Any]], keras_view: Any = None) -> list[str]:
    """report.md's "Generate: time to first token" section: one line per generate cell that
    recorded it, environments titled as in the Keras table where it has them."""
    cells = [s for s in summaries if s["status"] == "ok" and s.get("ttft_ms") is not None]
    if not cells:
        return []
    titles = keras_titles(keras_view)
    out = ["## Generate: time to first token", "",
           "| Workload (task) | Batch size | Environment | ms per call | Time to first token "
           "ms | Decode ms per token | Tokens/s |", "|---|---:|---|---:|---:|---:|---:|"]
    for s in cells:
        env = titles.get((s["cell_id"]), s["environment"])
        out.append(f"| {md_text(s['label'])} | {s['batch_size']} | {md_text(env)} | "
                   f"{fmt(s.get('median_ms'))} | "
                   f"{fmt(s.get('ttft_ms'))} | {fmt(s.get('decode_ms_per_token'))} | "
                   f"{fmt(s.get('tokens_per_s'))} |")
    return out + ["", "Time to first token: a generate call from the same prompts that makes one "
                  "new token per sequence (its prefill and one decoding step), timed after the "
                  "cell's timed calls; decode ms per token: (ms per call − time to first token) ÷ "
                  "(N − 1), N the tokens a timed call makes per sequence (optimum-benchmark's "
                  "method); medians over repeats. keras-hub pads every prompt to max_length "
                  "before its prefill, so its first token costs a prefill over the whole "
                  "sequence; Hugging Face's prefill covers the prompts only.", ""]


def keras_titles(view: Any) -> dict[str, str]:
    """cell id → its Keras table column title (HF PyTorch (compiled), Keras 3 (JAX), ...)."""
    if not view:
        return {}
    rows, _, titles = view
    return {s["cell_id"]: titles.get(s["environment"], s["environment"]) for s in rows}

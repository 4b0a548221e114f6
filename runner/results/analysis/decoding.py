"""Time to first token and per-token decode latency of the generate cells (keras-hub's and the hf
api's), from what their workers recorded in `extra` (runner/worker/apis/first_token.py): the times
of generate calls that make one new token (`prefill_ms`), and N, the tokens each timed call makes
per sequence (`generated_tokens`). As optimum-benchmark: the time to first token is the
one-new-token call; the decode latency per token is (T(N) − T(1)) / (N − 1), T(1) a call over
the same prefill as T(N): keras-hub's one-new-token call over the timed call's own buffer
(`decode_base_ms`: its first-token call prefills a shorter buffer, and against it the latency
carried the difference of the two prefills), Hugging Face's time to first token. A cell's
figures come from the estimator of its time (the geometric mean of the repeat medians), and the
work one call did (first_token.WORK_KEYS in `effective`) is carried for the row check
(answers.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ...worker.apis.first_token import WORK_KEYS
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
    return ttft, (float(median) - decode_base(record, ttft)) / (tokens - 1)


def decode_base(record: Mapping[str, Any], ttft: float) -> float:
    """A repeat's T(1) for its decode latency: the median of its one-new-token calls over the
    timed call's buffer where it recorded them (keras-hub), else its time to first token."""
    same = _samples((record.get("extra") or {}).get("decode_base_ms"))
    return statistics.median(same) if same else ttft


def generate_work(ok: Sequence[Mapping[str, Any]]) -> dict[str, int] | None:
    """What one generate call of the cell did (first_token.WORK_KEYS of its records'
    `effective`: prompt positions, new tokens per sequence, the generation loop's iterations,
    the positions its prefill covers), from its first ok repeat that recorded them; None for
    other cells and older records."""
    for record in ok:
        effective = record.get("effective") or {}
        work = {k: v for k in WORK_KEYS if isinstance(v := effective.get(k), int)
                and not isinstance(v, bool)}
        if work:
            return work
    return None


def _geomean(values: Sequence[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else None


def first_token_figures(ok: Sequence[Mapping[str, Any]],
                        call_ms: float | None) -> dict[str, float | None]:
    """ttft_ms, decode_ms_per_token and tokens_per_s of a cell, from the estimator of its time
    (`call_ms`, the geometric mean of its repeat medians: summaries.TIME_KEY), so no figure a
    reader sets beside another comes from another: the time to first token is the geometric
    mean of the repeats' (each a median of its one-token calls, as a repeat's median ms), the
    decode latency (call_ms − ttft) ÷ (N − 1), tokens/s the new tokens of a call ÷ call_ms.
    None where no repeat recorded them (a workload other than generate, an older run)."""
    firsts = [(r, t) for r in ok if (t := repeat_first_token(r)[0]) is not None]
    ttft = _geomean([t for _, t in firsts])
    base = _geomean([decode_base(r, t) for r, t in firsts])
    tokens = {(r.get("extra") or {}).get("generated_tokens") for r in ok}
    n = tokens.pop() if len(tokens) == 1 else None
    decode = None
    if base is not None and call_ms is not None and isinstance(n, int) \
            and not isinstance(n, bool) and n >= 2:
        decode = (call_ms - base) / (n - 1)
    new = [v for r in ok for v in _samples([(r.get("extra") or {}).get("new_tokens_per_call")])]
    rate = new[0] * 1000.0 / call_ms if new and call_ms else None
    first = next((call for r, _ in firsts
                  if isinstance(call := (r.get("extra") or {}).get("first_token_call"), dict)),
                 {})
    loop = first.get("loop_iterations_after_prefill")
    return {"ttft_ms": ttft, "decode_ms_per_token": decode, "tokens_per_s": rate,
            "ttft_loop_iterations": loop if isinstance(loop, int) and not isinstance(loop, bool)
            else None}


def markdown_lines(summaries: Sequence[Mapping[str, Any]],
                   titles: Mapping[str, str] | None = None) -> list[str]:
    """report.md's "Generate: time to first token" section: one line per generate cell that
    recorded it, environments titled as in the Keras table where it has them (`titles`:
    keras_titles of the Keras table)."""
    cells = [s for s in summaries if s["status"] == "ok" and s.get("ttft_ms") is not None]
    if not cells:
        return []
    titles = titles or {}
    out = ["## Generate: time to first token", "",
           "| Workload (task) | Batch size | Environment | ms per call | Time to first token "
           "ms | Decode ms per token | Tokens/s | Prompt / new tokens per sequence | Loop "
           "iterations | Prefill positions |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in cells:
        env = titles.get((s["cell_id"]), s["environment"])
        work = s.get("generate_work") or {}
        mark = " ≠" if s.get("answer_check") == "different work" else ""
        out.append(f"| {md_text(s['label'])} | {s['batch_size']} | {md_text(env)}{mark} | "
                   f"{fmt(s.get('geomean_ms'))} | {ttft_text(s)} | "
                   f"{fmt(s.get('decode_ms_per_token'))} | {fmt(s.get('tokens_per_s'))} | "
                   f"{_pair(work.get('prompt_positions'), work.get('new_tokens_per_sequence'))} | "
                   f"{work.get('decode_iterations', '–')} | {work.get('prefill_positions', '–')} |")
    return out + ["", "ms per call: the geometric mean of the repeat medians, the estimator of "
                  "every table. Time to first token: the library's generate call that makes one "
                  "new token per sequence from the same prompts (keras-hub: a buffer of the "
                  "prompt and one position, then one iteration of its sampling loop, marked "
                  "\"+1 loop iteration\"; Hugging Face: max_new_tokens = 1, its prefill alone), "
                  "timed after the cell's timed calls, the geometric mean of the repeats' "
                  "medians; decode ms per token: (ms per call − T(1)) ÷ (N − 1), N the new tokens "
                  "per sequence (optimum-benchmark's method), T(1) a one-new-token call with the "
                  "same prefill as a timed call (keras-hub: over the timed call's whole buffer, "
                  "the prompts extended to max_length − 1; Hugging Face: the time to first "
                  "token); "
                  "tokens/s: a call's new tokens ÷ ms per call. Every row's prompts have one "
                  "length and every cell makes as many tokens with a greedy sampler, so the loop "
                  "iterations are equal across a row (a cell where they are not is marked ≠, "
                  "different work). The prefill is each library's own: keras-hub seeds its cache "
                  "with one forward over its whole buffer (max_length positions) whatever the "
                  "prompts' length; Hugging Face's covers the prompts.", ""]


def ttft_text(summary: Mapping[str, Any]) -> str:
    """The time to first token, with the loop iterations it holds after its prefill named."""
    loops = summary.get("ttft_loop_iterations")
    text = fmt(summary.get("ttft_ms"))
    return f"{text} (+{loops} loop iteration{'s' if loops > 1 else ''})" \
        if isinstance(loops, int) and loops > 0 and summary.get("ttft_ms") is not None else text


def _pair(a: Any, b: Any) -> str:
    return "–" if a is None or b is None else f"{a} / {b}"


def keras_titles(view: Any) -> dict[str, str]:
    """cell id → its Keras table column title (HF PyTorch (compiled), Keras 3 (JAX), ...)."""
    if not view:
        return {}
    rows, _, titles = view
    return {s["cell_id"]: titles.get(s["environment"], s["environment"]) for s in rows}

"""Time to first token and per-token decode latency of a generate workload (keras-hub's Gemma and
Mistral, and the hf api's), measured as optimum-benchmark measures them: the prefill is a generate
call that makes one new token per sequence, from the same inputs as the timed calls; the decode
latency per token is then (T(N tokens) − T(1 token)) / (N − 1), T being median call times, the
two calls over the same prefill: Hugging Face's one-token call prefills the prompts as the
timed call does, but keras-hub's prefills its whole buffer (a buffer of prompt + 1 for the first
token, max_length positions for a timed call), so its decode latency is taken against a
one-new-token call over the timed call's own buffer (the prompts extended to max_length − 1:
`decode_base_ms`); against its time to first token it carried the difference of the two
prefills (+7.6 % on the small Gemma at batch 8).

Both sides do the same work per call (`generate_work`, recorded in `effective` and checked
equal across a row by the host, runner/results/analysis/answers.py): the same prompts, cut to the
shortest prompt's length so that no row starts its loop before another (`equal_prompts`), the
same number of new tokens per sequence, the same greedy sampler. The generation loop's iterations
(one new token per sequence each) are then equal on both sides. The prefill is each library's
own: keras-hub seeds its cache with one forward over its whole buffer (max_length positions) and
then recomputes the last prompt position in its loop's first iteration; Hugging Face's prefill
runs over the prompt and gives the first token. Those positions are recorded too
(`prefill_positions`), not equalised: no keras-hub call prefills the prompt alone.

The time to first token is the same quantity on both sides: the library's generate call that
makes one new token per sequence from the same prompts (keras-hub: a buffer of prompt + 1
positions, one loop iteration; Hugging Face: max_new_tokens = 1).

The worker only records raw figures, in the record's `extra` (they belong to generate rows
alone): `prefill_ms`, the one-new-token calls' times, and `generated_tokens`, N. The host turns
them into `ttft_ms` and `decode_ms_per_token` (runner/results/summaries.py), as it turns samples
into medians. The calls run after the timed window (never part of it), one untimed first.
Standard library only.
"""

from __future__ import annotations

import gc
import time
from typing import Any
from collections.abc import Callable

MIN_CALLS, MAX_CALLS = 3, 10
# The keys of `effective` that say what work one generate call did; the host checks the first
# three equal across a row (runner/results/analysis/answers.py GENERATE_WORK_CHECKED).
WORK_KEYS = ("prompt_positions", "new_tokens_per_sequence", "decode_iterations",
             "prefill_positions")


def equal_prompts(lengths: list[int]) -> int:
    """The prompt length every row is cut to: the shortest prompt's. keras-hub's sampler starts
    at the shortest prompt (its rows with longer prompts keep their own tokens for a while) and
    Hugging Face's after the longest (left padding): with rows of one length both start at the
    same position and make the same number of new tokens."""
    return min(lengths)


def generate_work(prompt_positions: int, max_length: int, prefill_positions: int) -> dict[str, int]:
    """What one generate call does, per sequence: prompt positions, new tokens (max_length −
    prompt), the generation loop's iterations (one new token each) and the positions its
    prefill forward covers."""
    new = max_length - prompt_positions
    return {"prompt_positions": prompt_positions, "new_tokens_per_sequence": new,
            "decode_iterations": new, "prefill_positions": prefill_positions}


def prefill_facts(one_token_call: Callable[[], Any], timed_calls: int,
                  generated_tokens: int) -> dict[str, Any]:
    """{"prefill_ms": [...], "generated_tokens": N}: `one_token_call()` (a generate call making
    one new token per sequence, its tokens copied to the host) timed (call_times)."""
    return {"prefill_ms": call_times(one_token_call, timed_calls),
            "generated_tokens": int(generated_tokens)}


def call_times(call: Callable[[], Any], timed_calls: int) -> list[float]:
    """`call()` timed, ms, as many times as the timed window had calls (between MIN_CALLS and
    MAX_CALLS), after one untimed call (a compiler may meet a new length there), with Python's
    collector off as in the timed window."""
    call()
    calls = min(MAX_CALLS, max(MIN_CALLS, timed_calls))
    was_enabled = gc.isenabled()
    gc.disable()
    samples = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            call()
            samples.append((time.perf_counter() - started) * 1000.0)
    finally:
        if was_enabled:
            gc.enable()
    return samples

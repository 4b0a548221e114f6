"""Time to first token and per-token decode latency of a generate workload (keras-hub's Gemma and
Mistral, and the hf api's), measured as optimum-benchmark measures them: the prefill is a generate
call that makes one new token per sequence, from the same inputs as the timed calls; the decode
latency per token is then (T(N tokens) − T(1 token)) / (N − 1), T being median call times.

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


def prefill_facts(one_token_call: Callable[[], Any], timed_calls: int,
                  generated_tokens: int) -> dict[str, Any]:
    """{"prefill_ms": [...], "generated_tokens": N}: `one_token_call()` (a generate call making
    one new token per sequence, its tokens copied to the host) timed as many times as the timed
    window had calls (between MIN_CALLS and MAX_CALLS), after one untimed call (a compiler may
    meet the new length there), with Python's collector off as in the timed window."""
    one_token_call()
    calls = min(MAX_CALLS, max(MIN_CALLS, timed_calls))
    was_enabled = gc.isenabled()
    gc.disable()
    samples = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            one_token_call()
            samples.append((time.perf_counter() - started) * 1000.0)
    finally:
        if was_enabled:
            gc.enable()
    return {"prefill_ms": samples, "generated_tokens": int(generated_tokens)}

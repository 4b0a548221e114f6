"""Figures of one record that the host derives from its raw values (the worker records samples
and marks, never summaries):

- **measured epoch** (`epoch_measured_s`): a training loop's time per epoch as a user feels it,
  the timed window's whole epochs with their epoch-end work (iterators, reshuffles, callbacks):
  the samples from the first one that holds an epoch boundary up to the last such one, divided
  by the epochs they span. The worker's `epoch_s` is an estimate beside it (the median step ×
  steps per epoch: the steady-state step, without the epoch's own work). None with fewer than
  two boundaries in the window (no whole epoch);
- **the study's Stable Diffusion step** (`study_step_ms`): predict timed as the Keras 3 benchmark
  study timed it, (T(N+2 steps) − T(2 steps)) / N, without the text encoders and the VAE decode:
  the median of a repeat's rounds (the worker's extra.study_step_ms). The published figures are
  compared with it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any


def measured_epoch_s(record: Mapping[str, Any]) -> float | None:
    """Seconds per epoch over the whole epochs of a repeat's timed window, boundaries included."""
    marks = sorted(record.get("epoch_boundary_samples") or [])
    per_epoch = (record.get("extra") or {}).get("calls_per_epoch")
    samples = record.get("samples_ms") or []
    if len(marks) < 2 or not per_epoch or marks[-1] > len(samples):
        return None
    per_sample = record.get("calls_per_sample") or 1
    span = samples[marks[0]:marks[-1]]
    seconds = sum(span) * per_sample * (record.get("steps_per_call") or 1) / 1000.0
    return seconds / (len(span) * per_sample / per_epoch)


def study_step_ms(record: Mapping[str, Any]) -> float | None:
    """The study's time per denoising step of a Stable Diffusion predict repeat (ms), or None."""
    rounds = (record.get("extra") or {}).get("study_step_ms")
    return statistics.median(rounds) if rounds else None

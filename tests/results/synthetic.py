"""Synthetic cell summaries for the results tests (imported by name: pytest puts this folder on
sys.path)."""

from __future__ import annotations

from runner.results.analysis import summaries as summarize


def summary_of(env: str, medians: list[float], workload: str = "elementwise", api: str = "jax",
               **axes) -> dict:
    """A cell summary as cell_summaries makes it, with given repeat medians."""
    backend, batch = axes.pop("backend", None), axes.pop("batch_size", 1)
    records = [{"cell_id": f"{env}-{workload}-{batch}-{sorted(axes.items())}", "cell_name": "c",
                "environment": env, "api": api, "backend": backend,
                "image": env, "workload": workload, "task": "run", "batch_size": batch,
                "items_per_step": batch,
                **{k: axes.get(k, v) for k, v in summarize.AXIS_DEFAULTS.items()},
                "options": axes.get("options", {"n": 1024}), "repeat": i + 1, "status": "ok",
                "samples_ms": [m] * 5, "metadata": {}, "extra": {}, "effective": {}}
               for i, m in enumerate(medians)]
    (out,) = summarize.cell_summaries(records)
    return out

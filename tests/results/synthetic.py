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


# A data-parallel run (docs/scaling.md): the CNN trained with strong scaling (global batch 128)
# at 1, 2 and 4 devices in two environments, 3 repeats a cell, each repeat's steps at a fixed
# median. keras-jax scales at 0.9 of linear (4 devices: 0.8); torch at 0.95, but its 4-device
# cell's first-step loss is twice the 1-device one's (an all-reduce that sums), and at 8
# devices it is not applicable.
SCALING_MS = {("keras-jax", 1): 100.0, ("keras-jax", 2): 100.0 / (2 * 0.9),
              ("keras-jax", 4): 100.0 / (4 * 0.8), ("torch", 1): 80.0,
              ("torch", 2): 80.0 / (2 * 0.95), ("torch", 4): 80.0 / (4 * 0.95)}
SCALING_STRATEGIES = {"keras-jax": ("keras.distribution.DataParallel", "XLA collectives (NCCL)"),
                      "torch": ("torch.nn.parallel.DistributedDataParallel", "nccl")}


def scaling_records() -> list[dict]:
    records = []
    for (env, devices), median in [*SCALING_MS.items(), (("torch", 8), None)]:
        api, backend = ("keras", "jax") if env == "keras-jax" else ("torch", None)
        strategy, all_reduce = SCALING_STRATEGIES[env]
        for repeat in range(1, 4):
            record = {
                "cell_id": f"{env}-d{devices}", "cell_name": f"cnn-fit-{env}-b128-d{devices}",
                "environment": env, "api": api, "backend": backend, "image": "x",
                "workload": "cnn", "task": "fit", "batch_size": 128, "items_per_step": 128,
                **summarize.AXIS_DEFAULTS, "devices": devices, "scaling": "strong",
                "options": {}, "repeat": repeat, "metadata": {}, "extra": {}}
            if median is None:
                record.update(status="not_applicable", error="devices = 8, but this run has 4",
                              samples_ms=[], effective={})
                records.append(record)
                break
            wrong = env == "torch" and devices == 4
            record.update(
                status="ok", samples_ms=[median * (1 + 0.01 * (repeat - 2))] * 5,
                loss_first=4.6 if wrong else 2.3, answer={"initial_loss": 2.30},
                effective={} if devices == 1 else {"data_parallel": {
                    "strategy": strategy, "all_reduce": all_reduce, "world_size": devices,
                    "global_batch": 128, "per_device_batch": 128 // devices}})
            records.append(record)
    return records

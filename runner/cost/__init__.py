"""What a run costs and how long it takes: price tables in SkyPilot's catalog columns (prices.py,
the shipped prices.csv, skypilot.py's import), the VM a matrix's [cost] names (pricing.py),
NVML's GPU names as accelerators (gpus.py), the estimate before a run from the history
(estimate.py, history_times.py) and what a run has spent (spending.py). Nothing here reaches a
network."""

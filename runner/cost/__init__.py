"""What a run costs and how long it takes: price tables in SkyPilot's catalog columns (prices.py,
the shipped prices.csv, skypilot.py's import), the VM a matrix's [cost] names (pricing.py),
NVML's GPU names as accelerators (gpus.py), the estimate before a run from the cells that ran
before (estimate.py; runner/history/times.py reads them from the history). What a run has spent
is kept by runner/run/pace.py. Nothing here reaches a network or imports the history."""

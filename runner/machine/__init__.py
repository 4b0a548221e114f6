"""The machine a run measures on: what it has (hostinfo.py), its GPUs' state and clocks
(gpustate.py), its measured noise as its machine profile (profile.py, written by doctor
--measure: runner/studies/noise.py), its calibrated peaks (peak_cache.py), and the checks behind
whether a run can go here (checks.py, asked by doctor: runner/studies/doctor.py). Imports no
executor, no result and nothing of the run."""

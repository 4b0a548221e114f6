"""The machine a run measures on: what it has (hostinfo.py), its GPUs' state and clocks
(gpustate.py), its measured noise (noise.py, kept as its machine profile: profile.py), and
whether a run can go here (doctor.py)."""

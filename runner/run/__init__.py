"""A run, from the matrix to the reports: the pipeline's steps (pipeline.py) over its state
(state.py), the run's decisions (setup.py), the plan (plan.py, resume.py), the cells on their
lanes (cells.py, scheduling.py), the run's manifest as it grows (manifest.py), what the terminal
shows (console.py). What drives the pipeline as a whole (doctor --measure, bisect, reproduce)
sits above it, in runner/studies/."""

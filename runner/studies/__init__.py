"""Studies: commands that drive the run pipeline (runner/run/pipeline.py) as a whole, from
above it — doctor --measure (noise.py, the machine's noise; repeats.py, the repeats a side it
needs), bisect (bisect.py: a cell measured on intermediate stacks), reproduce (reproduce.py: a
finished run again, then compared) — and doctor itself (doctor.py: the path a run of a matrix
would take here, asked of the run's own setup, and the machine's checks behind it). Nothing below
this package imports it: the pipeline never calls back up into what drives it."""

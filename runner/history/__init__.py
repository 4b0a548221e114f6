"""The results database: every run's environments, stacks, cells and repeat summaries (raw
samples stay in the run folders, referenced by path and hash), the series a cell makes across
runs, change points, the trend site, and how long cells took before (times.py, for the
estimate)."""

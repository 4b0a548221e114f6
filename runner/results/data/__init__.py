"""What a run leaves: the results folder (store.py), the record a worker's result becomes
(records.py), the typed shapes (types.py) and their validation when read back (schemas.py:
records and manifests; the run lays its manifest out, runner/run/manifest.py). Imports neither
the analysis nor the renderers, nor the run."""

"""Executors: where a cell's worker runs. base.py is the one contract every executor implements
(local.py: a process; docker.py: a container; ray.py: a Ray task that runs one of those on its
node)."""

"""The distributions installed in an environment (name → version) and their digest, so two runs
compare by what actually ran, whatever built the environment (a lock, an image, an existing
interpreter). Standard library only.

`python -m runner.worker.distributions` prints them as JSON (the host's check of a lock-built
environment against its lock).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from importlib import metadata


def canonical(name: str) -> str:
    """PEP 503 normalised name: `Keras_Hub` and `keras-hub` are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


# The runner itself: on the worker's import path (PYTHONPATH) beside its metadata when installed
# in development mode, but not part of the environment under test.
RUNNER_DISTRIBUTION = "dl-bench-runner"


def installed() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"] if dist.metadata else None
        if name and canonical(name) != RUNNER_DISTRIBUTION:
            found.setdefault(canonical(name), dist.version)
    return dict(sorted(found.items()))


def digest(distributions: dict[str, str]) -> str:
    text = "\n".join(f"{name}=={version}" for name, version in sorted(distributions.items()))
    return hashlib.sha256(text.encode()).hexdigest()


if __name__ == "__main__":
    json.dump(installed(), sys.stdout)

"""The matrix a test's run reads, built in one place.

Tests that need a run (a real one, a dry run, a plan) used to write their matrix as TOML text,
each repeating the [run] table's usual settings and the standard environments' tables. Here the
run table's defaults and the standard environments live once: a test names only what its run is
about. Matrices whose exact text is what a test checks (the parser's errors, line numbers,
comments) stay written out in those tests."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import tomli_w

# What most test runs use: one repeat, one warm-up step, every cell (no smoke profile, which a
# machine without a GPU would otherwise choose).
RUN_DEFAULTS: dict[str, Any] = {"repeats": 1, "warmup_steps": 1, "profile": "full"}

# The shipped image folders as the example matrices declare them.
STANDARD_ENVIRONMENTS: dict[str, dict[str, str]] = {
    "numpy": {"image": "numpy", "api": "numpy"},
    "torch": {"image": "torch", "api": "torch"},
    "jax": {"image": "jax", "api": "jax"},
    "tensorflow": {"image": "tensorflow", "api": "tensorflow"},
    "keras-jax": {"image": "jax", "api": "keras", "backend": "jax"},
    "keras-tensorflow": {"image": "tensorflow", "api": "keras", "backend": "tensorflow"},
    "keras-torch": {"image": "torch", "api": "keras", "backend": "torch"},
    "keras2": {"image": "tf-keras", "api": "tf-keras"},
    "hf-torch": {"image": "hf-torch", "api": "hf"},
}


def environment(standard: str, **keys: Any) -> dict[str, Any]:
    """A standard environment's table with more keys (env, pins, packages, ...)."""
    return {**STANDARD_ENVIRONMENTS[standard], **keys}


def this_interpreter(api: str = "numpy", **keys: Any) -> dict[str, Any]:
    """An existing-interpreter environment on the interpreter running the tests (it has NumPy):
    nothing is built."""
    return {"python": sys.executable, "api": api, **keys}


def matrix_text(name: str | None, *,
                environments: Sequence[str] | Mapping[str, Mapping[str, Any]] = ("numpy",),
                benchmarks: Sequence[Mapping[str, Any]],
                tables: Mapping[str, Any] | None = None,
                run_defaults: bool = True,
                **run_settings: Any) -> str:
    """A matrix as TOML text.

    name: [run] name (None: the runner's default). run_settings: more [run] keys, over
    RUN_DEFAULTS; a key given as None is left out (the runner's own default applies), and
    run_defaults=False leaves all of RUN_DEFAULTS out. environments: names of
    STANDARD_ENVIRONMENTS, or name -> table (see environment() and this_interpreter()).
    tables: more top-level tables ([profiles], [cost], [history], [report], [workloads])."""
    run = {"name": name, **(RUN_DEFAULTS if run_defaults else {}), **run_settings}
    if isinstance(environments, Mapping):
        declared = {key: dict(table) for key, table in environments.items()}
    else:
        declared = {key: environment(key) for key in environments}
    document: dict[str, Any] = {"run": {key: value for key, value in run.items()
                                        if value is not None}}
    document.update(tables or {})
    if declared:
        document["environments"] = declared
    document["benchmarks"] = [dict(benchmark) for benchmark in benchmarks]
    return tomli_w.dumps(document)

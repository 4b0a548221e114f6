"""An existing interpreter as an environment (`python = "/path/to/python"` in the matrix): a VM's
preinstalled framework stack, a conda environment, a vendor container. Nothing is built; the
interpreter is checked once (it runs, it is recent enough for the worker) and then used as is.
What it holds is recorded by every worker (`distributions` in the record).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

MIN_PYTHON = (3, 10)        # the worker's own code needs 3.10
PROBE = ("import json, sys; print(json.dumps({'version': list(sys.version_info[:3]), "
         "'executable': sys.executable, 'prefix': sys.prefix}))")


class InterpreterError(Exception):
    """The interpreter cannot serve as an environment; the message is one line."""


@dataclass(frozen=True)
class Interpreter:
    python: Path
    version: str
    prefix: str


def probe(python: str, timeout: float = 120.0) -> Interpreter:
    try:
        done = subprocess.run([python, "-c", PROBE], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise InterpreterError(f"python = {python!r}: no such interpreter") from None
    except PermissionError:
        raise InterpreterError(f"python = {python!r}: not executable") from None
    except subprocess.TimeoutExpired:
        raise InterpreterError(f"python = {python!r}: did not answer in {timeout:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise InterpreterError(f"python = {python!r} exited {done.returncode}: {last}")
    try:
        facts = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InterpreterError(f"python = {python!r}: not a Python interpreter") from None
    version = tuple(facts["version"])
    if version[:2] < MIN_PYTHON:
        raise InterpreterError(f"python = {python!r} is Python {'.'.join(map(str, version))}; "
                               f"the worker needs {'.'.join(map(str, MIN_PYTHON))} or newer")
    # A relative path is made absolute here, once: the worker starts in its cell's own folder.
    found = Path(python).absolute() if os.sep in python else Path(python)
    return Interpreter(found, ".".join(map(str, version)), facts["prefix"])

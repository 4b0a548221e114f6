"""An existing interpreter as an environment (`python = "/path/to/python"` in the matrix): a VM's
preinstalled framework stack, a conda environment, a vendor container. Nothing is built; the
interpreter is checked once (it runs, it is recent enough for the worker) and then used as is.
What it holds is recorded by every worker (`distributions` in the record).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MIN_PYTHON = (3, 10)        # the worker's own code needs 3.10
OUTPUT_LIMIT = 4 * 2**20    # bytes a probe may print per stream (its answer is a few hundred)
PROBE = ("import json, sys; print(json.dumps({'version': list(sys.version_info[:3]), "
         "'executable': sys.executable, 'prefix': sys.prefix}))")


class InterpreterError(Exception):
    """The interpreter cannot serve as an environment; the message is one line."""


@dataclass(frozen=True)
class Interpreter:
    python: Path
    version: str
    prefix: str


class OutputTooLong(Exception):
    pass


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str


def run_bounded(command: list[str], timeout: float, limit: int = OUTPUT_LIMIT,
                cwd: Path | None = None, env: Mapping[str, str] | None = None) -> Finished:
    """Run a probe of an interpreter the matrix names: at most `limit` bytes read from each of
    its streams and `timeout` seconds, then it is killed (with anything it started), so a broken
    or hostile interpreter can neither hang the runner nor fill its memory; `env`: its whole
    environment (None: the host's). Raises
    subprocess.TimeoutExpired, OutputTooLong, or OSError when it cannot start."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=cwd, env=env,
                               start_new_session=True)
    assert process.stdout is not None and process.stderr is not None   # both are PIPE
    received = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    out, err = received.values()
    open_fds = list(received)
    deadline = time.monotonic() + timeout
    try:
        while open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(command, timeout)
            for fd in select.select(open_fds, [], [], left)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    open_fds.remove(fd)
                elif len(received[fd]) + len(chunk) > limit:
                    raise OutputTooLong(f"printed more than {limit} bytes")
                else:
                    received[fd] += chunk
        returncode = process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except BaseException:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        raise
    finally:
        process.stdout.close()
        process.stderr.close()
    return Finished(returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def probe(python: str, env: Mapping[str, str], timeout: float = 120.0) -> Interpreter:
    """Whether `python` can serve as an environment, asked with `env` as its whole environment:
    the one its workers get (the host's allow-listed variables, never the whole host's)."""
    try:
        done = run_bounded([python, "-c", PROBE], timeout, env=env)
    except FileNotFoundError:
        raise InterpreterError(f"python = {python!r}: no such interpreter") from None
    except PermissionError:
        raise InterpreterError(f"python = {python!r}: not executable") from None
    except OSError as exc:
        raise InterpreterError(f"python = {python!r}: cannot run it ({exc})") from None
    except subprocess.TimeoutExpired:
        raise InterpreterError(f"python = {python!r}: did not answer in {timeout:.0f} s") from None
    except OutputTooLong as exc:
        raise InterpreterError(f"python = {python!r}: {exc} when asked its version: not a "
                               "Python interpreter") from None
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

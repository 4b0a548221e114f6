"""What a lock-built environment actually holds, against what its lock pins: a venv that someone
changed by hand (pip install into it) no longer measures the locked stack, and the run says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..paths import REPO_ROOT
from ..worker.distributions import canonical
from .existing import run_bounded

# Installed by the venv itself, never pinned by a lock.
VENV_TOOLS = {"pip", "setuptools", "wheel"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


# A local build's pin (stacks.py: a wheel in the stack cache): its version is the wheel's.
WHEEL_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*@\s*file://\S*/([^/\s]+\.whl)(?:\s|$)")


def lock_pins(lock: Path) -> dict[str, str]:
    """name → version of every `name==version` line of a lock (and of every `name @
    file:///…/name-version-….whl` line: a local build)."""
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = PIN.match(line.strip())
        if found:
            pins[canonical(found.group(1))] = found.group(2)
        elif wheel := WHEEL_PIN.match(line.strip()):
            pins[canonical(wheel.group(1))] = wheel.group(2).split("-")[1]
    return pins


def list_installed(python: Path, timeout: float = 120.0) -> dict[str, str]:
    """The distributions installed for `python`, read by the worker's own module (its output
    bounded, as every probe of an environment's interpreter)."""
    done = run_bounded([str(python), "-m", "runner.worker.distributions"], timeout,
                       cwd=REPO_ROOT)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(done.stdout)


def differences(pins: dict[str, str], found: dict[str, str],
                seed: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Human-readable differences between a lock's pins and an installed set, sorted. `seed`:
    what the venv installed itself before the lock (pip, setuptools, wheel and what they need,
    packaging for one): the venv's, not the lock's, unless the lock pins them too."""
    out = []
    for name in sorted(set(pins) | set(found)):
        if name in VENV_TOOLS:
            continue
        want, have = pins.get(name), found.get(name)
        if want is None and name in seed:
            continue
        if want is None:
            out.append(f"{name} {have} installed, not in the lock")
        elif have is None:
            out.append(f"{name} missing (lock: {want})")
        elif want != have:
            out.append(f"{name} {have} (lock: {want})")
    return out

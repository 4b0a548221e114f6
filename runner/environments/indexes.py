"""Where a lock's files come from: PyPI, and the package indexes the lock itself declares (an
`--extra-index-url` line that the lock tool carried over from the .in, e.g. PyTorch's CPU index
for `torch==2.13.0+cpu`, a build PyPI does not carry: PyPI takes no local versions).

pip and uv both read those lines from the lock. Every file is pinned by its hash, so where a file
is fetched from never changes what is installed: a mirror or a wheel folder that serves the same
files works as well, and a machine that cannot reach a declared index (air-gapped, or this
project's CI) installs from what its own pip configuration names instead (`usable_lock`).
"""

from __future__ import annotations

import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

INDEX_LINE = re.compile(r"^\s*(--index-url|--extra-index-url|-i)[\s=]+(\S+)\s*$")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
PROBE_TIMEOUT_S = 5.0


def declared(lock: Path) -> list[str]:
    """The index URLs a lock names (its --index-url / --extra-index-url lines), in order."""
    return [m.group(2) for m in map(INDEX_LINE.match, lock.read_text(encoding="utf-8")
                                    .splitlines()) if m]


def local_version_pins(lock: Path) -> dict[str, str]:
    """name → version of every pin with a local version label (torch==2.13.0+cpu): builds that
    PyPI never carries, so the lock must name the index that does."""
    out = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = PIN.match(line.strip())
        if found and "+" in found.group(2):
            out[found.group(1)] = found.group(2)
    return out


def unreachable(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why this machine cannot reach an index (its name does not resolve, nothing answers),
    or None. Any answer at all — an error status, a TLS failure behind an intercepting proxy —
    counts as reachable: the installer deals with it. Honours the proxy settings (HTTPS_PROXY)."""
    request = urllib.request.Request(url, method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as exc:
        cause = exc.reason
        if isinstance(cause, socket.gaierror):
            return f"{urllib.parse.urlparse(url).hostname} does not resolve"
        if isinstance(cause, (ConnectionError, TimeoutError, socket.timeout)):
            return str(cause.strerror or cause) if isinstance(cause, OSError) else str(cause)
        return None
    except (TimeoutError, ConnectionError) as exc:
        return str(exc) or type(exc).__name__
    except OSError:
        return None
    return None


def usable_lock(lock: Path, folder: Path) -> tuple[Path, list[str]]:
    """The lock as this machine's installer should read it, and a note per index left out: the
    lock itself when every index it declares answers, else a copy (in `folder`) without the
    lines of the indexes that do not — pip then fetches those files from what this machine's
    pip configuration names (PIP_INDEX_URL, PIP_FIND_LINKS, pip.conf), checked by their hashes,
    instead of retrying an unreachable index for every package."""
    notes, dropped = [], set()
    for url in dict.fromkeys(declared(lock)):
        why = unreachable(url)
        if why:
            dropped.add(url)
            notes.append(f"{url} cannot be reached from here ({why}): its files come from this "
                         f"machine's pip configuration (a mirror or wheel folder), checked by the "
                         f"lock's hashes")
    if not dropped:
        return lock, []
    kept = [line for line in lock.read_text(encoding="utf-8").splitlines(keepends=True)
            if not ((m := INDEX_LINE.match(line)) and m.group(2) in dropped)]
    copy = folder / lock.name
    copy.write_text("".join(kept), encoding="utf-8")
    return copy, notes

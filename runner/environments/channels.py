"""Channels: a derived stack that follows a framework's nightly builds.

`channel = "nightly"` (or `date = "2026-10-27"`: that day's build, the nightly channel implied)
replaces each distribution `follow` names (default: the environment's framework under test) by
its nightly build, pinned to one exact version:
- builds published on the package index this machine uses, under a name of their own: keras →
  keras-nightly, keras-hub → keras-hub-nightly, tensorflow → tf-nightly, tf-keras →
  tf-keras-nightly. The `.in`'s requirement is replaced by the nightly's, and the release's
  name is left out of the resolution (uv's --excludes): keras-hub asks for `keras>=3.15`, which
  would otherwise install the release beside keras-nightly, both writing the `keras` module;
- builds published on an index of their own under the release's name (torch on PyTorch's
  nightly index, jax and jaxlib on JAX's): used where this machine reaches that index, else one
  clear error (this project's CI reaches neither).

A nightly's version says its day: keras-nightly 3.16.0.dev2026102704 is the build of
2026-10-27 (the first eight digits of its dev number; keras-hub-nightly's
0.33.0.dev202610250352 and tf-nightly's 2.23.0.dev20261026 read the same way). The versions are
listed by pip (`pip index versions --pre NAME`), which reads this machine's index configuration,
so a mirror applies; a day with several builds takes the highest version of that day, and a day
without one is an error naming the nearest days that have one."""

from __future__ import annotations

import datetime
import functools
import re
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..worker import catalog
from . import indexes

LIST_TIMEOUT_S = 120.0


class ChannelError(Exception):
    """A channel's build cannot be had; the message is one line."""


@dataclass(frozen=True)
class Twin:
    """Where a distribution's nightly builds are: the release's name, their name, and their own
    index (None: the package index this machine uses), per flavour where the flavours differ."""

    release: str
    name: str
    index: dict[str, str] | None = None

    def index_for(self, flavour: str) -> str | None:
        return None if self.index is None else self.index[flavour]


JAX_NIGHTLY = "https://us-python.pkg.dev/ml-oss-artifacts-published/jax/simple/"
TWINS = (
    Twin("keras", "keras-nightly"), Twin("keras-hub", "keras-hub-nightly"),
    Twin("tensorflow", "tf-nightly"), Twin("tensorflow-cpu", "tf-nightly-cpu"),
    Twin("tf-keras", "tf-keras-nightly"),
    # PyTorch's CPU builds on the CPU flavour (as images/torch's own index), CUDA 12.8 builds on
    # the GPU flavour (PyPI's torch 2.10 is one).
    Twin("torch", "torch", {"cpu": "https://download.pytorch.org/whl/nightly/cpu",
                            "cuda": "https://download.pytorch.org/whl/nightly/cu128"}),
    Twin("jax", "jax", {"cpu": JAX_NIGHTLY, "cuda": JAX_NIGHTLY}),
    Twin("jaxlib", "jaxlib", {"cpu": JAX_NIGHTLY, "cuda": JAX_NIGHTLY}),
)
NIGHTLY = {twin.release: twin for twin in TWINS}   # by the release's distribution name


@dataclass(frozen=True)
class Build:
    """One distribution of a derived stack that is not a release: a channel's dated build, or
    a local wheel or source tree. `name` is what the image folder's `.in` asked for, `build`
    the distribution installed in its place."""

    name: str
    build: str
    version: str
    origin: str                    # nightly | local wheel | local tree
    date: str | None = None        # a channel's build: its day, YYYY-MM-DD
    sha256: str | None = None      # a local build: the content hash of the file or the tree
    detail: str = ""               # a local tree: its git commit, and what is uncommitted
    index: str | None = None       # a channel's build on an index of its own

    @property
    def text(self) -> str:
        """keras-nightly 3.16.0.dev2026102704 (nightly 2026-10-27), keras 3.16.0 (local tree
        sha256:1a2b3c4d5e6f, git 0123abcd + 2 changed files)."""
        if self.origin == "nightly":
            return f"{self.build} {self.version} (nightly {self.date})"
        said = ", ".join(filter(None, [f"sha256:{(self.sha256 or '')[:12]}", self.detail]))
        return f"{self.build} {self.version} ({self.origin} {said})"


def build_day(version: str) -> str | None:
    """The day a nightly version was built (YYYY-MM-DD), from its dev number; None for a
    version that says none."""
    try:
        dev = Version(version).dev
    except InvalidVersion:
        return None
    digits = str(dev) if dev is not None else ""
    if len(digits) < 8:
        return None
    try:
        return datetime.date(int(digits[:4]), int(digits[4:6]), int(digits[6:8])).isoformat()
    except ValueError:
        return None


def choose(name: str, versions: Sequence[str], date: str | None) -> tuple[str, str]:
    """(version, day) of the build of `date` (the highest of that day), or the newest build;
    ChannelError naming the nearest days when that day has none."""
    days: dict[str, list[Version]] = {}
    for text in versions:
        day = build_day(text)
        if day is not None:
            days.setdefault(day, []).append(Version(text))
    if not days:
        raise ChannelError(f"{name}: the package index lists no dated build")
    wanted = date or max(days)
    if wanted not in days:
        before = max((d for d in days if d < wanted), default=None)
        after = min((d for d in days if d > wanted), default=None)
        nearest = " and ".join(f"{d} ({max(days[d])})" for d in (before, after) if d)
        raise ChannelError(f"{name} has no build dated {wanted} (nearest: {nearest})")
    return str(max(days[wanted])), wanted


@functools.lru_cache(maxsize=64)
def listed(name: str, index: str | None = None) -> tuple[str, ...]:
    """Every version of `name`, pre-releases included, as pip lists them from this machine's
    index configuration (or from `index` alone); ChannelError when none can be listed."""
    command = [sys.executable, "-m", "pip", "index", "versions", "--pre", name,
               "--disable-pip-version-check"] + (["--index-url", index] if index else [])
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=LIST_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ChannelError(f"listing {name}'s builds took over {LIST_TIMEOUT_S:.0f} s") \
            from None
    found = re.search(r"^Available versions:\s*(.+)$", done.stdout, re.M)
    if done.returncode != 0 or found is None:
        said = [line.strip() for line in (done.stderr + done.stdout).splitlines()
                if line.strip().startswith("ERROR")]
        reason = said[0] if said else f"pip exited {done.returncode}"
        raise ChannelError(f"{name}: its builds cannot be listed ({reason})")
    return tuple(v.strip() for v in found.group(1).split(",") if v.strip())


def followed(follow: Sequence[str], api: str) -> tuple[str, ...]:
    """The distributions a channel replaces: `follow`, else the framework under test (its API's
    record: a Keras environment follows Keras, not its backend, as a Keras contributor
    measures)."""
    record = catalog.API_RECORDS.get(api)
    return tuple(canonicalize_name(n)
                 for n in (follow or (record.distributions if record is not None else ())))


def resolve(names: Sequence[str], asked: Collection[str], flavour: str,
            date: str | None) -> list[Build]:
    """The build of each followed distribution for the channel's day (None: the newest);
    `asked`: the names the `.in` asks for. ChannelError (one line) for a name
    the `.in` does not ask for, one without a known nightly, an index this machine does not
    reach, or a day without a build."""
    out = []
    for name in names:
        twin = NIGHTLY.get(name)
        if twin is None:
            raise ChannelError(f"{name} has no nightly channel the runner knows (it knows "
                               f"{', '.join(sorted(NIGHTLY))})")
        if name not in asked:
            raise ChannelError(f"the image folder's requirements have no {name} to follow")
        index = twin.index_for(flavour)
        why = indexes.unreachable(index) if index else None
        if index and why:
            raise ChannelError(f"{name}'s nightly builds are published on {index}, which cannot "
                               f"be reached from here ({why})")
        version, day = choose(twin.name, listed(twin.name, index), date)
        out.append(Build(name, twin.name, version, "nightly", date=day, index=index))
    return out


def substituted(base: str, builds: Sequence[Build],
                lines: dict[str, int]) -> tuple[str, list[str]]:
    """The `.in` with each build in place of its release (extras and marker kept), and the
    names to leave out of the resolution (a release whose nightly has a name of its own)."""
    text = base.splitlines()
    excluded: list[str] = []
    index_lines: list[str] = []
    for build in builds:
        number = lines[build.name]
        original = Requirement(text[number].split(" #", 1)[0].strip())
        extras = f"[{','.join(sorted(original.extras))}]" if original.extras else ""
        marker = f"; {original.marker}" if original.marker else ""
        text[number] = (f"{build.build}{extras}=={build.version}{marker}    # channel nightly, "
                        f"{build.date} (was {str(original)})")
        if build.index and f"--extra-index-url {build.index}" not in index_lines:
            index_lines.append(f"--extra-index-url {build.index}")
        if canonicalize_name(build.build) != build.name:
            excluded.append(build.name)
    return "\n".join(index_lines + text) + "\n", excluded


def excluding(pins: Mapping[str, str], folder: Path) -> list[str]:
    """The resolver's arguments that leave out each release a pinned nightly build replaces
    (keras beside keras-nightly: keras-hub's `keras>=3.15` would install it too), its list
    written into `folder`; none when no pin is such a build."""
    names = {canonicalize_name(n) for n in pins}
    left_out = sorted(release for release, twin in NIGHTLY.items()
                      if twin.name != release and twin.name in names)
    if not left_out:
        return []
    (folder / "excludes.txt").write_text("".join(f"{name}\n" for name in left_out))
    return ["--excludes", str(folder / "excludes.txt")]

"""The values a matrix may hold, checked one by one: names, bounds, image references, the
environment variables it may set, and every axis's values by the kind the catalog
(runner.worker.catalog) declares. Each check raises ValueError with the problem in words."""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Sequence

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict

from ..errors import did_you_mean
from ..worker import catalog
from ..worker.protocol import MAX_TIMEOUT_S as MAX_TIMEOUT_S  # a cell attempt: a week

RUN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# What the results folder holds besides run folders (the history database and its journals,
# machine-profiles/, bisect/): no run may be named so.
RESERVED_RUN_NAMES = ("machine-profiles", "bisect")
RESERVED_RUN_PREFIXES = ("history.sqlite",)
# Environment names become columns, file names and log lines: the same safe pattern.
NAME = re.compile(RUN_NAME_PATTERN)

# Bounds, each with a one-line error: what no real matrix needs and what would make planning or
# a run unbounded (repeats = 2**63 - 1 planned forever), or break a timer (timeout = inf).
MAX_REPEATS = 1000
MAX_RUNS = 100_000              # cells × repeats of one matrix
MAX_SEED = 2**32 - 1             # every framework's seed fits 32 bits

# Variables a matrix's `env` may not set unless the environment says unsafe_env = true: they
# decide which code the worker's interpreter loads (PYTHONPATH, PYTHONSTARTUP, LD_PRELOAD, PATH).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROTECTED_ENV = ("PYTHON", "LD_")
PROTECTED_ENV_NAMES = ("PATH",)


# ... nor, without it, what makes a shell (a `python =` that is a shell wrapper), another
# interpreter it starts, or the C library load code or read files of the setter's choosing:
# the variables sudo's env_reset drops (its initial_badenv_table, bash functions included) and
# glibc drops for setuid programs (UNSECURE_ENVVARS; not TMPDIR, a folder for temporary files
# every worker inherits from the host anyway), and bash's own start-up hooks.
LOADER_ENV_PREFIXES = ("BASH_FUNC_", "DYLD_", "_RLD", "LDR_", "KRB5_CONFIG", "KRB_CONF")
LOADER_ENV_NAMES = (
    # bash, ksh, zsh: files sourced, options set or commands run before a script's first line
    "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4", "BASH_XTRACEFD", "PROMPT_COMMAND",
    "BASH_LOADABLES_PATH", "IFS", "CDPATH", "GLOBIGNORE", "FPATH", "ZDOTDIR", "NULLCMD",
    "READNULLCMD", "TMPPREFIX",
    # glibc: gconv modules, getconf programs, tunables, locale, resolver and malloc-trace files
    "GCONV_PATH", "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH",
    "MALLOC_TRACE", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR",
    # the rest of sudo's list: other interpreters' search paths and options, terminal databases
    "PATH_LOCALE", "PERLLIB", "PERL5LIB", "PERL5OPT", "PERL5DB", "PERLIO_DEBUG", "RUBYLIB",
    "RUBYOPT", "JAVA_TOOL_OPTIONS", "NODE_OPTIONS", "LIBPATH", "SHLIB_PATH", "KRB5_KTNAME",
    "KRBCONFDIR", "KRBTKFILE", "TERMINFO", "TERMINFO_DIRS", "TERMPATH", "TERMCAP",
)


def protected_env(name: str) -> bool:
    upper = name.upper()
    return upper in PROTECTED_ENV_NAMES or upper.startswith(PROTECTED_ENV)


def loader_env(name: str, value: str) -> bool:
    """A variable that makes a shell, another interpreter or the C library load code or files
    (LOADER_ENV_*), or a value that is an exported bash function ("() { …; }")."""
    upper = name.upper()
    return upper in LOADER_ENV_NAMES or upper.startswith(LOADER_ENV_PREFIXES) \
        or value.lstrip().startswith("()")


def shown(value: Any, limit: int = 200) -> str:
    """repr(value), cut to `limit` characters: an error line stays one short line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def check_run_name(name: str) -> str:
    if name in RESERVED_RUN_NAMES or name.startswith(RESERVED_RUN_PREFIXES):
        raise ValueError(f"{shown(name)} names what the results folder keeps for itself "
                         "(history.sqlite, machine-profiles/, bisect/); name the run otherwise")
    return name

# An image in a registry, named by its content: REGISTRY/NAME@sha256:<64 hex digits>. A tag can
# move; a digest names exactly one image, so a run (and its reproduction) gets what it asked for.
# Without a registry host the name is Docker Hub's, as for `docker pull`.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(rf"^(?P<repository>(?:[A-Za-z0-9][A-Za-z0-9.-]*(?::[0-9]+)?/)?"
                             rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
                             r"@(?P<digest>sha256:[0-9a-f]{64})$")


def is_image_reference(image: str) -> bool:
    """A registry reference (a digest or a tag) rather than a folder under images/: folder names
    hold neither '@' nor ':'."""
    return "@" in image or ":" in image


def check_image(value: str | None) -> str | None:
    if value is not None and is_image_reference(value) and not IMAGE_REFERENCE.match(value):
        raise ValueError(f"{shown(value)}: name a registry image by its digest, "
                         f"REGISTRY/NAME@sha256:<64 hex digits> (a tag can move), or give an "
                         f"image folder under images/")
    if value is not None and not is_image_reference(value) and not NAME.match(value):
        # Its name becomes a folder of the environments' cache and an image's tag: one name.
        raise ValueError(f"{shown(value)}: an image folder is one folder name under images/ "
                         f"(letters, digits, '.', '_' or '-'; a path escapes images/)")
    return value


def _one_of(choices: tuple[Any, ...]):
    def check(value: Any) -> Any:
        if isinstance(value, bool) or value not in choices:
            listed = ", ".join(repr(c) for c in choices)
            raise ValueError(f"{shown(value)} is not one of {listed}{did_you_mean(value, choices)}")
        return value
    return check


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a whole number, got {shown(value)}")
    if value <= 0:
        raise ValueError(f"must be a positive whole number, got {value}")
    return value


def check_steps(value: Any) -> int | str:
    """Timed steps: a positive whole number or "auto"."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"expected a positive whole number or \"auto\", got {shown(value)}"
                     f"{did_you_mean(value, ('auto',)) if isinstance(value, str) else ''}")


def check_parallel(value: Any) -> int | str:
    """Cells at once: a positive whole number or "auto" (one per GPU)."""
    if value == "auto" or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value
    raise ValueError(f"expected a positive whole number or \"auto\" (one cell per GPU), got "
                     f"{shown(value)}{did_you_mean(value, ('auto',)) if isinstance(value, str) else ''}")


def check_lock_clocks(value: Any) -> bool | int:
    """false, true (the TDP, i.e. base, clock) or an SM clock in MHz."""
    if isinstance(value, bool) or (isinstance(value, int) and 0 < value < 100_000):
        return value
    raise ValueError(f"expected false, true (lock at the GPU's base clock) or a clock in MHz, "
                     f"got {value!r}")


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {shown(value)}")
    return value


def _bool_or_one_of(choices: tuple[Any, ...]):
    def check(value: Any) -> bool | str:
        if isinstance(value, bool):
            return value
        return _one_of(choices)(value) if isinstance(value, str) else _boolean(value)
    return check


def axis_check(axis: catalog.Axis):
    """The check of one value of an axis, by the kind the catalog declares."""
    if axis.kind == "choice":
        return _one_of(axis.values)
    if axis.kind == "bool_or_choice":
        return _bool_or_one_of(axis.values)
    return {"bool": _boolean, "positive_int": _positive_int}[axis.kind]


# Every axis a benchmark may vary (runner.worker.catalog declares them), with the check for one
# value. A list of values yields one cell per value (cartesian product across axes).
AXIS_CHECKS = {name: axis_check(axis) for name, axis in catalog.AXES.items()}
AXES = tuple(AXIS_CHECKS)


def check_axis(name: str, value: Any) -> tuple[Any, ...]:
    """A scalar or a non-empty list of valid values → a tuple of values."""
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("empty list: give at least one value")
    checked = tuple(AXIS_CHECKS[name](v) for v in values)
    if len(set(map(repr, checked))) != len(checked):
        raise ValueError(f"repeated value in {shown(value)}")
    return checked


class Strict(BaseModel):
    # allow_inf_nan=False: TOML has inf and nan, and no setting means either.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


CHANNELS = ("nightly",)     # what a derived stack may follow (runner/environments/channels.py)


def local_path(req: Requirement) -> bool:
    """A pin naming a file or folder of this machine (`keras @ ../keras`, `file:///…`), not a
    URL of the network."""
    return req.url is not None and ("://" not in req.url or req.url.startswith("file://"))


def requirement(text: str, local: bool = False) -> Requirement:
    """One requirement of a derived stack's pins or packages (PEP 508, from an index; with
    `local`, also a local wheel or source tree), or ValueError saying why it is none."""
    no_control(text)
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"{shown(text)} is not a requirement ({exc})") from None
    if req.url and not (local and local_path(req)):
        raise ValueError(f"{shown(text)}: a URL is no release of an index (a lock pins the "
                         "hashes of index files; a pin may name a local wheel or source tree)")
    return req


def check_stack(pins: Sequence[str], packages: Sequence[str], follow: Sequence[str] = ()) -> None:
    """A derived stack's pins (each with a version, or a local wheel or tree), packages and
    followed distributions, every name once."""
    seen: dict[str, str] = {}
    for key, texts in (("pins", pins), ("packages", packages), ("follow", follow)):
        for index, text in enumerate(texts):
            try:
                req = requirement(text, local=key == "pins")
            except ValueError as exc:
                raise ValueError(f"{key}[{index}]: {exc}") from None
            if key == "pins" and not (req.specifier or req.url):
                raise ValueError(f"pins[{index}]: {shown(text)} gives no version: pin it as "
                                 f"{req.name}==VERSION (an unversioned addition goes in packages)")
            if key == "follow" and (req.specifier or req.url or req.extras or req.marker):
                raise ValueError(f"follow[{index}]: {shown(text)}: name a distribution only")
            name = canonicalize_name(req.name)
            if name in seen:
                raise ValueError(f"{key}[{index}]: {req.name} is already in {seen[name]}: "
                                 "name each distribution once")
            seen[name] = key


def check_build_date(value: Any) -> Any:
    """A dated build's day: a TOML date or 'YYYY-MM-DD' (its ISO text); ValueError else."""
    import datetime

    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    if value is None:
        return value
    try:
        if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        pass
    raise ValueError(f"{shown(value)}: a build's day is YYYY-MM-DD (2026-10-27)")


def no_control(value: str | None) -> str | None:
    if value is not None and any(not c.isprintable() for c in value):
        raise ValueError(f"{shown(value)} holds a control character (a newline, NUL, …)")
    return value



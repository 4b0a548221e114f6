"""Every environment variable of the runner, declared once: its name, what a value is, its
default, what it means and where it applies.

Host modules read a setting through `get` (never os.environ for these names: a test holds it);
`validate` checks every one that is set before a command does anything, so a bad value is one
line and exit 2 before a run folder exists; `doctor` shows those that are set; the settings
table of the manual (docs/settings.md) is made from SETTINGS at every build.

Some are set by the runner itself for its workers, or by a matrix's `env` for a workload; the
worker (runner/worker/, which never imports the host) reads those by its own constant of the
same name, and tests/test_settings.py checks that every such name is declared here. Variables
of other tools that the runner passes on or reads as those tools do (CUDA_VISIBLE_DEVICES,
RAY_ADDRESS, PIP_*, DOCKER_HOST, ...) are theirs and not declared here.
"""

from __future__ import annotations

import math
import os
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError

# Who sets a variable: the user (validated up front, shown by doctor); the runner, for its
# workers; a matrix's `env`, for a workload; the test suite.
USER, RUNNER, MATRIX, TESTS = "user", "runner", "matrix env", "tests"


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str                     # what a value is, in words
    default: Any                  # the value when unset (or blank)
    meaning: str
    applies: str                  # where it is read
    parse: Callable[[str], Any] = str   # text -> value; ValueError(what is expected) when bad
    default_text: str = ""        # the default, in words, where the value alone says too little
    set_by: str = USER
    blank_is_unset: bool = True
    shown: Callable[[str], str] = str   # what a terminal or an error line shows of a value


def whole(low: int, high: int | None, expected: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = text.strip()
        if not value.isdigit() or int(value) < low or (high is not None and int(value) > high):
            raise ValueError(expected)
        return int(value)
    return parse


def above_zero(expected: str, below: float = math.inf) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(expected) from None
        if not 0 < value < below:               # NaN and inf too
            raise ValueError(expected)
        return value
    return parse


def choice(*values: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.strip() not in values:
            raise ValueError(f"one of {', '.join(values)}")
        return text.strip()
    return parse


NAME_OR_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")


def names(text: str) -> tuple[str, ...]:
    found = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in found if not NAME_OR_PREFIX.match(n)]
    if bad:
        raise ValueError(f"variable names or prefixes ending in *, separated by commas "
                         f"(NAME,NAME,PREFIX_*); {bad[0]!r} is not one")
    return found


def gpu_ids(text: str) -> tuple[str, ...]:
    found = tuple(w.strip() for w in text.split(",") if w.strip())
    if any(not re.fullmatch(r"[\w.:/-]+", w) for w in found):
        raise ValueError("GPU indices or UUIDs separated by commas (0,1 or GPU-8a7…)")
    return found


def memory_size(text: str) -> str:
    if not re.fullmatch(r"\d+(\.\d+)?[bkmgBKMG]?", text.strip()):
        raise ValueError("a memory size such as 32g (a number, then b, k, m or g)")
    return text.strip()


HISTORY_URL_FORMS = "an SQLAlchemy URL, sqlite:///PATH or postgresql://USER@HOST[:PORT]/DATABASE"


def history_url(text: str) -> str:
    """A history database's URL, as far as it can be judged without opening it: SQLite (a file,
    or `sqlite://` in memory) or PostgreSQL, its port (where given) a number; never a control
    character."""
    value = text.strip()
    if not re.fullmatch(r"sqlite(\+\w+)?://(/.+)?|postgresql(\+\w+)?://.+", value) or \
            not value.isprintable():
        raise ValueError(HISTORY_URL_FORMS)
    try:
        urllib.parse.urlsplit(value).port      # noqa: B018  (reading it checks it)
    except ValueError:
        raise ValueError(f"{HISTORY_URL_FORMS}, its PORT a number from 0 to 65535") from None
    return value


def password_hidden(url: str) -> str:
    """A URL as a terminal, a log or an error line shows it: its password (after user: and
    before the host's @, or a password= of its query) as ***."""
    url = re.sub(r"^([^:/]+://[^:/@]*):[^/]*@", r"\1:***@", url)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", url, flags=re.IGNORECASE)


def memory_bytes(size: str) -> int:
    """A memory size (memory_size's form: 32g, 512m, 1.5g, 1048576) in bytes."""
    scale = {"b": 1, "k": 2**10, "m": 2**20, "g": 2**30}.get(size[-1].lower(), 1)
    return int(float(size.rstrip("bkmgBKMG")) * scale)


def folder(text: str) -> Path:
    return Path(text).expanduser()


FLAVOUR = "DL_BENCH_FLAVOUR"
GPU = "DL_BENCH_GPU"
MIN_FREE_MB = "DL_BENCH_MIN_FREE_MB"
HISTORY_URL = "DL_BENCH_HISTORY_URL"
INHERIT_ENV = "DL_BENCH_INHERIT_ENV"
LOG_HEAD_MB, LOG_TAIL_MB = "DL_BENCH_LOG_HEAD_MB", "DL_BENCH_LOG_TAIL_MB"
ENGINE_TIMEOUT, ENGINE_RECONNECT = "DL_BENCH_ENGINE_TIMEOUT", "DL_BENCH_ENGINE_RECONNECT"
DOCKER_MEMORY = "DL_BENCH_DOCKER_MEMORY"
LOCAL_MEMORY = "DL_BENCH_LOCAL_MEMORY"
DOCKER_CLI = "DL_BENCH_DOCKER_CLI"
BASE_IMAGE = "DL_BENCH_BASE_IMAGE"
BUILD_CA = "DL_BENCH_BUILD_CA"
RAY_RETRIES = "DL_BENCH_RAY_RETRIES"
NODE_EXECUTOR = "DL_BENCH_NODE_EXECUTOR"
ENV_DIR = "RUNNER_ENV_DIR"
STACK_CACHE = "DL_BENCH_STACK_CACHE"
WORKER_ID = "DL_BENCH_WORKER_ID"
NO_DOCKER_SETUP = "DL_BENCH_NO_DOCKER_SETUP"

SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting(FLAVOUR, "cpu | cuda", None, "which lock of each image folder is built: the CPU or "
            "the CUDA stacks", "host; every Ray node", choice("cpu", "cuda"),
            "cuda where an NVIDIA GPU is found, else cpu"),
    Setting(GPU, "GPU indices or UUIDs, comma-separated", None, "the GPUs a run may use (one "
            "cell per GPU at once); a container whose lane names none gets the first",
            "host", gpu_ids, "those CUDA_VISIBLE_DEVICES names, else every GPU NVML lists",
            blank_is_unset=False),
    Setting(MIN_FREE_MB, "whole number (MB)", 200, "the run stops (finished cells kept, "
            "--resume goes on) when its folder's disk has less free space before a cell",
            "host", whole(0, None, "a whole number of MB")),
    Setting(HISTORY_URL, "SQLAlchemy URL", None, "the history database runs are recorded in "
            "(sqlite:///PATH or postgresql://USER@HOST/DB); --db comes first, and it beats a "
            "matrix's [history] url", "host", history_url, "history.sqlite in the results folder",
            shown=password_hidden),
    Setting(INHERIT_ENV, "NAME,NAME,PREFIX_*", (), "host variables a worker inherits besides "
            "the stated few (HOME, LANG, PATH, CUDA_VISIBLE_DEVICES, ...): the host's decision, "
            "never the matrix's", "local workers (host and Ray nodes)", names, "none"),
    Setting(LOG_HEAD_MB, "number (MB) above 0", 1.0, "how much of the start of a worker's "
            "output its log keeps", "local workers", above_zero(
                "a number of megabytes above 0", 1e6)),
    Setting(LOG_TAIL_MB, "number (MB) above 0", 4.0, "how much of the end of a worker's "
            "output its log keeps", "local workers", above_zero(
                "a number of megabytes above 0", 1e6)),
    Setting(ENGINE_TIMEOUT, "seconds above 0", 600.0, "the deadline of each request to the "
            "Docker engine (create, start, inspect, kill, remove); one not answered fails its "
            "cell", "docker executor", above_zero("a number of seconds above 0")),
    Setting(ENGINE_RECONNECT, "seconds above 0", 60.0, "how long an engine that refuses or "
            "drops the connection is asked again before the run stops", "docker executor",
            above_zero("a number of seconds above 0")),
    Setting(DOCKER_MEMORY, "memory size (32g)", None, "a memory limit per container (the "
            "kernel's, a cgroup's: an OOM kill is recorded as oom)", "docker executor; every "
            "Ray node", memory_size, "none: a container may take the whole machine's memory"),
    Setting(LOCAL_MEMORY, "memory size (32g)", None, "a memory limit per local cell: the "
            "resident memory of its worker and every process the worker starts, checked by "
            "its supervisor at least every 0.2 s; above it they are killed and the cell is "
            "recorded as oom", "local executor; every Ray node", memory_size,
            "none: a worker may take the whole machine's memory"),
    Setting(DOCKER_CLI, "path", None, "the docker CLI that builds images (BuildKit)",
            "image builds", str, "docker on PATH, else /usr/bin/docker, else the SDK"),
    Setting(BASE_IMAGE, "image reference", None, "replaces the images' pinned base (a local "
            "image where no registry is reachable)", "image builds; every Ray node", str,
            "python:3.11.10-slim-bookworm@sha256:… (images/Dockerfile)"),
    Setting(BUILD_CA, "path of a CA bundle", None, "a CA bundle image builds trust (a network "
            "that intercepts TLS)", "image builds", str,
            "PIP_CERT, SSL_CERT_FILE or REQUESTS_CA_BUNDLE where set"),
    Setting(RAY_RETRIES, "whole number, 0 to 100", 2, "how often a Ray task whose process or "
            "node died is submitted again before its cell is recorded as crashed", "ray "
            "executor", whole(0, 100, "a whole number from 0 to 100 (resubmissions of a lost "
                              "task)")),
    Setting(NODE_EXECUTOR, "auto | local | docker", "auto", "how a Ray node runs its cells",
            "every Ray node", choice("auto", "local", "docker"),
            "auto: docker where the node has a GPU and an engine, else local"),
    Setting(ENV_DIR, "folder", Path.home() / ".cache" / "dl-bench-runner" / "envs", "where "
            "local environments are built and cached (by flavour and lock hash)",
            "local executor; bisect", folder, "~/.cache/dl-bench-runner/envs"),
    Setting(STACK_CACHE, "folder", None,
            "where derived stacks' resolved locks are cached (by the hash of what they derive "
            "from)", "plan and run of a matrix with pins or packages", folder,
            "stacks/ beside RUNNER_ENV_DIR"),
    Setting(WORKER_ID, "text", None, "one per attempt: finds whatever escaped its supervisor",
            "local workers", set_by=RUNNER),
    Setting("DL_BENCH_GPU_GIVEN", "1", None, "the host gave the worker a GPU: a cell that "
            "wants it fails (no_gpu) if its framework cannot see it", "workers", set_by=RUNNER),
    Setting("DL_BENCH_COMPILE_CACHE", "fresh | kept", None, "whether the worker's compilation "
            "caches are its own, empty ones or the user's ([run] keep_compile_caches)",
            "workers", set_by=RUNNER),
    Setting("DL_BENCH_WORKLOADS", "folder", None, "where a user workload's staged code is",
            "workers", set_by=RUNNER),
    Setting("DL_BENCH_SELFTEST_SHORTCUT", "fraction in (0, 1]", None, "the selftest workload "
            "does this share of its work, as a backend that silently does less would (the "
            "report must mark it)", "workers (an environment's env)", set_by=MATRIX),
    Setting(NO_DOCKER_SETUP, "any", None, "the docker tests skip instead of setting up an "
            "engine and a base image", "the test suite", set_by=TESTS),
)}


def get(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """A setting's value: parsed from `environ` (os.environ) when set, else its default; a
    value that is not valid is one line naming the variable (UsageError)."""
    setting = SETTINGS[name]
    text = (os.environ if environ is None else environ).get(name)
    if text is None or (setting.blank_is_unset and not text.strip()):
        return setting.default
    try:
        return setting.parse(text)
    except ValueError as exc:
        raise UsageError(f"{name}={setting.shown(text)!r}: expected {exc}") from None


def validate(environ: Mapping[str, str] | None = None) -> None:
    """Every user setting that is set, checked (before a command does anything)."""
    for setting in SETTINGS.values():
        if setting.set_by == USER:
            get(setting.name, environ)


def texts(wanted: tuple[str, ...], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """{name: text} of these settings where set (what a Ray driver hands its nodes)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in wanted if name in SETTINGS and name in environ}


def set_here(environ: Mapping[str, str] | None = None) -> list[tuple[Setting, str]]:
    """The user settings set in `environ`, with their text."""
    environ = os.environ if environ is None else environ
    return [(s, environ[s.name]) for s in SETTINGS.values()
            if s.set_by == USER and s.name in environ]

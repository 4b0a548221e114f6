"""What a lock says, entry by entry, and where two locks differ: every pin (its name, version,
extras, URL and environment marker), every file hash it allows, and every option line (the
indexes, find-links, anything else an installer reads from it). `lock --check` compares the whole
of a lock with a fresh resolution of its `.in`; a lock whose hashes were edited is not the lock
its `.in` makes, whatever its versions say.

The resolver is given the lock being replaced as its preference with the hashes taken out
(`without_hashes`): uv keeps the hashes it finds in its preference, so a tampered hash would
otherwise survive the very resolution that should refute it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from .indexes import INDEX_LINE

HASH = re.compile(r"--hash[=\s]+(\S+)")
COMMENT = re.compile(r"(^|\s)#.*$")


@dataclass(frozen=True)
class Entry:
    """One pin of a lock: its requirement as written (normalised) and the hashes it allows."""

    name: str
    requirement: str
    version: str | None
    hashes: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Lock:
    options: tuple[str, ...]
    entries: dict[str, Entry]


def logical_lines(text: str) -> list[str]:
    """The lock's lines with their continuations joined and their comments dropped."""
    out, pending = [], ""
    for raw in text.splitlines():
        line = COMMENT.sub("", raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined = (pending + line).strip()
        pending = ""
        if joined:
            out.append(joined)
    if pending.strip():
        out.append(pending.strip())
    return out


def parse(text: str) -> Lock:
    options: list[str] = []
    entries: dict[str, Entry] = {}
    for line in logical_lines(text):
        if line.startswith("-"):
            options.append(" ".join(line.replace("=", " ", 1).split()))
            continue
        hashes = frozenset(h.lower() for h in HASH.findall(line))
        rest = " ".join(HASH.sub(" ", line).split())
        try:
            requirement = Requirement(rest)
        except InvalidRequirement:
            name = canonicalize_name(re.split(r"[\s\[=<>!~;@]", rest, maxsplit=1)[0] or rest)
            entries[name] = Entry(name, rest, None, hashes)
            continue
        name = canonicalize_name(requirement.name)
        pinned = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
        entries[name] = Entry(name, str(requirement), pinned[0] if len(pinned) == 1 else None,
                              hashes)
    return Lock(tuple(options), entries)


def without_hashes(text: str) -> str:
    """The lock's pins as the resolver's preference: versions only, without a single hash or
    option line (the indexes come from the `.in`, never from the lock being checked)."""
    return "".join(" ".join(HASH.sub(" ", line).split()) + "\n" for line in logical_lines(text)
                   if not line.startswith("-"))


def short(digest: str) -> str:
    algorithm, _, value = digest.partition(":")
    return f"{algorithm}:{value[:16]}…" if len(value) > 16 else digest


def entry_difference(old: Entry, new: Entry) -> str | None:
    """How one package's pin differs (None: it does not), as `lock` prints it."""
    label = f"{old.name} {old.version or old.requirement}"
    if old.version != new.version:
        return f"{old.name} {old.version or old.requirement} → {new.version or new.requirement}"
    if old.requirement != new.requirement:
        return f"{label}: pinned as {old.requirement!r}, resolves to {new.requirement!r}"
    unknown, unpinned = sorted(old.hashes - new.hashes), sorted(new.hashes - old.hashes)
    if unknown:
        served = f" (and {len(unpinned)} file(s) it serves are not pinned)" if unpinned else ""
        return (f"{label}: {len(unknown)} hash(es) not of a file the index serves for it, "
                f"first {short(unknown[0])}{served}")
    if unpinned:
        return (f"{label}: {len(unpinned)} file(s) the index serves for it are not pinned, "
                f"first {short(unpinned[0])}")
    return None


def differences(old_text: str | None, new_text: str) -> list[str]:
    """Every difference between a lock (None: none yet) and what its `.in` resolves to, in the
    lock's order: changed pins (versions, extras, URLs, markers, hashes), added and removed
    pins, then the option lines (indexes, find-links)."""
    old, new = parse(old_text or ""), parse(new_text)
    out = [said for name, entry in old.entries.items() if name in new.entries
           and (said := entry_difference(entry, new.entries[name]))]
    out += [f"+ {e.name} {e.version or e.requirement}" for n, e in new.entries.items()
            if n not in old.entries]
    out += [f"- {e.name} {e.version or e.requirement}" for n, e in old.entries.items()
            if n not in new.entries]
    old_indexes, new_indexes = index_urls(old.options), index_urls(new.options)
    if old_indexes != new_indexes:
        out.append(f"indexes {old_indexes or 'PyPI only'} → {new_indexes or 'PyPI only'}")
    old_rest, new_rest = other_options(old.options), other_options(new.options)
    if old_rest != new_rest:
        out.append(f"options {old_rest or 'none'} → {new_rest or 'none'}")
    return out


def index_urls(options: tuple[str, ...]) -> list[str]:
    return [m.group(2) for m in map(INDEX_LINE.match, options) if m]


def other_options(options: tuple[str, ...]) -> list[str]:
    return [o for o in options if not INDEX_LINE.match(o)]

"""Images to and from a VM without a registry: `runner export` and `runner import`.

An archive is one uncompressed tar:
  index.json           schema, and per image: the file, its tags, id, sha256 and runner labels
  images/<n>.tar       the engine's own `docker save` stream of that image (tags included)
and beside it ARCHIVE.sha256 (`sha256sum -c` reads it). Import checks the checksum before
loading anything, then loads each image and checks its lock and recipe labels: against the index
(the image is the one exported) and against this checkout's image folders (a run of this
checkout's matrix will use it, or will build its own).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..schema import format_error
from ..worker.protocol import atomic_target, write_text_atomic
from . import images

INDEX = "index.json"
CHUNK = 1 << 20
MAX_INDEX_BYTES = 16 << 20      # an index lists a few images; a bigger one is not an index


class TransferError(Exception):
    """An archive cannot be written or read; the message is one line."""


@dataclass
class Exported:
    key: str              # the environment's source: an image folder or a digest reference
    image: Any            # the docker SDK's Image


class _Index(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class IndexEntry(_Index):
    key: str
    file: str = Field(pattern=r"^images/[0-9]+\.tar$")
    image_id: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    tags: list[str] = Field(default_factory=list)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    repo_digests: list[str] = Field(default_factory=list)
    labels: dict[str, str] = Field(default_factory=dict)


class IndexModel(_Index):
    """index.json of an archive, validated as data before anything is loaded."""
    schema_: Literal[1] = Field(alias="schema")
    images: list[IndexEntry] = Field(min_length=1)


def checksum_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".sha256")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def export_images(client: Any, wanted: list[Exported], archive: Path,
                  on_line: Callable[[str], None]) -> dict[str, Any]:
    """Write the archive (temp file + rename) and its checksum file; return the index."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    entries = []
    with atomic_target(archive) as tmp, tarfile.open(tmp, "w") as outer, \
            tempfile.TemporaryDirectory(prefix="dl-bench-export-", dir=archive.parent) as scratch:
        for number, item in enumerate(wanted, 1):
            image = item.image
            name = f"images/{number}.tar"
            saved = Path(scratch) / f"{number}.tar"
            on_line(f"saving {item.key} ({image.short_id})")
            digest = hashlib.sha256()
            with saved.open("wb") as handle:
                # named: the save carries the image's tags, so a load restores them.
                for chunk in image.save(chunk_size=CHUNK, named=_first_tag(image)):
                    handle.write(chunk)
                    digest.update(chunk)
            outer.add(saved, arcname=name)
            saved.unlink()
            entries.append({"key": item.key, "file": name, "image_id": image.id,
                            "tags": list(image.tags), "sha256": digest.hexdigest(),
                            "repo_digests": image.attrs.get("RepoDigests") or [],
                            "labels": images.labels_of(image)})
        index = {"schema": 1, "images": entries}
        data = json.dumps(index, indent=2, sort_keys=True).encode()
        info = tarfile.TarInfo(INDEX)
        info.size, info.mtime = len(data), int(time.time())
        outer.addfile(info, io.BytesIO(data))
    write_text_atomic(checksum_path(archive), f"{sha256_of(archive)}  {archive.name}\n")
    return index


def _first_tag(image: Any) -> str | bool:
    """The tag a save names (docker-py saves an untagged image by id)."""
    return image.tags[0] if image.tags else False


def verify(archive: Path) -> str:
    """The archive's sha256 when it matches ARCHIVE.sha256; TransferError (one line) otherwise."""
    if not archive.is_file():
        raise TransferError(f"{archive}: no such archive")
    sums = checksum_path(archive)
    if not sums.is_file():
        raise TransferError(f"{archive}: its checksum file {sums.name} is missing (export "
                            "writes both; copy them together)")
    try:
        with sums.open("rb") as handle:
            expected = handle.read(4096).decode("ascii").split()[:1]
    except UnicodeDecodeError:
        raise TransferError(f"{sums}: not a checksum file (sha256sum writes '<64 hex digits>  "
                            f"{archive.name}')") from None
    actual = sha256_of(archive)
    if expected != [actual]:
        raise TransferError(f"{archive}: sha256 {actual[:16]}… does not match {sums.name} "
                            f"({(expected or ['empty'])[0][:16]}…): the copy is damaged")
    return actual


@dataclass
class Imported:
    key: str
    image_id: str
    tags: list[str]
    problems: list[str]         # label mismatches against this checkout (empty: it matches)


def read_index(archive: Path) -> dict[str, Any]:
    """The archive's index.json, validated, every file it names a member of the archive;
    TransferError (one line) otherwise. Reads the tar's table, extracts nothing."""
    try:
        with tarfile.open(archive, "r") as outer:
            member = outer.getmember(INDEX)
            if not member.isfile() or member.size > MAX_INDEX_BYTES:
                raise TransferError(f"{archive}: {INDEX} is not a file of at most "
                                    f"{MAX_INDEX_BYTES >> 20} MB")
            index_file = outer.extractfile(member)
            assert index_file is not None       # a regular file (checked above)
            index = json.loads(index_file.read())
            if not isinstance(index, dict):
                raise TransferError(f"{archive}: {INDEX} is not a JSON object")
            IndexModel.model_validate(index)
            members = {m.name: m for m in outer.getmembers()}
    except KeyError:
        raise TransferError(f"{archive}: not an archive of runner export (no {INDEX})") from None
    except (ValueError, RecursionError, tarfile.TarError) as exc:
        problem = format_error(exc.errors()[0]) if isinstance(exc, ValidationError) \
            else f"{type(exc).__name__}: {exc}"
        raise TransferError(f"{archive}: not an archive of runner export ({INDEX}: "
                            f"{problem})") from None
    for entry in index["images"]:
        if entry["file"] not in members or not members[entry["file"]].isfile():
            raise TransferError(f"{archive}: {INDEX} names {entry['file']}, which the archive "
                                f"does not hold")
    return index


def import_images(client: Any, archive: Path, on_line: Callable[[str], None],
                  recipe_for: Callable[[str, str], images.Recipe | None]) -> list[Imported]:
    """Verify, then load every image of the archive and check its labels. recipe_for(name,
    flavour) gives this checkout's recipe of an image folder (None when it has none)."""
    import docker.errors

    verify(archive)
    index = read_index(archive)
    out = []
    try:
        with tarfile.open(archive, "r") as outer:
            for entry in index["images"]:
                on_line(f"loading {entry['key']}")
                member = outer.extractfile(entry["file"])
                if member is None:
                    raise TransferError(f"{archive}: {entry['file']} is not a file")
                # A generator: streamed in chunks (requests would take a member's file number
                # for the whole archive's and send a wrong length).
                loaded = client.images.load(iter(functools.partial(member.read, CHUNK), b""))
                image = client.images.get(entry["image_id"])
                for tag in entry["tags"]:     # an untagged save loads without its tags
                    if tag not in image.tags:
                        repository, _, tag_name = tag.rpartition(":")
                        image.tag(repository, tag_name)
                if not any(i.id == entry["image_id"] for i in loaded):
                    raise TransferError(f"{archive}: {entry['file']} did not load image "
                                        f"{entry['image_id'][:19]}")
                problems = check_labels(images.labels_of(image), entry["labels"], recipe_for)
                out.append(Imported(entry["key"], image.id, entry["tags"], problems))
    except (KeyError, ValueError, tarfile.TarError) as exc:
        raise TransferError(f"{archive}: not an archive of runner export ({exc})") from None
    except docker.errors.DockerException as exc:
        raise TransferError(f"{archive}: the engine could not load it: {exc}") from None
    return out


def check_labels(labels: dict[str, str], exported: dict[str, str],
                 recipe_for: Callable[[str, str], images.Recipe | None]) -> list[str]:
    """What differs: the loaded image's labels against the index, then its lock and recipe
    against this checkout's image folder."""
    if labels != exported:
        return ["its labels differ from the archive's index: not the image that was exported"]
    name, flavour = labels.get("image"), labels.get("flavour")
    if not name or not flavour:
        return ["no runner labels: not built from images/ (it runs by digest or id only)"]
    rec = recipe_for(name, flavour)
    if rec is None:
        return [f"this checkout has no images/{name}/ lock for {flavour}"]
    problems = []
    if labels.get("lock-sha256") != rec.lock_sha256:
        problems.append(f"lock sha256 {labels.get('lock-sha256', '?')[:12]}… in the image, "
                        f"{rec.lock_sha256[:12]}… in images/{name}/{rec.lock.name} here")
    elif labels.get("recipe-sha256") != rec.recipe_sha256:
        problems.append(f"recipe sha256 {labels.get('recipe-sha256', '?')[:12]}… in the image, "
                        f"{rec.recipe_sha256[:12]}… here (images/Dockerfile or the base differ)")
    return problems

"""Docker images of the environments: which recipe an image comes from, whether it is already
built, building it (BuildKit through the docker CLI, else the SDK), what a record says about it.

An image is `dl-bench/<name>:<flavour>-<lock sha256[:12]>`, also tagged `dl-bench/<name>:<flavour>`
(what compose.yaml runs) unless it is a derived stack's (stacks.py: the folder's name, the derived
lock's hash, no alias). Its labels record the lock's sha256 and a hash of the whole recipe
(the shared images/Dockerfile, the lock, the base), so a rebuild is skipped exactly when nothing
that goes into it changed.
The `docker` package is imported by the callers that hold a client, never here at import time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable

from .. import settings
from ..paths import IMAGES_DIR
from . import LOCKS
from .venvs import sha256_file

LABEL = "org.dl-bench"
CA_ENVS = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")    # pip's, after BUILD_CA
# The host's pip settings an image build takes (build arguments the Dockerfile declares): where a
# mirror or a wheel folder served over HTTP replaces an index the build cannot reach. URL lists
# keep their http(s) entries only: a path on the host means nothing inside the build.
PIP_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST",
                "PIP_NO_INDEX", "PIP_RETRIES")
PIP_URL_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")


class ImageError(Exception):
    """An image cannot be built or found; the message is one line for the user."""


def pip_settings() -> dict[str, str]:
    """The host's pip settings the image build gets (see PIP_SETTINGS); none of them changes
    what is installed (the lock's hashes decide), so they are no part of the recipe's hash."""
    out = {}
    for name in PIP_SETTINGS:
        value = os.environ.get(name, "").strip()
        if name in PIP_URL_SETTINGS:
            value = " ".join(v for v in value.split() if v.startswith(("http://", "https://")))
        if value:
            out[name] = value
    return out


def extra_ca_bundle() -> Path | None:
    """The CA bundle pip uses on this host, given to the build for networks that intercept TLS."""
    for value in (settings.get(settings.BUILD_CA), *(os.environ.get(var) for var in CA_ENVS)):
        if value and Path(value).is_file():
            return Path(value)
    return None


@dataclass(frozen=True)
class Recipe:
    """Everything that decides an image's content."""

    name: str
    flavour: str
    folder: Path
    lock: Path
    lock_sha256: str
    base: str | None          # None: the Dockerfile's default (digest-pinned) base
    derived: bool = False     # a derived stack's lock: tagged by its hash only, never the alias

    @property
    def repository(self) -> str:
        return f"dl-bench/{self.name}"

    @property
    def tag(self) -> str:
        return f"{self.repository}:{self.flavour}-{self.lock_sha256[:12]}"

    @property
    def alias(self) -> str:
        return f"{self.repository}:{self.flavour}"

    @property
    def dockerfile(self) -> Path:
        """The one recipe every image shares (images/Dockerfile)."""
        return self.folder.parent / "Dockerfile"

    @property
    def recipe_sha256(self) -> str:
        digest = hashlib.sha256()
        for part in (self.dockerfile.read_bytes(), self.lock.read_bytes(),
                     (self.base or "").encode()):
            digest.update(hashlib.sha256(part).digest())
        return digest.hexdigest()

    def build_args(self) -> dict[str, str]:
        # The Dockerfile turns these into its labels (labels given to the build API would cost
        # one layer each, a full file-system copy apiece on a vfs engine).
        args = {"IMAGE": self.name, "LOCK": self.lock.name, "LOCK_SHA256": self.lock_sha256,
                "RECIPE_SHA256": self.recipe_sha256, "FLAVOUR": self.flavour, **pip_settings()}
        if self.base:
            args["BASE"] = self.base
        return args

    def labels(self) -> dict[str, str]:
        """The labels the Dockerfile writes from the build arguments."""
        return {f"{LABEL}.image": self.name, f"{LABEL}.flavour": self.flavour,
                f"{LABEL}.lock": self.lock.name, f"{LABEL}.lock-sha256": self.lock_sha256,
                f"{LABEL}.recipe-sha256": self.recipe_sha256}


def recipe(name: str, flavour: str = "cpu", base: str | None = None,
           images_dir: Path = IMAGES_DIR, lock: str | Path | None = None) -> Recipe:
    """The recipe of an image folder's lock of a flavour, or of a derived stack's `lock`."""
    folder = images_dir / name
    installs = Path(lock) if lock is not None else folder / LOCKS.get(flavour, "?")
    for needed in (images_dir / "Dockerfile", installs):
        if not needed.is_file():
            raise ImageError(f"image {name!r} ({flavour}): {needed} is missing")
    return Recipe(name=name, flavour=flavour, folder=folder, lock=installs,
                  lock_sha256=sha256_file(installs), base=base or settings.get(settings.BASE_IMAGE),
                  derived=lock is not None)


def write_context(rec: Recipe, folder: Path) -> None:
    """The build context: the Dockerfile, the one lock it installs, the host's CA bundle."""
    shutil.copy2(rec.dockerfile, folder / "Dockerfile")
    shutil.copy2(rec.lock, folder / rec.lock.name)
    ca = extra_ca_bundle()
    if ca is not None:
        shutil.copy2(ca, folder / "extra-ca.pem")


def find_built(client: Any, rec: Recipe) -> Any | None:
    """The image of this exact recipe when it exists, else None."""
    import docker.errors

    try:
        image = client.images.get(rec.tag)
    except docker.errors.ImageNotFound:
        return None
    labels = image.labels or {}
    wanted = rec.labels()
    return image if all(labels.get(k) == v for k, v in wanted.items()) else None


def buildkit_cli() -> str | None:
    """A docker CLI that builds with BuildKit: one with the buildx plugin, or a pre-23 CLI whose
    BuildKit is built in. BuildKit makes no layer for ARG/ENV/LABEL steps: on a vfs engine (CI)
    the classic builder copies the whole file system per step (numpy image: 7 min against 1)."""
    candidates = [settings.get(settings.DOCKER_CLI), shutil.which("docker"), "/usr/bin/docker"]
    for cli in dict.fromkeys(c for c in candidates if c and Path(c).is_file()):
        def ok(*args: str, cli: str = cli) -> subprocess.CompletedProcess:
            return subprocess.run([cli, *args], capture_output=True, text=True, timeout=30)
        try:
            if ok("buildx", "version").returncode == 0:
                return cli
            version = ok("version", "--format", "{{.Client.Version}}").stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if version.split(".")[0].isdigit() and int(version.split(".")[0]) < 23:
            return cli
    return None


def build(client: Any, rec: Recipe, on_line: Callable[[str], None]) -> Any:
    """Build the image (BuildKit through the docker CLI when there is one, else the SDK's classic
    builder), streaming the builder's output lines to on_line; ImageError on failure."""
    with tempfile.TemporaryDirectory(prefix=f"dl-bench-{rec.name}-") as tmp:
        context = Path(tmp)
        write_context(rec, context)
        cli = buildkit_cli()
        if cli is not None:
            build_with_cli(cli, rec, context, on_line)
        else:
            on_line("no BuildKit docker CLI found: classic builder (slow on vfs engines)")
            build_with_sdk(client, rec, context, on_line)
    image = client.images.get(rec.tag)
    if not rec.derived:
        image.tag(rec.repository, rec.flavour)
    return image


def build_with_cli(cli: str, rec: Recipe, context: Path, on_line: Callable[[str], None]) -> None:
    # --network host: the build reaches PyPI/Debian even on engines started without a bridge
    # (--bridge=none); the containers that run cells get no network at all.
    command = [cli, "build", "--progress", "plain", "--network", "host", "--tag", rec.tag]
    for key, value in rec.build_args().items():
        command += ["--build-arg", f"{key}={value}"]
    command.append(str(context))
    last: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True, errors="replace",
                          env={**os.environ, "DOCKER_BUILDKIT": "1"}) as process:
        assert process.stdout is not None       # stdout=PIPE
        try:
            for line in process.stdout:
                if line.strip():
                    last = (last + [line.strip()])[-5:]
                    on_line(line.strip())
        except BaseException:  # Ctrl-C: stop the build too
            process.kill()
            raise
    if process.returncode != 0:
        hint = ""
        if any("registry" in line or "pull access denied" in line for line in last):
            hint = f" (no registry here? build FROM a local base: {settings.BASE_IMAGE}=IMAGE)"
        raise ImageError(f"image {rec.name}: docker build failed (exit {process.returncode})"
                         f"{hint}: " + " | ".join(last[-3:]))


def build_with_sdk(client: Any, rec: Recipe, context: Path, on_line: Callable[[str], None]) -> None:
    import docker.errors

    last: list[str] = []
    try:
        stream = client.api.build(path=str(context), tag=rec.tag, buildargs=rec.build_args(),
                                  network_mode="host", rm=True, forcerm=True, pull=False,
                                  decode=True)
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise ImageError(f"image {rec.name}: build failed: {detail.strip()} "
                                 f"(after: {' | '.join(last[-3:])})")
            for line in str(chunk.get("stream", "")).splitlines():
                if line.strip():
                    last = (last + [line.strip()])[-5:]
                    on_line(line.strip())
    except docker.errors.APIError as exc:
        raise ImageError(f"image {rec.name}: build failed: {exc.explanation or exc}") from exc


def ensure(client: Any, rec: Recipe, on_line: Callable[[str], None]) -> tuple[Any, bool]:
    """The image of this recipe, built when missing: (image, whether it was built now)."""
    image = find_built(client, rec)
    if image is not None:
        on_line(f"{rec.tag} up to date")
        return image, False
    on_line(f"building {rec.tag}")
    started = time.monotonic()
    image = build(client, rec, on_line)
    on_line(f"built {rec.tag} in {time.monotonic() - started:.0f} s")
    return image, True


def record_metadata(image: Any, rec: Recipe) -> dict[str, Any]:
    """What every record of this image says about it (keys registered in worker.metadata.KEYS).
    The repo digest exists only once the image was pushed to a registry."""
    meta: dict[str, Any] = {"image_id": image.id, "lock_sha256": rec.lock_sha256,
                            "executor": "docker"}
    digests = image.attrs.get("RepoDigests") or []
    if digests:
        meta["image_digest"] = digests[0]
    return meta


# --- registries: push by the recipe's tag, pull and run by digest ------------------------------

def push(client: Any, image: Any, rec: Recipe, registry: str,
         on_line: Callable[[str], None]) -> str:
    """Push a built image to REGISTRY (host[:port][/path]) under its recipe's tag and return the
    reference that names exactly it: REGISTRY/dl-bench/<name>@sha256:…; ImageError on failure."""
    import docker.errors

    repository = f"{registry.rstrip('/')}/{rec.repository}"
    tag = rec.tag.rsplit(":", 1)[1]
    image.tag(repository, tag)
    digest = None
    try:
        for chunk in client.api.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise ImageError(f"image {rec.name}: push to {registry} failed: {detail.strip()}")
            digest = (chunk.get("aux") or {}).get("Digest") or digest
            if chunk.get("status") and not chunk.get("progressDetail"):
                on_line(f"push {repository}:{tag}: {chunk['status']}")
    except docker.errors.APIError as exc:
        raise ImageError(f"image {rec.name}: push to {registry} failed: "
                         f"{exc.explanation or exc}") from exc
    if not digest:
        raise ImageError(f"image {rec.name}: {registry} answered the push without a digest")
    return f"{repository}@{digest}"


def pull_pinned(client: Any, reference: str, on_line: Callable[[str], None]) -> Any:
    """The image named by REGISTRY/NAME@sha256:…: the engine's copy when it holds that digest,
    else pulled (never a tag); ImageError, one line, when it cannot be had."""
    import docker.errors

    try:
        image = client.images.get(reference)
    except docker.errors.ImageNotFound:
        image = None
    if image is None:
        repository, digest = reference.rsplit("@", 1)
        on_line(f"pulling {reference}")
        try:
            for chunk in client.api.pull(repository, tag=digest, stream=True, decode=True):
                if "error" in chunk:
                    detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    raise ImageError(f"image {reference}: pull failed: {detail.strip()}")
            image = client.images.get(reference)
        except docker.errors.DockerException as exc:
            detail = getattr(exc, "explanation", None) or exc
            raise ImageError(f"image {reference}: pull failed: {detail}") from exc
    if reference not in (image.attrs.get("RepoDigests") or []):
        raise ImageError(f"image {reference}: the engine returned an image without that digest")
    return image


def labels_of(image: Any) -> dict[str, str]:
    """The runner's labels of an image (org.dl-bench.*), without the prefix."""
    labels = (image.attrs.get("Config") or {}).get("Labels") or {}
    return {k[len(LABEL) + 1:]: v for k, v in labels.items() if k.startswith(f"{LABEL}.")}


def pinned_metadata(image: Any, reference: str | None) -> dict[str, Any]:
    """What every record says about an image run as it is (by digest, or by id when a
    reproduction pins it): its id, the digest it was asked for, and the lock and flavour its
    labels name (an image not built by the runner has neither)."""
    labels = labels_of(image)
    meta: dict[str, Any] = {"image_id": image.id, "executor": "docker", "env_source": "image"}
    digests = image.attrs.get("RepoDigests") or []
    if reference and "@" in reference:
        meta["image_digest"] = reference
    elif digests:
        meta["image_digest"] = digests[0]
    if labels.get("lock-sha256"):
        meta["lock_sha256"] = labels["lock-sha256"]
    if labels.get("flavour"):
        meta["flavour"] = labels["flavour"]
    return meta

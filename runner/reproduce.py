"""The same environments on another VM, or months later: `export`, `import` and `reproduce`.

- `runner export MATRIX|RUN_DIR -o FILE`: the images a matrix needs (built when missing, pulled
  when named by digest), or exactly the images a finished run used, in one archive with a
  checksum (`environments.transfer`).
- `runner import FILE`: check the checksum, load the images, check their lock and recipe labels.
- `runner reproduce RUN_DIR`: run a finished run's recorded matrix again in the same
  environments — the same lock hashes (local), the same images (Docker: by the recorded digest,
  else by the recorded image id) — or refuse with one line saying which environment differs and
  how; then compare the new run against the original.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from . import matrix as matrix_mod, run
from .environments import Flavour, Source, folder_flavour, lock_path, lock_sha256
from .errors import EXIT_FAILED_CELLS, EXIT_OK, UsageError
from .results import compare
from .results.store import RESULTS_DIR, Store


def _docker_client() -> Any:
    from .environments.docker_engine import DockerUnavailable, connect

    try:
        return connect()
    except DockerUnavailable as exc:
        raise UsageError(str(exc)) from None


def is_run_folder(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


# --- export -----------------------------------------------------------------------------------

def export_only(source: Path, output: Path, opts: run.Options, console: Console) -> int:
    """`runner export`: one archive (docker save) and its checksum file."""
    from .environments import transfer

    if output.exists() and output.is_dir():
        raise UsageError(f"--output {output}: is a folder; give the archive's file name")
    if is_run_folder(source):
        client = _docker_client()
        try:
            wanted = images_of_run(client, source)
            return write_archive(client, wanted, output, console)
        finally:
            client.close()
    if opts.executor not in (None, "docker"):
        raise UsageError(f"export writes Docker images: it needs --executor docker, "
                         f"not {opts.executor}")
    opts.executor = "docker"
    matrix, setup = run.load_matrix(opts, console)
    try:
        plan = run.make_plan(matrix.cells, opts.only)
        sources = run.sources_to_prepare(plan)
        skipped = [s.python for s in sources if s.existing]
        if skipped:
            console.print(f"[yellow]! not exported (existing interpreters, no image): "
                          f"{escape(', '.join(skipped))}[/]", soft_wrap=True)
        sources = [s for s in sources if not s.existing]
        if not sources:
            raise UsageError(f"{matrix.path}: no environment of it runs from an image")
        prepared = run.prepare_environments(setup, sources, console)
        if any(p.error for p in prepared.values()):
            return EXIT_FAILED_CELLS
        client = setup.executor.client()
        wanted = [transfer.Exported(s.key, setup.executor.image(s.key)) for s in sources]
        return write_archive(client, wanted, output, console)
    finally:
        setup.close()


def images_of_run(client: Any, run_dir: Path) -> list[Any]:
    """Exactly the images a finished run used (by the image ids its records name)."""
    import docker.errors

    from .environments import transfer

    store, _ = compare.open_run(run_dir)
    used: dict[str, str] = {}
    for record in store.records():
        meta = record.get("metadata") or {}
        if meta.get("image_id"):
            used.setdefault(record["environment"], meta["image_id"])
    if not used:
        raise UsageError(f"{run_dir}: its cells ran in no image (a local run: its environments "
                         "are rebuilt from the locks, which reproduce checks by hash)")
    wanted = {}
    for environment, image_id in used.items():
        try:
            wanted.setdefault(image_id, transfer.Exported(environment, client.images.get(image_id)))
        except docker.errors.ImageNotFound:
            raise UsageError(f"{run_dir}: environment {environment}: image {image_id[:19]} is "
                             "not on this engine") from None
    return list(wanted.values())


def write_archive(client: Any, wanted: list[Any], output: Path, console: Console) -> int:
    from .environments import transfer

    index = transfer.export_images(client, wanted, output, lambda line: None)
    for entry in index["images"]:
        console.print(f"[green]✓[/] {escape(entry['key'])}: {entry['image_id'][:19]} "
                      f"{escape(' '.join(entry['tags']))}", soft_wrap=True)
    console.print(f"archive: {escape(str(output))} ({output.stat().st_size / 1e6:.0f} MB), "
                  f"checksum: {escape(str(transfer.checksum_path(output)))}", soft_wrap=True)
    return EXIT_OK


# --- import -----------------------------------------------------------------------------------

def import_only(archive: Path, console: Console) -> int:
    """`runner import`: exit 0 when every image loaded and matches this checkout's recipe, 1
    when some loaded image does not (reproduce can still run it by id), 2 for a bad archive."""
    from .environments import images, transfer

    def recipe_for(name: str, flavour: str) -> images.Recipe | None:
        try:
            return images.recipe(name, flavour)
        except images.ImageError:
            return None

    try:
        transfer.verify(archive)      # a damaged or missing file is told before the engine,
        transfer.read_index(archive)  # ... and so is a malformed index
        client = _docker_client()
        try:
            loaded = transfer.import_images(client, archive, lambda line: None, recipe_for)
        finally:
            client.close()
    except transfer.TransferError as exc:
        raise UsageError(str(exc)) from None
    for item in loaded:
        tags = " ".join(item.tags) or item.image_id[:19]
        if item.problems:
            console.print(f"[yellow]! {escape(item.key)}: loaded {escape(tags)}, but "
                          f"{escape('; '.join(item.problems))}[/]", soft_wrap=True)
        else:
            console.print(f"[green]✓[/] {escape(item.key)}: loaded {escape(tags)}; lock and "
                          "recipe labels match this checkout", soft_wrap=True)
    return EXIT_FAILED_CELLS if any(item.problems for item in loaded) else EXIT_OK


# --- reproduce --------------------------------------------------------------------------------

def reproducible(kind: Any) -> bool:
    """Whether a run of this executor kind can run again here: one whose cells ran on its
    host (a cluster's nodes built their own environments)."""
    from .executors.kinds import KINDS, executor_class

    return kind in KINDS[1:] and executor_class(kind).on_this_host


def recorded_environments(store: Store, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per environment, what its records say it ran in (the manifest when no record says)."""
    facts: dict[str, dict[str, Any]] = {}
    for record in store.records():
        if record.get("status") == "not_applicable":
            continue
        meta = record.get("metadata") or {}
        entry = facts.setdefault(record["environment"], {})
        for key in ("lock_sha256", "image_id", "image_digest", "env_source", "executor"):
            if meta.get(key) is not None:
                entry.setdefault(key, meta[key])
    for name, env in (manifest.get("environments") or {}).items():
        entry = facts.setdefault(name, {})
        for key in ("lock_sha256", "image_id", "image_digest", "env_source", "executor"):
            if env.get(key) is not None:
                entry.setdefault(key, env[key])
    return facts


def refuse(run_dir: Path, environment: str, what: str) -> UsageError:
    return UsageError(f"cannot reproduce {run_dir}: environment {environment}: {what}")


def use_recorded_environments(run_dir: Path, matrix: matrix_mod.Matrix, setup: run.Setup,
                              names: list[str], recorded: dict[str, dict[str, Any]],
                              console: Console) -> None:
    """Check every environment can be had exactly as recorded, the Docker ones made to run the
    recorded image; UsageError (one line) naming the first that cannot."""
    for name in names:
        env = matrix.spec.environments[name]
        source = Source.of(env.image, env.python)
        facts = recorded.get(name, {})
        executor = setup.executor_for(source)
        if source.existing:
            continue  # what it holds is recorded per cell; compare names any difference
        if not executor.runs_images:
            flavour = folder_flavour(setup.flavour, source.folder)
            lock = lock_path(source.folder, flavour)
            here = lock_sha256(source.folder, flavour)
            if facts.get("lock_sha256") and here != facts["lock_sha256"]:
                raise refuse(run_dir, name, f"images/{source.folder}/{lock.name} has sha256 "
                             f"{(here or 'none')[:12]}… here, the run used "
                             f"{facts['lock_sha256'][:12]}… (check out the commit that ran it)")
            continue
        use_recorded_image(run_dir, name, source, executor, facts, console)


def use_recorded_image(run_dir: Path, name: str, source: Source, executor: Any,
                       facts: dict[str, Any], console: Console) -> None:
    """Make the Docker executor run exactly the recorded image: by its digest when the run
    recorded one (pulled when missing), else by its id (an image kept or imported here)."""
    import docker.errors

    from .environments.docker_engine import DockerUnavailable

    image_id, digest = facts.get("image_id"), facts.get("image_digest")
    if not image_id and not source.by_digest:
        raise refuse(run_dir, name, "the run recorded no image id for it")
    try:
        client = executor.client()
    except DockerUnavailable as exc:
        raise refuse(run_dir, name, f"its image needs Docker: {exc}") from None

    def here(image: str | None) -> bool:
        try:
            return image is not None and client.images.get(image) is not None
        except docker.errors.ImageNotFound:
            return False

    if digest and "@" in digest and not source.by_digest:
        executor.run_exact_image(source.key, digest)
    elif not source.by_digest:
        if not here(image_id):
            raise refuse(run_dir, name, f"image {image_id[:19]} is not on this engine and the "
                         "run recorded no registry digest (runner import an archive of it from "
                         "runner export)")
        executor.run_exact_image(source.key, image_id)
    ready = executor.prepare(source, lambda line: None)
    if ready.error and digest and here(image_id):
        # No registry here, but the recorded image itself (an imported archive: a load brings
        # no repo digests). Its id is the digest of its content, the one the run's digest named.
        executor.run_exact_image(source.key, image_id, {"image_digest": digest})
        ready = executor.prepare(source, lambda line: None)
        console.print(f"environment {escape(name)}: {escape(digest)} cannot be pulled here; "
                      f"running the recorded image {image_id[:19]} kept on this engine",
                      soft_wrap=True)
    if ready.error:
        raise refuse(run_dir, name, ready.error)
    got = ready.metadata.get("image_id")
    if image_id and got != image_id:
        raise refuse(run_dir, name, f"{ready.uses} is image {str(got)[:19]} here, the run used "
                     f"{image_id[:19]}")


def reproduce(run_dir: Path, results_dir: Path | None, console: Console) -> int:
    """`runner reproduce RUN_DIR`: the recorded matrix, its cells, in the same environments;
    then the comparison against the original (RUN/compare-<original>.md)."""
    store, manifest = compare.open_run(run_dir)
    matrix_path = run_dir / "matrix.toml"
    if not matrix_path.is_file():
        raise UsageError(f"{run_dir}: no matrix.toml (the copy of what ran) in the run folder")
    executor = manifest.get("executor")
    if not reproducible(executor):
        raise UsageError(f"{run_dir}: reproduce runs local and docker runs again; this one "
                         f"used {executor!r}")
    flavour = Flavour(manifest.get("flavour") or "cpu", f"as recorded by {run_dir}")
    matrix = matrix_mod.load(matrix_path, manifest.get("profile"))
    # By name: a cell's id also holds the runner's version, which may differ here (compare then
    # says "not comparable: runner_version"); not-applicable ones included.
    recorded = {c.get("name") for c in manifest.get("cells", [])}
    planned = [c.id for c in matrix.cells if c.name in recorded]
    wanted = set(planned)
    cells = [c for c in matrix.cells if c.id in wanted and not c.not_applicable]
    if not cells:
        raise UsageError(f"{run_dir}: none of its cells is in its matrix.toml")
    setup = run.choose_setup(matrix, executor, flavour=flavour)
    try:
        names = list(dict.fromkeys(c.environment for c in cells))
        use_recorded_environments(run_dir, matrix, setup, names,
                                  recorded_environments(store, manifest), console)
        console.print(f"reproducing {escape(str(run_dir))}: {len(cells)} cells in "
                      f"{len(names)} environments, each as recorded", soft_wrap=True)
        opts = run.Options(matrix_path=matrix_path, only=planned,
                           results_dir=results_dir or RESULTS_DIR)
        with run.clocks_locked(matrix, setup, console):
            code = run.run_matrix(opts, matrix, setup, console)
    finally:
        setup.close()
    new_dir = opts.run_dir            # the folder this run made (never another's)
    new = Store(new_dir)
    new_manifest = new.read_manifest()
    new_manifest["reproduces"] = str(run_dir.resolve())
    new.write_manifest(new_manifest)
    compare.run_compare(run_dir, new_dir, None, compare.DEFAULT_ALPHA, None, console)
    return code

"""`runner reproduce RUN_DIR`: run a finished run's recorded matrix again in the same
environments — the same lock hashes (local), the same images (Docker: by the recorded digest,
else by the recorded image id) — or refuse with one line saying which environment differs and
how; then compare the new run against the original. (The images travel between machines with
`runner export` and `runner import`: commands/export.py, commands/import_.py.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from ..environments import Flavour, Source, folder_flavour, lock_of, stacks
from ..environments.venvs import sha256_file
from ..errors import UsageError, user_text
from ..paths import RESULTS_DIR
from ..results.analysis.comparison import DEFAULT_ALPHA
from ..results.data.store import Store, open_run
from ..results.render.compare import run_compare
from ..schema import matrix as matrix_mod
from ..run import manifest as manifest_mod, pipeline
from ..run.setup import Setup, choose_setup, resolve_stacks


def docker_client() -> Any:
    """A client of the Docker engine; UsageError (one line) when none answers."""
    from ..environments.docker_engine import DockerUnavailable, connect

    try:
        return connect()
    except DockerUnavailable as exc:
        raise UsageError(str(exc)) from None


def is_run_folder(path: Path) -> bool:
    return path.is_dir() and (path / "manifest.json").is_file()


def reproducible(kind: Any) -> bool:
    """Whether a run of this executor kind can run again here: one whose cells ran on its
    host (a cluster's nodes built their own environments)."""
    from ..executors import kinds

    return isinstance(kind, str) and kinds.registered(kind) and \
        kinds.executor_class(kind).on_this_host


def recorded_environments(store: Store, manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
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


def use_recorded_environments(run_dir: Path, matrix: matrix_mod.Matrix, setup: Setup,
                              names: list[str], recorded: dict[str, dict[str, Any]],
                              console: Console) -> None:
    """Check every environment can be had exactly as recorded, the Docker ones made to run the
    recorded image; UsageError (one line) naming the first that cannot."""
    use_recorded_stacks(run_dir, matrix, setup, names, console)
    for name in names:
        source = setup.environment_source(matrix, name)
        facts = recorded.get(name, {})
        executor = setup.executor_for(source)
        if source.existing:
            continue  # what it holds is recorded per cell; compare names any difference
        if not executor.runs_images:
            lock = lock_of(source, folder_flavour(setup.flavour, source.image_folder))
            here = sha256_file(lock) if lock.is_file() else None
            if facts.get("lock_sha256") and here != facts["lock_sha256"]:
                shown = lock if source.derived else f"images/{source.folder}/{lock.name}"
                raise refuse(run_dir, name, f"{shown} has sha256 {(here or 'none')[:12]}… here, "
                             f"the run used {facts['lock_sha256'][:12]}… (check out the commit "
                             "that ran it)")
            continue
        use_recorded_image(run_dir, name, source, executor, facts, console)


def use_recorded_stacks(run_dir: Path, matrix: matrix_mod.Matrix, setup: Setup,
                        names: list[str], console: Console) -> None:
    """The derived stacks exactly as the run folder keeps them (stacks/<environment>/), never
    resolved again: a refusal when the run kept none."""
    for name in names:
        env = matrix.spec.environments[name]
        if env.derived and env.image is not None:
            flavour = folder_flavour(setup.flavour, env.image)
            if not stacks.run_folder_lock(run_dir, name, flavour).is_file():
                raise refuse(run_dir, name, f"its derived stack's lock is not in the run folder "
                             f"({stacks.RUN_FOLDER}/{name}/)")
    resolve_stacks(setup, matrix, names, run_dir,
                   lambda line: console.print(user_text(line), soft_wrap=True))


def use_recorded_image(run_dir: Path, name: str, source: Source, executor: Any,
                       facts: dict[str, Any], console: Console) -> None:
    """Make the Docker executor run exactly the recorded image: by its digest when the run
    recorded one (pulled when missing), else by its id (an image kept or imported here)."""
    import docker.errors

    from ..environments.docker_engine import DockerUnavailable

    image_id: str = facts.get("image_id") or ""      # "": none recorded (a reference's run)
    digest = facts.get("image_digest")
    if not image_id and not source.by_digest:
        raise refuse(run_dir, name, "the run recorded no image id for it")
    try:
        client = executor.client()
    except DockerUnavailable as exc:
        raise refuse(run_dir, name, f"its image needs Docker: {exc}") from None

    def here(image: str | None) -> bool:
        try:
            return bool(image) and client.images.get(image) is not None
        except docker.errors.ImageNotFound:
            return False

    if digest and "@" in digest and not source.by_digest:
        executor.run_exact_image(source.key, digest)
    elif not source.by_digest:
        if not here(image_id):
            raise refuse(run_dir, name, f"image {image_id[:19]} is not on this engine and the "
                         "run recorded no registry digest (python -m runner import an archive "
                         "of it from python -m runner export)")
        executor.run_exact_image(source.key, image_id)
    ready = executor.prepare(source, lambda line: None)
    if ready.error and digest and here(image_id):
        # No registry here, but the recorded image itself (an imported archive: a load brings
        # no repo digests). Its id is the digest of its content, the one the run's digest named.
        executor.run_exact_image(source.key, image_id, {"image_digest": digest})
        ready = executor.prepare(source, lambda line: None)
        console.print(f"environment {user_text(name)}: {user_text(digest)} cannot be pulled here; "
                      f"running the recorded image {image_id[:19]} kept on this engine",
                      soft_wrap=True)
    if ready.error:
        raise refuse(run_dir, name, ready.error)
    got = ready.metadata.get("image_id")
    if image_id and got != image_id:
        raise refuse(run_dir, name, f"{ready.uses} is image {str(got)[:19]} here, the run used "
                     f"{image_id[:19]}")


def reproduce(run_dir: Path, results_dir: Path | None, console: Console) -> int:
    """The recorded matrix, its cells, in the same environments; then the comparison against
    the original (RUN/compare-<original>.md)."""
    store, manifest = open_run(run_dir)
    matrix, planned, cells = recorded_cells(run_dir, manifest)
    flavour = Flavour(manifest.get("flavour") or "cpu", f"as recorded by {run_dir}")
    setup = choose_setup(matrix, manifest.get("executor"), flavour=flavour)
    try:
        names = list(dict.fromkeys(c.environment for c in cells))
        use_recorded_environments(run_dir, matrix, setup, names,
                                  recorded_environments(store, manifest), console)
        console.print(f"reproducing {user_text(str(run_dir))}: {len(cells)} cells in "
                      f"{len(names)} environments, each as recorded", soft_wrap=True)
        opts = pipeline.Options(matrix_path=run_dir / "matrix.toml", only=planned,
                                results_dir=results_dir or RESULTS_DIR)
        state = pipeline.RunState(opts, console, pipeline.Decisions(matrix, setup))
        code = pipeline.execute((pipeline.lock_clocks, *pipeline.CELLS), state)
    finally:
        setup.close()
    new_dir = state.store.root          # the folder this run made (never another's)
    new = Store(new_dir)
    new_manifest = new.read_manifest()
    manifest_mod.add_reproduces(new_manifest, str(run_dir.resolve()))
    new.write_manifest(new_manifest)
    run_compare(run_dir, new_dir, None, DEFAULT_ALPHA, None, console)
    return code


def recorded_cells(run_dir: Path, manifest: Mapping[str, Any]) -> tuple[matrix_mod.Matrix,
                                                                      list[str], list[Any]]:
    """The run's own matrix.toml, the ids of its recorded cells (not-applicable ones included)
    and the cells to run; UsageError when the run cannot run again here."""
    matrix_path = run_dir / "matrix.toml"
    if not matrix_path.is_file():
        raise UsageError(f"{run_dir}: no matrix.toml (the copy of what ran) in the run folder")
    executor = manifest.get("executor")
    if not reproducible(executor):
        raise UsageError(f"{run_dir}: reproduce runs local and docker runs again; this one "
                         f"used {executor!r}")
    matrix = matrix_mod.load(matrix_path, manifest.get("profile"))
    # By name: a cell's id also holds its method version, which may differ here (compare then
    # says "not comparable: method_version"); not-applicable ones included.
    recorded = {c.get("name") for c in manifest.get("cells", [])}
    planned = [c.id for c in matrix.cells if c.name in recorded]
    wanted = set(planned)
    cells = [c for c in matrix.cells if c.id in wanted and not c.not_applicable]
    if not cells:
        raise UsageError(f"{run_dir}: none of its cells is in its matrix.toml")
    return matrix, planned, cells

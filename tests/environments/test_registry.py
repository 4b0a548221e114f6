"""Images across VMs against a real registry and the real engine: `build --push` records digests,
an environment named by digest is pulled (after being removed locally) and run as exactly that
image, `export`/`import` carry images through an archive with a checksum, and `reproduce` runs a
Docker run again in the recorded images (or refuses with one line).

The registry is Debian's `docker-registry` (a registry v2 server, installed by
.ci/docker-setup.sh) on a free loopback port: engines allow plain HTTP to 127.0.0.0/8 registries.
The engine is shared with other tests: only images made here are removed; the numpy image gets
the registry's tags for a while and loses them again.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
import subprocess
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from runner import cli
from runner.environments import images, transfer
from runner.results.data.ledger import Ledger
from tests.matrices import environment, matrix_text


pytestmark = [pytest.mark.slow, pytest.mark.docker]

MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json, "
                  "application/vnd.oci.image.manifest.v1+json")


def set_recorded_metadata(run_dir: Path, **values) -> None:
    """The run's records as another VM's run would have written them: changed, and their new
    digests in the ledger (as the runner there wrote it), so they are read as the run's own."""
    ledger = Ledger(run_dir)
    for path in (run_dir / "cells").glob("*.json"):
        changed = json.loads(path.read_text())
        changed["metadata"].update(values)
        text = json.dumps(changed)
        path.write_text(text)
        ledger.retire(f"cells/{path.name}", "written as another VM's run")
        ledger.note(f"cells/{path.name}", text.encode())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory, engine):
    """HOST:PORT of a registry v2 server on loopback, stopped (and its tags removed from the
    engine's images) afterwards."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("no registry v2 server: apt-get install docker-registry "
                    "(.ci/docker-setup.sh installs it)")
    root = tmp_path_factory.mktemp("registry")
    address = f"127.0.0.1:{free_port()}"
    config = root / "config.yml"
    config.write_text(textwrap.dedent(f"""\
        version: 0.1
        log:
          level: warn
        storage:
          filesystem:
            rootdirectory: {root / 'data'}
        http:
          addr: {address}
          secret: dl-bench-tests
        """), encoding="utf-8")
    with (root / "registry.log").open("w") as log:
        server = subprocess.Popen([binary, "serve", str(config)], stdout=log,
                                  stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log_text = (root / "registry.log").read_text()
                    pytest.fail(f"the registry did not start: {log_text}")
                time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=30)
        forget_registry(engine, address)


def forget_registry(client, address: str) -> None:
    """Remove the registry's tags and digests from every image (the images themselves stay)."""
    for image in client.images.list():
        names = list(image.tags) + list(image.attrs.get("RepoDigests") or [])
        for name in names:
            if name.startswith(f"{address}/"):
                try:
                    client.images.remove(name)
                except Exception:  # gone already
                    pass


def registry_has(address: str, reference: str) -> bool:
    repository, digest = reference[len(address) + 1:].rsplit("@", 1)
    request = urllib.request.Request(f"http://{address}/v2/{repository}/manifests/{digest}",
                                     headers={"Accept": MANIFEST_TYPES}, method="HEAD")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status == 200


def numpy_matrix(tmp_path: Path, image: str = "numpy", name: str = "registry") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(matrix_text(
        name, steps=4, timeout=120, environments={"numpy": environment("numpy", image=image)},
        benchmarks=[{"workload": "matmul", "environments": ["numpy"], "size": "tiny"}]),
        encoding="utf-8")
    return path


def records_of(run_dir: Path) -> dict[str, dict]:
    found = (json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json"))
    return {f"{r['cell_id']}-r{r['repeat']}": r for r in found}


def only_run(results: Path, name: str, but: tuple[Path, ...] = ()) -> Path:
    [run_dir] = [p for p in (results / name).iterdir() if p.is_dir() and p not in but]
    return run_dir


def test_build_push_records_digests_and_reproduce_runs_them(engine, numpy_image, registry,
                                                            base_env, tmp_path, capsys):
    rec, image = numpy_image
    matrix, results = numpy_matrix(tmp_path), tmp_path / "results"
    try:
        assert cli.main(["build", str(matrix), "--push", registry,
                         "--results-dir", str(results)]) == 0
        pushed = json.loads((results / "registry" / "images.json").read_text())
        entry = pushed["environments"]["numpy"]
        assert entry["image"].startswith(f"{registry}/dl-bench/numpy@sha256:")
        assert entry["image_id"] == image.id and entry["lock_sha256"] == rec.lock_sha256
        assert registry_has(registry, entry["image"])
        assert f"pushed numpy: {entry['image']}" in capsys.readouterr().out

        # A run after the push records the digest; reproduce runs that digest again.
        assert cli.main([str(matrix), "--executor", "docker", "--results-dir", str(results)]) == 0
        original = only_run(results, "registry")
        [record] = records_of(original).values()
        assert record["metadata"]["image_digest"] == entry["image"]
        assert cli.main(["reproduce", str(original), "--results-dir", str(results)]) == 0
        again = only_run(results, "registry", but=(original,))
        assert records_of(again).keys() == records_of(original).keys()
        [redone] = records_of(again).values()
        assert redone["status"] == "ok"
        assert redone["metadata"]["image_digest"] == entry["image"]
        assert redone["metadata"]["image_id"] == image.id
        assert "| numpy | same stack |" in (again / f"compare-{original.name}.md").read_text()
        capsys.readouterr()

        # On a VM that cannot reach the registry but holds the image (imported from an archive,
        # which brings no repo digests): the recorded image runs, by its id, and says so.
        offline = tmp_path / "offline" / "registry" / original.name
        shutil.copytree(original, offline)
        unreachable = f"127.0.0.1:{free_port()}/dl-bench/numpy@{entry['image'].split('@')[1]}"
        set_recorded_metadata(offline, image_digest=unreachable)
        assert cli.main(["reproduce", str(offline), "--results-dir", str(tmp_path / "r2")]) == 0
        out = capsys.readouterr().out
        assert (f"environment numpy: {unreachable} cannot be pulled here; running the recorded "
                f"image {image.id[:19]} kept on this engine") in out
        [kept] = records_of(only_run(tmp_path / "r2", "registry")).values()
        assert kept["status"] == "ok" and kept["metadata"]["image_id"] == image.id
        assert kept["metadata"]["image_digest"] == unreachable
    finally:
        forget_registry(engine, registry)


OTHER_LOCK = "e" * 64


def test_an_image_named_by_digest_is_pulled_and_run_exactly(engine, numpy_image, registry,
                                                            tmp_path, capsys):
    """An image of its own (the numpy image plus one empty layer, labelled with another lock),
    so that removing it locally takes nothing from the other tests: pushed, removed, run by
    digest; then exported, removed again and imported."""
    import docker.errors

    rec, image = numpy_image
    container = engine.containers.create(image.id, ["true"], network_mode="none")
    try:
        copy = container.commit(repository="dl-bench-test/numpy-copy", tag=str(time.time_ns()),
                                changes=[f"LABEL {images.LABEL}.lock-sha256={OTHER_LOCK}"])
    finally:
        container.remove(force=True)
    copy_rec = dataclasses.replace(rec, name="numpy-copy")
    try:
        reference = images.push(engine, copy, copy_rec, registry, lambda line: None)
        engine.images.remove(copy.id, force=True)
        with pytest.raises(docker.errors.ImageNotFound):
            engine.images.get(copy.id)

        results = tmp_path / "results"
        # executor auto → local here (no GPU): the digest environment still runs in Docker.
        matrix = numpy_matrix(tmp_path, reference, "by-digest")
        assert cli.main([str(matrix), "--results-dir", str(results)]) == 0
        [record] = records_of(only_run(results, "by-digest")).values()
        assert record["status"] == "ok", record["error"]
        meta = record["metadata"]
        assert meta["image_digest"] == reference
        assert meta["image_id"] == copy.id == engine.images.get(reference).id
        assert meta["lock_sha256"] == OTHER_LOCK              # from the image's labels
        assert meta["executor"] == "docker" and meta["host_in_container"] is True

        # The images a matrix needs, to an archive; on an engine without the image, import loads
        # it and says that its lock is not this checkout's (exit 1).
        archive = tmp_path / "matrix-images.tar"
        assert cli.main(["export", str(matrix), "-o", str(archive)]) == 0
        engine.images.remove(copy.id, force=True)
        capsys.readouterr()
        assert cli.main(["import", str(archive)]) == 1
        out = capsys.readouterr().out
        assert engine.images.get(copy.id).labels[f"{images.LABEL}.lock-sha256"] == OTHER_LOCK
        assert (f"! {reference}: loaded {copy.id[:19]}, but lock sha256 {OTHER_LOCK[:12]}… "
                f"in the image, {rec.lock_sha256[:12]}… in images/numpy/requirements.lock "
                "here") in out
        archive.unlink()
    finally:
        try:
            engine.images.remove(copy.id, force=True)
        except docker.errors.DockerException:
            pass

    # A digest no registry answers for: the environment fails its cells, saying why.
    missing = f"127.0.0.1:{free_port()}/dl-bench/numpy@sha256:{'0' * 64}"
    code = cli.main([str(numpy_matrix(tmp_path, missing, "unreachable")),
                     "--results-dir", str(results)])
    assert code == 1
    [record] = records_of(only_run(results, "unreachable")).values()
    assert record["status"] == "failed"
    assert record["error"].startswith(f"image {missing}: pull failed")


def test_export_import_and_reproduce_from_an_archive(engine, numpy_image, base_env,
                                                     tmp_path, capsys):
    rec, image = numpy_image
    results = tmp_path / "results"
    matrix = numpy_matrix(tmp_path, name="archived")
    assert cli.main([str(matrix), "--executor", "docker", "--results-dir", str(results)]) == 0
    original = only_run(results, "archived")
    [record] = records_of(original).values()
    assert record["metadata"]["image_id"] == image.id

    archive = tmp_path / "transfer" / "images.tar"
    assert cli.main(["export", str(original), "-o", str(archive)]) == 0
    checksum = transfer.checksum_path(archive)
    check = subprocess.run(["sha256sum", "-c", checksum.name], cwd=archive.parent,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    capsys.readouterr()

    # One byte damaged in transit: refused before anything is loaded.
    with archive.open("r+b") as handle:
        handle.seek(archive.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))
    assert cli.main(["import", str(archive)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {archive}: sha256 ") and err.endswith("the copy is damaged")
    with archive.open("r+b") as handle:
        handle.seek(archive.stat().st_size // 2)
        handle.write(byte)

    assert cli.main(["import", str(archive)]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("✓ numpy: loaded ") and rec.tag in line
               and line.endswith("lock and recipe labels match this checkout")
               for line in out.splitlines()), out
    assert engine.images.get(rec.tag).id == image.id

    assert cli.main(["reproduce", str(original), "--results-dir", str(results)]) == 0
    again = only_run(results, "archived", but=(original,))
    [redone] = records_of(again).values()
    assert redone["cell_id"] == record["cell_id"] and redone["status"] == "ok"
    assert redone["metadata"]["image_id"] == image.id
    archive.unlink()                   # half a gigabyte: not kept with pytest's temporary folders
    capsys.readouterr()

    # A run whose image is neither here nor in a registry: refused, one line, nothing written.
    gone = tmp_path / "gone" / "archived" / original.name
    shutil.copytree(original, gone)
    set_recorded_metadata(gone, image_id="sha256:" + "0" * 64)
    before = sorted((results / "archived").iterdir())
    assert cli.main(["reproduce", str(gone), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: cannot reproduce {gone}: environment numpy: image "
                   f"sha256:{'0' * 12} is not on this engine and the run recorded no registry "
                   "digest (python -m runner import an archive of it from python -m runner "
                   "export)"]
    assert sorted((results / "archived").iterdir()) == before

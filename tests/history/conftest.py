"""The history's databases for the tests: a fresh SQLite file, and a fresh database on a real
PostgreSQL server that these fixtures start on a loopback port (Debian's postgresql package:
initdb into a temporary folder, run as the postgres user when the tests run as root, since the
server refuses root). The same test bodies run against both."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.fixtures import FIXTURE_RUNS  # noqa: F401 (the history tests' runs)



def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@pytest.fixture(scope="session")
def postgres_server():
    """(host, port, user) of a PostgreSQL server started for this test session."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.skip("no PostgreSQL server binaries (bash .ci/history-setup.sh installs Debian's "
                    "postgresql)")
    bindir = Path(found[-1]).parent
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to run the server as")
    # Not under pytest's temporary folder: that one is private to its owner (root), and the
    # server's user must reach its data folder.
    root = Path(tempfile.mkdtemp(prefix="dl-bench-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    port = _free_port()
    made = subprocess.run(_as_server_user([str(bindir / "initdb"), "-D", str(data), "-U", "bench",
                                           "--auth=trust", "-E", "UTF8", "--no-sync"]),
                          capture_output=True, text=True)
    if made.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"initdb failed: {made.stderr.strip()}")
    log = root / "server.log"
    started = subprocess.run(_as_server_user([
        str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o",
        f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"]) + ["start"],
        capture_output=True, text=True)
    if started.returncode != 0:
        text = log.read_text() if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"pg_ctl start failed: {started.stderr}\n{text}")
    try:
        yield "127.0.0.1", port, "bench"
    finally:
        subprocess.run(_as_server_user([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast",
                                        "-w", "stop"]), capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


_databases = itertools.count()


def _postgres_database(server) -> str:
    from sqlalchemy import create_engine, text

    host, port, user = server
    name = f"history_{os.getpid()}_{next(_databases)}"
    admin = create_engine(f"postgresql+psycopg://{user}@{host}:{port}/postgres",
                          isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return f"postgresql://{user}@{host}:{port}/{name}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def history_url(request, tmp_path):
    """A URL of an empty history database: SQLite, then PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    return _postgres_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def history(history_url, capsys, monkeypatch):
    """history(*args) -> (exit code, stdout, stderr) of `runner history ARGS --db URL`."""
    from runner import cli

    monkeypatch.delenv("DL_BENCH_HISTORY_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "240")

    def run(*args) -> tuple[int, str, str]:
        argv = ["history", *map(str, args), "--db", history_url]
        code = cli.main(argv)
        out, err = capsys.readouterr()
        return code, out, err

    return run

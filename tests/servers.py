"""Real servers on loopback for the tests: a throwaway PostgreSQL cluster and a Chroma server.

``postgres_server`` starts one cluster per test session (``initdb`` + ``pg_ctl`` as the postgres
user, on a free loopback port), or uses the server named by ``TEST_POSTGRES_URL`` (a URL whose
user may create databases); ``postgres_url`` gives each test a fresh database on it.
``chroma_url`` runs ``chroma run`` (the CLI that ships with chromadb) for the session.

Without the server binaries these tests are skipped on a developer's machine, and fail with a
clear message in CI (``CI=true``), where they must run.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip locally; fail in CI, where the scale-out tests must run."""
    if IN_CI:
        pytest.fail(f"{reason} (CI must provide it: see .ci/run)", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pg_bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


class PgCluster:
    """A throwaway PostgreSQL cluster in a temp folder, reachable on 127.0.0.1 with trust auth
    as user ``bottown``; it can be stopped and started again (a database that goes away)."""

    def __init__(self) -> None:
        bindir = pg_bindir()
        if bindir is None:
            unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found")
            raise AssertionError("unreachable")
        self.bindir = bindir
        self.run_as: list[str] = []
        # not under pytest's private temp folder: the postgres user must be able to reach it
        self.folder = Path(tempfile.mkdtemp(prefix="bottown-pg-"))
        if os.geteuid() == 0:  # initdb refuses to run as root
            runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin")
            no_user = subprocess.run(["id", "postgres"], capture_output=True).returncode != 0
            if runuser is None or no_user:
                unavailable("running as root and there is no 'postgres' user to run initdb as")
            shutil.chown(self.folder, "postgres")
            self.run_as = [str(runuser), "-u", "postgres", "--"]
        self.data = self.folder / "data"
        self.port = free_port()
        self._pg(
            "initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "bottown",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self.start()

    def _pg(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            [*self.run_as, str(self.bindir / tool), *args], capture_output=True, text=True
        )
        if done.returncode:
            log = self.folder / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stderr.strip()}\n{tail}")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://bottown@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = (
            f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c max_connections=300 -c fsync=off"
        )
        self._pg(
            "pg_ctl",
            "-D",
            str(self.data),
            "-w",
            "-l",
            str(self.folder / "log"),
            "-o",
            options,
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def destroy(self) -> None:
        subprocess.run(
            [
                *self.run_as,
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def create_database(server_url: str) -> str:
    """A new, empty database on the server; its URL."""
    name = f"t_{uuid4().hex[:12]}"
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def drop_database(server_url: str, url: str) -> None:
    name = make_url(url).database
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server whose user may create databases."""
    given = os.environ.get("TEST_POSTGRES_URL")
    if given:
        try:
            engine = create_engine(given)
            with engine.connect() as conn:
                conn.execute(text("select 1"))
            engine.dispose()
        except Exception as exc:
            pytest.fail(f"TEST_POSTGRES_URL is set but unusable: {exc}", pytrace=False)
        yield given
        return
    cluster = PgCluster()
    try:
        yield cluster.url
    finally:
        cluster.destroy()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh database for one test, dropped afterwards."""
    url = create_database(postgres_server)
    yield url
    drop_database(postgres_server, url)


def chroma_cli() -> Path | None:
    beside = Path(sys.executable).parent / "chroma"
    if beside.exists():
        return beside
    found = shutil.which("chroma")
    return Path(found) if found else None


class ChromaServer:
    """``chroma run`` on a loopback port, with its data in a temp folder."""

    def __init__(self, port: int | None = None) -> None:
        cli = chroma_cli()
        if cli is None:
            unavailable("the chroma CLI (shipped with chromadb) was not found")
            raise AssertionError("unreachable")
        self.port = port or free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="bottown-chroma-"))
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        self.proc = subprocess.Popen(
            [
                str(cli),
                "run",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--path",
                str(self.folder / "db"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=(self.folder / "log").open("wb"),
            env=env,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chroma run exited: {(self.folder / 'log').read_text()[-2000:]}"
                )
            try:
                with _direct.open(f"{self.url}/api/v2/heartbeat", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("chroma run did not answer within 30 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def chroma_url() -> Iterator[str]:
    """A Chroma server on loopback for the session (give each test its own chroma_namespace)."""
    server = ChromaServer()
    try:
        yield server.url
    finally:
        server.stop()

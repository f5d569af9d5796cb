"""A throwaway PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` in a temp dir.

The server listens on 127.0.0.1 on a free port, with its unix socket inside the temp
dir, password (scram) authentication over TCP and the superuser password
:data:`PG_PASSWORD`. ``initdb`` refuses to run as root, so when the tests run as root
the server programs run as the ``postgres`` system user (``runuser``), which then owns
the data directory.

When the binaries are missing the Postgres tests skip with the reason, unless
``AGENTGRAPH_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) turns that into a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings

PG_PREFERRED_MAJOR = "15"
PG_SYSTEM_USER = "postgres"
PG_SUPERUSER = "postgres"
PG_PASSWORD = "pg-test-Secret-4711"
PG_START_TIMEOUT_S = 60
PG_COMMAND_TIMEOUT_S = 120
REQUIRE_ENV = "AGENTGRAPH_REQUIRE_POSTGRES"


class PostgresUnavailable(Exception):
    """The server programs are missing or the server could not start."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None."""
    candidates = [f"/usr/lib/postgresql/{PG_PREFERRED_MAJOR}/bin"]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(out.stdout.strip())
    for name in ("initdb",):
        found = shutil.which(name)
        if found:
            candidates.append(str(Path(found).parent))
    for candidate in candidates:
        path = Path(candidate)
        if (path / "initdb").is_file() and (path / "pg_ctl").is_file():
            return path
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PostgresServer:
    """A running throwaway server."""

    bindir: Path
    root: Path
    port: int
    as_user: str | None
    # More ``-c name=value`` server settings (the storage benchmark's autovacuum pace);
    # pg_ctl passes them through a shell, so values hold no spaces or shell characters.
    settings: tuple[str, ...] = ()

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def url(self, dbname: str = "postgres", password: str = PG_PASSWORD) -> str:
        """A ``postgresql://`` URL for ``dbname`` over TCP."""
        return f"postgresql://{PG_SUPERUSER}:{password}@127.0.0.1:{self.port}/{dbname}"

    def _run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.as_user:
            runuser = shutil.which("runuser") or "runuser"
            cmd = [runuser, "-u", self.as_user, "--", *cmd]
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=PG_COMMAND_TIMEOUT_S,
            cwd=self.root,
            env={"PATH": os.defpath, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
        )

    def start(self) -> None:
        """``initdb`` then ``pg_ctl start``; raises PostgresUnavailable with the log."""
        self.socket_dir.mkdir()
        pwfile = self.root / "pwfile"
        pwfile.write_text(PG_PASSWORD + "\n")
        if self.as_user:
            entry = pwd.getpwnam(self.as_user)
            for path in (self.root, self.socket_dir, pwfile):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        init = self._run(
            [
                "initdb",
                "-D",
                str(self.data_dir),
                "-U",
                PG_SUPERUSER,
                "--pwfile",
                str(pwfile),
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ]
        )
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
        options = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        ) + "".join(f" -c {setting}" for setting in self.settings)
        started = self._run(
            [
                "pg_ctl",
                "-D",
                str(self.data_dir),
                "-o",
                options,
                "-l",
                str(self.log_file),
                "-w",
                "-t",
                str(PG_START_TIMEOUT_S),
                "start",
            ]
        )
        if started.returncode != 0:
            log = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
            raise PostgresUnavailable(
                f"pg_ctl start failed: {started.stderr.strip()[-300:]} {log[-500:]}"
            )

    def stop(self) -> None:
        """Stop the server (immediately: the data is thrown away)."""
        if (self.data_dir / "postmaster.pid").exists():
            self._run(["pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"])

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _system_user() -> str | None:
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError as exc:
        raise PostgresUnavailable(
            f"running as root and there is no {PG_SYSTEM_USER!r} user to run initdb as"
        ) from exc
    if shutil.which("runuser") is None:
        raise PostgresUnavailable("running as root and `runuser` is missing")
    return PG_SYSTEM_USER


@contextlib.contextmanager
def running_postgres(settings: tuple[str, ...] = ()) -> Iterator[PostgresServer]:
    """Start a server for the duration of the block (``settings``: more ``name=value``).

    Raises:
        PostgresUnavailable: binaries missing or the server did not start.
    """
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "PostgreSQL server programs (initdb, pg_ctl) not found; install the "
            "`postgresql` package"
        )
    as_user = _system_user()
    # Not under pytest's tmp dirs: those are 0700 root-owned, unreachable for `postgres`.
    root = Path(tempfile.mkdtemp(prefix="agentgraph-pg-"))
    server = PostgresServer(
        bindir=bindir, root=root, port=_free_port(), as_user=as_user, settings=settings
    )
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def unavailable(reason: str) -> None:
    """Skip, or fail when CI requires Postgres."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but PostgreSQL is unavailable: {reason}")
    pytest.skip(f"PostgreSQL unavailable: {reason}")


# --- fixtures (imported into tests/conftest.py) ----------------------------------------

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One throwaway PostgreSQL 15 server for the whole test session."""
    try:
        with running_postgres() as server:
            yield server
    except PostgresUnavailable as exc:
        unavailable(str(exc))


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of a fresh, empty database on the test server."""
    return postgres_server.create_database()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """``"sqlite"`` or ``"postgres"``: tests using it run against both stores."""
    return str(request.param)


@pytest.fixture
def make_backend_settings(
    backend: str, make_settings: Callable[..., Settings], request: pytest.FixtureRequest
) -> Callable[..., Settings]:
    """Like ``make_settings``, with the store on the parametrized backend."""
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else None

    def make(**env: Any) -> Settings:
        if url is not None:
            env.setdefault("AGENTGRAPH_DATABASE_URL", url)
        return make_settings(**env)

    return make


@pytest.fixture
def backend_settings(make_backend_settings: Callable[..., Settings]) -> Settings:
    """Default test settings on the parametrized backend."""
    return make_backend_settings()

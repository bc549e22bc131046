"""A real PostgreSQL server for the tests, from Debian's ``postgresql`` package (.ci/run installs it):
a cluster of its own in a temporary folder, on a free loopback port, with trust authentication for
its one user, and a fresh database for each test that asks (``database()``).

As root (CI, these machines) the server runs as the ``postgres`` user the package creates, since
PostgreSQL refuses to run as root. Where the binaries are missing the tests are skipped, unless
ARL_REQUIRE_POSTGRES is set (.ci/run sets it): then they fail.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from typing import Optional

import pytest

USER = "arl"
START_TIMEOUT_S = 60


def _bindir() -> Optional[str]:
    """Debian's newest server binaries, else the folder of an initdb on PATH with pg_ctl beside it."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if candidates:
        return os.path.dirname(candidates[-1])
    found = shutil.which("initdb")
    return os.path.dirname(found) if found and os.path.isfile(os.path.join(os.path.dirname(found), "pg_ctl")) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self) -> None:
        bindir = _bindir()
        if bindir is None:
            message = "PostgreSQL's server binaries (Debian's postgresql package) are not installed"
            if os.environ.get("ARL_REQUIRE_POSTGRES"):
                pytest.fail(message + "; .ci/run installs them")
            pytest.skip(message)
        self.bindir = bindir
        self.root = tempfile.mkdtemp(prefix="arl-postgres-")
        self.data = os.path.join(self.root, "data")
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb and postgres refuse root
            owner = pwd.getpwnam("postgres")
            os.chmod(self.root, 0o755)
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", self.data, "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync")
        options = f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "server.log"), "-w", "-t", str(START_TIMEOUT_S),
                  "-o", options, "start")

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run([*self._as, os.path.join(self.bindir, tool), *args], capture_output=True, text=True,
                                timeout=START_TIMEOUT_S + 30, cwd=self.root)
        if result.returncode != 0:
            log = os.path.join(self.root, "server.log")
            tail = open(log).read()[-2000:] if os.path.isfile(log) else ""
            raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr.strip()} {tail}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg2

        name = f"t_{uuid.uuid4().hex[:12]}"
        conn = psycopg2.connect(self.url(), connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {name}")
        finally:
            conn.close()
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "30", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

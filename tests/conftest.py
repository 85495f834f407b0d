"""Test infrastructure: real PostgreSQL + pgvector, real Redis, a real Celery worker.

A session fixture starts the embedded servers on free ports in a temporary directory and points
Django, the cache and Celery at them before the test database is created. Nothing is mocked.

The configuration is the one `make run` ships: the tests connect as the unprivileged
application role ``contexts_app`` with its password, the migrations run as ``contexts_owner``
(``manage.py migrate``, contexts/stack/owner_db.py), and Redis wants its password too.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contexts.stack.db_roles import APPLICATION_GROUP
from contexts.stack.servers import (
    PG_APP_ROLE,
    PG_OWNER_ROLE,
    EmbeddedPostgres,
    EmbeddedRedis,
    free_port,
)

ROOT = Path(__file__).resolve().parent.parent
TEST_DB_NAME = "test_contexts"


class Services:
    def __init__(self, root: Path) -> None:
        self.root = root
        # Thrown away after the session: no fsync (its data survives a killed server, which
        # the fault tests need, not a crashed machine, which nothing here needs).
        self.postgres = EmbeddedPostgres(root, free_port(), durable=False)
        self.redis = EmbeddedRedis(root, free_port())

    @property
    def test_database_url(self) -> str:
        return self.postgres.url_for(PG_APP_ROLE, TEST_DB_NAME)

    @property
    def test_database_owner_url(self) -> str:
        return self.postgres.url_for(PG_OWNER_ROLE, TEST_DB_NAME)

    def env(self) -> dict[str, str]:
        """Environment for a child process (worker, CLI) that must use the test database."""
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "contexts.settings",
            "DATABASE_URL": self.test_database_url,
            "REDIS_URL": self.redis.url,
            "CONTEXTS_VAR_DIR": str(self.root / "var"),
            "PYTHONPATH": str(ROOT),
        }


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LongestModulesFirst(), "longest-modules-first")
    from django.conf import settings

    from contexts import config as configuration
    from contexts.kernel import local_secrets

    # pytest-django read the settings before this hook, and reading them generates nothing: do
    # what a process's start does (contexts/kernel/local_secrets.py) and read the key it keeps
    # in the var dir, as `make run` would (a fresh clone has none yet).
    local_secrets.prepare()
    if not configuration.environment()("SECRET_KEY"):
        settings.SECRET_KEY = local_secrets.read(
            Path(settings.VAR_DIR) / local_secrets.SECRET_KEY_FILE)

    # Tests render templates without running collectstatic first.
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    settings.WHITENOISE_AUTOREFRESH = True
    # PBKDF2's deliberate slowness buys nothing in tests and costs seconds per user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Until the session's servers are up, point at a port nothing listens on: a test that
    # touched a developer's `make run` Redis would pass here and fail on a clean machine.
    settings.CACHES["default"]["LOCATION"] = "redis://127.0.0.1:9/0"
    # The `manage.py` and `runstack` processes tests start neither read nor overwrite the
    # developer's var/run-settings.json (contexts/stack/runsettings.py); a test that wants one names
    # its own file.
    os.environ["CONTEXTS_RUN_SETTINGS"] = "off"


# What makes a test touch the session's servers: the database (directly or through any fixture
# that needs it), the embedded PostgreSQL/Redis themselves, a worker or a live server.
SERVER_FIXTURES = frozenset({
    "db", "transactional_db", "django_db_setup", "django_db_reset_sequences",
    "django_db_serialized_rollback", "services", "celery_worker", "live_server",
})
# Fixtures that start a process loading torch and the model (the query encoder's child): each
# test using one costs seconds to tens of seconds, so it is ``slow`` (``make test`` only).
PROCESS_FIXTURES = frozenset({"process_mode"})
# Per-test timeouts (pytest-timeout; the default is pyproject's ``timeout``). A test's time
# includes the set-up of the session fixtures it is the first to use (servers, migrations).
SLOW_TIMEOUT = 900


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the database-free tests ``unit`` (``pytest -m unit`` starts no server) and the tests
    that start an encoder child ``slow``; give slow and browser tests a larger timeout.

    A test is database-free when neither it nor any fixture it uses needs the database or the
    servers — decided from the fixture closure, so a new test is classified by what it uses,
    not by a list to keep up to date."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("django_db") is None and not SERVER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.unit)
        if PROCESS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        if (item.get_closest_marker("slow") or item.get_closest_marker("browser")) and \
                item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


class LongestModulesFirst:
    """A second collection hook, run after pytest-django's (which moves transactional tests —
    the golden gate among them — to the end of the run)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items[:] = longest_modules_first(items)


# The modules that take longest (seconds of one worker in a fresh clone's make test at 7f536b9,
# alone on a quiet machine): the control-character sweeps ~500, the golden gate with the agent
# cases ~180 (it embedded the repository for ~600 more before tests/golden/vectors.npz), the
# worker-kill tests ~200 and ~150, the node simulation ~110. xdist hands out whole files in the
# order collected (make's --no-loadscope-reorder), so these start first and the run does not end
# waiting on one of them started last. Only the order depends on this list, never a result.
LONGEST_MODULES = (
    "tests/security/test_redteam_5_nul_ids.py",
    "tests/evaluation/test_golden.py",
    "tests/ingestion/test_jobs_worker.py",
    "tests/security/test_redteam_4_worker_death.py",
    "tests/operations/test_simulate_nodes.py",
)


def longest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The items reordered by module: the :data:`LONGEST_MODULES` in their order, then the
    modules holding a slow or browser test (they start processes), then the rest, each group in
    collection order; a module's own items keep theirs (its fixtures are built once)."""
    heavy = {item.nodeid.split("::")[0] for item in items
             if item.get_closest_marker("slow") or item.get_closest_marker("browser")}

    def rank(module: str) -> int:
        if module in LONGEST_MODULES:
            return LONGEST_MODULES.index(module)
        return len(LONGEST_MODULES) + (module not in heavy)

    order = {module: i for i, module in enumerate(dict.fromkeys(
        item.nodeid.split("::")[0] for item in items))}
    return sorted(items, key=lambda item: (rank(item.nodeid.split("::")[0]),
                                           order[item.nodeid.split("::")[0]]))


# Texts the suite embeds over and over (the same fixture worlds in hundreds of tests): each
# distinct text goes through the model once per session and per model (tests/api, domain and
# console: 96 → 55 CPU-seconds), and the golden corpus's not at all while tests/golden/vectors.npz
# still holds them (tests/embedding_memo.py). Not in a child process (the query encoder's); a test
# that replaces Embedder.encode replaces this too.
@pytest.fixture(scope="session", autouse=True)
def _embed_each_text_once() -> Iterator[None]:
    from contexts.embedding.embedder import Embedder
    from tests import embedding_memo

    original = Embedder.encode
    record = embedding_memo.record_path()
    # Recording embeds everything again: a snapshot is never made from another snapshot.
    memo = embedding_memo.Memo(None if record else embedding_memo.Snapshot(
        embedding_memo.SNAPSHOT))

    def encode(self: Embedder, texts, *, threads: int | None = None):
        return memo.encode(f"{self.spec.name}@{self.spec.version}", list(texts),
                           lambda batch: original(self, batch, threads=threads))

    Embedder.encode = encode
    try:
        yield
    finally:
        Embedder.encode = original
        if record:
            print(f"\n{memo.record(record)} vectors recorded in {record}")


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    root = Path(tempfile.mkdtemp(prefix="contexts-test-"))
    stack = Services(root)
    stack.postgres.start()
    # Created by the server's superuser with pgvector in it, as `make run` creates its own:
    # the owner may not create the extension, the application role not even a database.
    stack.postgres.ensure_database(TEST_DB_NAME)
    stack.redis.start()
    try:
        yield stack
    finally:
        stack.redis.stop()
        stack.postgres.stop(mode="immediate")  # no shutdown checkpoint: deleted next
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(services: Services) -> None:
    """Point Django, its cache and Celery at the session's servers (before the test DB exists).

    Mutating the settings dicts in place also updates connection objects that already hold
    them, so nothing can keep talking to another server.
    """
    from django.conf import settings

    from contexts.celery import app

    db = settings.DATABASES["default"]
    db.update({"HOST": "127.0.0.1", "PORT": services.postgres.port, "USER": PG_APP_ROLE,
               "NAME": "contexts", "PASSWORD": services.postgres.password(PG_APP_ROLE)})
    db.setdefault("TEST", {})["NAME"] = TEST_DB_NAME
    # manage.py migrate (which creates the test database's schema) runs as the owner.
    settings.DATABASE_OWNER = {"USER": PG_OWNER_ROLE,
                               "PASSWORD": services.postgres.password(PG_OWNER_ROLE)}
    settings.CACHES["default"]["LOCATION"] = services.redis.url
    # The product bounds a Redis reply at 0.5 s (a blackholed Redis must not hold a worker);
    # on a machine running the suite's parallel workers and model children a live Redis can be
    # that slow, and a reply counted as "down" lifts the throttles a test is checking. Tests of
    # a Redis that is down stop a real one, which refuses at once.
    settings.CACHES["default"]["OPTIONS"] = {**settings.CACHES["default"].get("OPTIONS", {}),
                                             "socket_timeout": 5, "socket_connect_timeout": 5}
    # A cache client created earlier (at import, or by a test without the database) copied
    # the old location; drop it so the next use connects to the session's Redis.
    from django.core.cache import caches

    if hasattr(caches._connections, "default"):
        del caches["default"]
    settings.CELERY_BROKER_URL = services.redis.url
    settings.VAR_DIR = services.root / "var"
    settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
    # Organizations get their (empty) lexical index when created: not in the developer's var/.
    settings.LEXICAL_INDEX_DIR = settings.VAR_DIR / "index"
    app.conf.update(broker_url=services.redis.url, result_backend=services.redis.url)


@pytest.fixture(scope="session")
def django_db_keepdb() -> bool:
    """The session's test database already exists (``services``); Django, connected as the
    application role, must use it rather than try to create one."""
    return True


@pytest.fixture(scope="session")
def django_db_createdb() -> bool:
    return False


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, services: Services) -> None:
    """After the migrations: the one right the suite needs beyond the application's, TRUNCATE,
    with which Django empties the tables after a transactional test. `make run` never grants
    it."""
    import psycopg

    with psycopg.connect(services.test_database_owner_url, autocommit=True) as conn:
        conn.execute(f"GRANT TRUNCATE ON ALL TABLES IN SCHEMA public TO {APPLICATION_GROUP}")


@pytest.fixture
def celery_worker(services: Services, transactional_db) -> Iterator[subprocess.Popen]:
    """A real Celery worker process on the test Redis and the test database.

    Tests using it need committed data (``transactional_db``): the worker has its own
    connection and cannot see an open test transaction.
    """
    process = start_worker(services)
    try:
        yield process
    finally:
        stop_worker(process)


def start_worker(services: Services, *, concurrency: int = 1, name: str = "test",
                 extra_env: dict[str, str] | None = None,
                 queues: str | None = None) -> subprocess.Popen:
    """``queues``: the lanes it consumes, as ``runstack`` names them (default: every lane)."""
    log = open(services.root / f"worker-{name}.log", "ab")  # noqa: SIM115 - closed by the OS
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "contexts", "worker", "--loglevel", "INFO",
         "--concurrency", str(concurrency), "--hostname", f"{name}-{os.getpid()}@%h",
         "--without-gossip", "--without-mingle", *(["--queues", queues] if queues else [])],
        env={**services.env(), **(extra_env or {})}, cwd=ROOT, stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    from contexts.celery import app

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log_text = (services.root / f"worker-{name}.log").read_text()
            raise RuntimeError(f"worker exited: {log_text}")
        if app.control.ping(timeout=0.5):
            return process
    stop_worker(process)
    raise RuntimeError("the Celery worker did not answer a ping within 60 s")


def stop_worker(process: subprocess.Popen) -> None:
    import signal

    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def node_follower(settings, tmp_path):
    """Start real index-follower threads on this process's node, as the web processes run
    them (``contexts.indexes.follower.NodeFollower``); stopped at the end of the test."""
    from contexts.indexes.follower import NodeFollower

    settings.LEXICAL_INDEX_DIR = tmp_path / "node-index"
    settings.INDEX_FOLLOW_INTERVAL = 0.05
    started: list[tuple[NodeFollower, threading.Thread]] = []

    def start() -> NodeFollower:
        node = NodeFollower()
        thread = threading.Thread(target=node.run, name="test-follower", daemon=True)
        thread.start()
        started.append((node, thread))
        return node

    yield start
    for node, thread in started:
        node.stop()
        thread.join(10)

"""The embedded services: idempotent start, clean stop, crash recovery, clear port errors."""

import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from contexts.stack.servers import (
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedServiceError,
    EmbeddedStack,
    free_port,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def tmp_path():
    """Outside pytest's base temp dir: pytest resets that tree to 0700 (also when another
    pytest process starts), and the embedded server's system user must be able to traverse."""
    path = Path(tempfile.mkdtemp(prefix="contexts-embedded-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _wait_dead(pid: int) -> None:
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def test_postgres_start_is_idempotent_and_survives_a_crash(tmp_path):
    pg = EmbeddedPostgres(tmp_path, free_port())
    first = pg.start()
    try:
        assert first.running
        assert pg.start().pid == first.pid  # attaches, does not start a second server
        with psycopg.connect(pg.url) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        os.kill(first.pid, signal.SIGKILL)  # a crash leaves postmaster.pid behind
        _wait_dead(first.pid)
        time.sleep(0.5)  # children notice the dead postmaster and exit
        second = pg.start()
        assert second.running and second.pid != first.pid
    finally:
        pg.stop()
    assert not pg.status().running


def test_redis_start_stop_and_stale_pid_file(tmp_path):
    redis_server = EmbeddedRedis(tmp_path, free_port())
    status = redis_server.start()
    try:
        assert redis_server.start().pid == status.pid
        os.kill(status.pid, signal.SIGKILL)
        _wait_dead(status.pid)
        assert redis_server.pid_file.exists()  # stale, left by the crash
        assert redis_server.start().running
    finally:
        redis_server.stop()
    assert not redis_server.status().running


def test_a_taken_port_gives_a_clear_message(tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(EmbeddedServiceError, match=f"port {port} is taken.*CONTEXTS_PG_PORT"):
            EmbeddedPostgres(tmp_path, port).start()
        with pytest.raises(EmbeddedServiceError, match="CONTEXTS_REDIS_PORT"):
            EmbeddedRedis(tmp_path, port).start()


def test_a_stack_stops_only_what_it_started(tmp_path):
    port = free_port()
    someone_elses = EmbeddedRedis(tmp_path, port)
    running = someone_elses.start()
    try:
        stack = EmbeddedStack(tmp_path, free_port(), port, postgres=False)
        [status] = stack.start()
        assert status.pid == running.pid and "attached" in status.detail
        stack.stop_started()
        assert someone_elses.status().running  # `make run` leaves a server it attached to

        someone_elses.stop()
        stack = EmbeddedStack(tmp_path, free_port(), port, postgres=False)
        [status] = stack.start()
        assert status.running and "attached" not in status.detail
        stack.stop_started()
        assert not someone_elses.status().running
    finally:
        someone_elses.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="creates a system user: root only")
def test_processes_starting_at_once_create_the_system_user_once():
    """Test workers on a fresh machine start their servers together: each must see the one
    user that owns its data directory (concurrent `useradd` runs once left a uid that no longer
    existed, and every worker's initdb was refused)."""
    import pwd
    import subprocess
    import sys

    name = f"ctx_test_{os.getpid()}"
    # Separate interpreters, as the test workers are (a fork of this one would inherit its
    # threads and connections).
    code = ("import sys; from contexts.stack.servers import _system_user; "
            "print(_system_user(sys.argv[1]).pw_uid)")
    try:
        processes = [subprocess.Popen([sys.executable, "-c", code, name], text=True,
                                      stdout=subprocess.PIPE) for _ in range(6)]
        uids = {int(process.communicate(timeout=60)[0]) for process in processes}
        assert uids == {pwd.getpwnam(name).pw_uid}
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


def test_a_symlink_planted_as_the_user_lock_is_not_followed(tmp_path):
    """The lock sits in the shared temp directory and root opens it: a symlink there must not
    make root create or touch the file it points to."""
    from contexts.stack.servers import _system_user

    name = f"ctx_planted_{os.getpid()}"
    lock = Path(tempfile.gettempdir()) / f"{name}.useradd.lock"
    target = tmp_path / "victim"
    lock.symlink_to(target)
    try:
        with pytest.raises(OSError):
            _system_user(name)
        assert not target.exists()
    finally:
        lock.unlink()

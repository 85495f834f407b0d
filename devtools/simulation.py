"""``manage.py simulate_nodes``: several nodes on this machine against one PostgreSQL and one
Redis, to show that every web node's lexical index follows PostgreSQL (issue 21, ADR 0015).

Nodes are separate process groups with separate directories and ports: web nodes are gunicorn
(the ASGI application, two workers, each running the index follower), the worker node is a
Celery worker with its own ``CONTEXTS_VAR_DIR`` and no index (``CONTEXTS_INDEX_FOLLOWER=off``).
The simulation uploads a folder through web node A, then keeps changing fragments through both
web nodes — edits, retires, restores, merges, further uploads — while it queries both nodes
with an agent token; mid-run it kills web node B with SIGKILL and restarts it, and deletes web
node A's index once. At the end it checks:

- **converged**: every web node's index holds exactly the fragments PostgreSQL says are active;
- **lost**: acknowledged changes whose effect PostgreSQL does not hold;
- **leaks**: fragments returned to the token outside its scopes (a second repository holds
  fragments with the same words);
- **lag**: from a change's acknowledgement to the moment a node's index mark covers it, for
  every web node that was up (polled every 5 ms from the nodes' mark files).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections

from accounts.models import Membership, Organization, Repository, Role
from accounts.tokens import create_token
from contexts.indexes.follower import STATE_FILE
from contexts.models import (
    AuditEvent,
    ChangeHead,
    DedupCandidate,
    DedupState,
    Fragment,
    FragmentStatus,
    FragmentVersion,
)
from contexts.search import LexicalIndex

STARTUP_TIMEOUT = 180.0
CONVERGE_TIMEOUT = 60.0
WORDS = ("ledger", "harbor", "quartz", "meadow", "cobalt", "falcon", "juniper", "saffron",
         "tundra", "violet", "walnut", "zephyr", "amber", "basalt", "cedar", "dune")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] if ordered else 0.0


# --- nodes -------------------------------------------------------------------------------------
@dataclass
class Node:
    name: str
    root: Path
    command: list[str]
    env: dict[str, str]
    port: int | None = None
    process: subprocess.Popen | None = None
    up_since: float = 0.0
    down: bool = True

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "node.log", "ab")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(self.command, env=self.env, cwd=settings.BASE_DIR,
                                        stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()

    def wait_serving(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited; see {self.root / 'node.log'}")
            try:
                if requests.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    self.down, self.up_since = False, time.monotonic()
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} was not ready within {STARTUP_TIMEOUT:.0f} s")

    def kill(self) -> None:
        """SIGKILL to the whole process group: no shutdown code runs."""
        self.down = True
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def mark(self, org_id: int) -> int | None:
        try:
            return int(json.loads((self.index_dir / f"org-{org_id}" / STATE_FILE)
                                  .read_text())["seq"])
        except (OSError, ValueError, KeyError):
            return None

    def index_ids(self, org_id: int) -> set[str] | None:
        """What this node's index of the organization holds, read from its directory."""
        path = self.index_dir / f"org-{org_id}"
        try:
            index = LexicalIndex(path)
            return set(index.all_fragment_ids())
        except Exception:  # noqa: BLE001 - missing or being rebuilt: not converged yet
            return None


# --- the simulation ----------------------------------------------------------------------------
@dataclass
class Ack:
    """A change a node acknowledged, and what PostgreSQL must then hold."""

    at: float
    seq: int
    check: Callable[[], bool]
    description: str


@dataclass
class Report:
    lags_ms: list[float] = field(default_factory=list)
    converged: bool = False
    lost: int = 0
    leaks: int = 0
    changes: int = 0
    queries: int = 0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"lag p50 {percentile(self.lags_ms, 0.5):.0f} ms, "
                f"p99 {percentile(self.lags_ms, 0.99):.0f} ms; "
                f"converged {'yes' if self.converged else 'no'}; lost {self.lost}; "
                f"leaks {self.leaks}")

    @property
    def ok(self) -> bool:
        return self.converged and self.lost == 0 and self.leaks == 0


class Simulation:
    def __init__(self, web: int, seconds: float, root: Path, out: Callable[[str], None],
                 seed: int = 0) -> None:
        if web < 2:
            raise ValueError("--web must be at least 2 (one node is killed, one rebuilt)")
        self.seconds = seconds
        self.root = root
        self.out = out
        self.random = random.Random(seed)
        self.report = Report()
        self.acks: list[Ack] = []
        # (acknowledged at, sequence, node) for every change and web node up at the time.
        self._pending: list[tuple[float, int, Node]] = []
        self._lag_lock = threading.Lock()
        self._stop = threading.Event()
        base_env = self._base_env()
        self.web = [self._web_node(i, base_env) for i in range(web)]
        self.worker = Node("worker", root / "worker", [
            sys.executable, "-m", "celery", "-A", "contexts", "worker", "--loglevel", "WARNING",
            "--concurrency", "1", "--hostname", f"sim-worker-{os.getpid()}@%h",
            "--without-gossip", "--without-mingle"],
            {**base_env, "CONTEXTS_VAR_DIR": str(root / "worker" / "var"),
             "CONTEXTS_INDEX_FOLLOWER": "off"})

    # -- set-up ---------------------------------------------------------------------------------
    @staticmethod
    def _base_env() -> dict[str, str]:
        """One PostgreSQL and one Redis for every node, named explicitly: no node finds them
        through a shared directory."""
        database = settings.DATABASES["default"]
        url = (f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST']}:"
               f"{database['PORT']}/{database['NAME']}")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "contexts.settings",
               "DATABASE_URL": url, "REDIS_URL": settings.CELERY_BROKER_URL,
               "SECRET_KEY": settings.SECRET_KEY, "PYTHONPATH": str(settings.BASE_DIR)}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        return env

    def _web_node(self, i: int, base_env: dict[str, str]) -> Node:
        name = f"web-{chr(ord('a') + i)}"
        root = self.root / name
        port = _free_port()
        from contexts.web.serving import ASGI_WORKER_CLASS
        return Node(name, root, [
            sys.executable, "-m", "gunicorn", "contexts.asgi:application", "--worker-class",
            ASGI_WORKER_CLASS, "--bind", f"127.0.0.1:{port}", "--workers", "2",
            "--log-level", "warning", "--graceful-timeout", "5"],
            {**base_env, "CONTEXTS_VAR_DIR": str(root / "var"),
             "STATIC_ROOT": str(self.root / "static"),
             "CONTEXTS_INDEX_DIR": str(root / "index"), "CONTEXTS_NODE_NAME": name,
             "CONTEXTS_INDEX_FOLLOW_INTERVAL": "0.1"}, port=port)

    def _setup_data(self) -> None:
        tag = secrets.token_hex(3)
        self.org = Organization.objects.create(slug=f"sim-{tag}", name=f"simulation {tag}")
        self.repo = Repository.objects.create(org=self.org, slug="sim", name="simulated")
        self.secret = Repository.objects.create(org=self.org, slug="secret", name="off limits")
        self.password = secrets.token_urlsafe(16)
        self.user = get_user_model().objects.create_user(
            username=f"sim-{tag}", password=self.password)
        Membership.objects.create(user=self.user, org=self.org, role=Role.ADMIN)
        _, self.token = create_token(self.org, "simulation", [self.repo.scope])
        from accounts.permissions import SYSTEM
        from contexts.services.fragments import create_fragment
        # Same words as the simulated repository: a filter that failed would return them.
        for word in WORDS:
            create_fragment(SYSTEM, self.secret.scope, title=f"Secret {word}",
                            body=f"The {word} secret of the off-limits repository.")
        self.secret_ids = set(self.org.fragments.filter(scope=self.secret.scope)
                              .values_list("public_id", flat=True))

    def _drop_data(self) -> None:
        close_old_connections()
        Organization.objects.filter(pk=self.org.pk).delete()
        self.user.delete()

    # -- helpers --------------------------------------------------------------------------------
    def _head(self) -> int:
        close_old_connections()
        return ChangeHead.objects.filter(org=self.org).values_list("seq", flat=True).first() or 0

    def _acknowledged(self, check: Callable[[], bool], description: str) -> None:
        now = time.monotonic()
        seq = self._head()
        self.acks.append(Ack(now, seq, check, description))
        self.report.changes += 1
        with self._lag_lock:
            for node in self.web:
                if not node.down:
                    self._pending.append((now, seq, node))

    def _measure_lag(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lag_lock:
                marks = {node.name: node.mark(self.org.pk) for node in self.web}
                still = []
                for at, seq, node in self._pending:
                    mark = marks[node.name]
                    if mark is not None and mark >= seq:
                        self.report.lags_ms.append((now - at) * 1000)
                    elif node.down:
                        continue  # killed before it saw the change: not a lag sample
                    else:
                        still.append((at, seq, node))
                self._pending = still
            time.sleep(0.005)

    def _session(self, node: Node) -> requests.Session:
        session = requests.Session()
        session.get(f"{node.url}/login/", timeout=10)
        response = session.post(f"{node.url}/login/", timeout=10, data={
            "username": self.user.username, "password": self.password,
            "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
            headers={"Referer": f"{node.url}/login/"})
        if response.status_code >= 400 or "sessionid" not in session.cookies:
            raise RuntimeError(f"could not log in to {node.name}: {response.status_code}")
        return session

    def _logged_in(self, node: Node) -> requests.Session:
        session = self.sessions.get(node.name) or self._session(node)
        self.sessions[node.name] = session
        return session

    def _post(self, node: Node, path: str, data: dict) -> requests.Response:
        session = self._logged_in(node)
        return session.post(f"{node.url}{path}", data={
            **data, "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
            headers={"Referer": f"{node.url}/", "X-CSRFToken": session.cookies.get(
                "csrftoken", "")}, timeout=30, allow_redirects=False)

    def _active(self) -> list[Fragment]:
        close_old_connections()
        return list(Fragment.objects.filter(scope=self.repo.scope, status=FragmentStatus.ACTIVE)
                    .order_by("pk"))

    # -- changes --------------------------------------------------------------------------------
    def upload(self, node: Node, files: int, prefix: str) -> None:
        payload = []
        for n in range(files):
            words = self.random.sample(WORDS, 3)
            text = (f"# {prefix} note {n}\n\nThe {words[0]} service talks to the {words[1]} "
                    f"queue through the {words[2]} gateway. Marker {prefix}{n}.\n")
            payload.append(("files", (f"{prefix}-{n}.md", text.encode(), "text/markdown")))
        # A curator's upload (agents' tokens may not ingest), through the REST API.
        session = self._logged_in(node)
        response = session.post(f"{node.url}/api/sources", files=payload, timeout=60,
                                data={"org_id": self.org.slug, "repo_id": self.repo.slug},
                                headers={"X-CSRFToken": session.cookies.get("csrftoken", ""),
                                         "Referer": f"{node.url}/"})
        response.raise_for_status()
        job = response.json()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            state = session.get(f"{node.url}/api/jobs/{job['id']}", timeout=10).json()
            if state["state"] in ("done", "failed"):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"upload job {job['id']} did not finish")
        if state["state"] != "done" or state.get("errors"):
            raise RuntimeError(f"upload job failed: {state}")
        paths = {f"{prefix}-{n}.md" for n in range(files)}
        self._acknowledged(lambda: self._paths_ingested(paths), f"upload {prefix}")

    def _paths_ingested(self, names: set[str]) -> bool:
        from contexts.models import SourceDocument
        found = set(SourceDocument.objects.filter(repository=self.repo)
                    .values_list("path", flat=True))
        return all(any(path.endswith(name) for path in found) for name in names)

    def edit(self, node: Node) -> None:
        fragment = self.random.choice(self._active())
        marker = f"edited{secrets.token_hex(3)}"
        response = self._post(node, f"/fragments/{fragment.public_id}/edit", {
            "title": fragment.title, "body": f"{fragment.body}\n\n{marker}",
            "based_on_version": fragment.version, "reason": "simulation"})
        if response.status_code in (200, 302):
            pk = fragment.pk
            # Durable records, not the final state (a later change may undo this one).
            self._acknowledged(lambda: FragmentVersion.objects.filter(
                fragment_id=pk, body__contains=marker).exists(), f"edit {fragment.public_id}")

    def retire(self, node: Node) -> None:
        active = self._active()
        if len(active) < 6:
            return
        fragment = self.random.choice(active)
        self._status_change(node, fragment, "retire")

    def restore(self, node: Node) -> None:
        close_old_connections()
        retired = list(Fragment.objects.filter(scope=self.repo.scope,
                                               status=FragmentStatus.RETIRED).order_by("pk"))
        if retired:
            self._status_change(node, self.random.choice(retired), "restore")

    def _status_change(self, node: Node, fragment: Fragment, action: str) -> None:
        reason = f"simulation {secrets.token_hex(4)}"
        response = self._post(node, f"/fragments/{fragment.public_id}/{action}",
                              {"reason": reason})
        if response.status_code in (200, 302):
            fid = fragment.public_id
            self._acknowledged(lambda: AuditEvent.objects.filter(
                action=f"fragment.{action}", object_id=fid, after__reason=reason).exists(),
                f"{action} {fid}")

    def merge(self, node: Node) -> None:
        active = self._active()
        if len(active) < 6:
            return
        keep, drop = self.random.sample(active, 2)
        # What the nightly duplicate scan would propose; a curator decides it on the node. A
        # pair proposed before (merged, then its dropped side restored) is not proposed again.
        candidate, proposed = DedupCandidate.objects.get_or_create(
            org=self.org, fragment_a=min(keep, drop, key=lambda f: f.pk),
            fragment_b=max(keep, drop, key=lambda f: f.pk), defaults={"distance": 1})
        if not proposed:
            return
        keep_side = "keep-a" if candidate.fragment_a_id == keep.pk else "keep-b"
        response = self._post(node, f"/governance/dedup/{candidate.pk}/decide",
                              {"action": keep_side})
        if response.status_code in (200, 302):
            pk = candidate.pk
            self._acknowledged(lambda: DedupCandidate.objects.filter(
                pk=pk, state=DedupState.MERGED).exists(), f"merge {drop.public_id}")

    def query(self, node: Node) -> None:
        word = self.random.choice(WORDS)
        try:
            response = requests.post(f"{node.url}/api/contexts/retrieve", timeout=30, json={
                "query": f"{word} gateway queue", "budget_tokens": 4000,
                "scope": {"org_id": self.org.slug, "repo_id": self.repo.slug}},
                headers={"Authorization": f"Bearer {self.token}"})
        except requests.RequestException:
            return  # the node is being killed
        if response.status_code != 200:
            return
        self.report.queries += 1
        returned = {f["id"] for f in response.json()["fragments"]}
        leaked = returned & self.secret_ids
        if leaked:
            self.report.leaks += len(leaked)
            self.report.notes.append(f"{node.name} returned {sorted(leaked)}")

    # -- the run --------------------------------------------------------------------------------
    def run(self) -> Report:
        self._setup_data()
        self.sessions: dict[str, requests.Session] = {}
        nodes = [*self.web, self.worker]
        try:
            # What an image build does once: the web nodes serve the same static files.
            subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput",
                            "--verbosity", "0"], cwd=settings.BASE_DIR, check=True,
                           env={**self.web[0].env})
            for node in nodes:
                node.start()
            for node in self.web:
                node.wait_serving()
            self.out(f"nodes up: {', '.join(f'{n.name} :{n.port}' for n in self.web)}, "
                     f"worker (own var dir, no index); org {self.org.slug}")
            lag_thread = threading.Thread(target=self._measure_lag, daemon=True)
            lag_thread.start()
            a, b = self.web[0], self.web[1]
            self.upload(a, 20, "first")
            for node in self.web:
                self.query(node)  # loads each node's query encoder
            self._drive(a, b)
            self._stop.set()
            lag_thread.join(5)
            self._converge()
            self._check_acks()
        finally:
            self._stop.set()
            for node in nodes:
                node.stop()
            try:
                self._drop_data()
            finally:
                shutil.rmtree(self.root, ignore_errors=True)
        return self.report

    def _drive(self, a: Node, b: Node) -> None:
        started = time.monotonic()
        killed = deleted = restarted = False
        actions = [self.edit, self.retire, self.merge, self.restore, self.edit]
        step = 0
        while time.monotonic() - started < self.seconds:
            elapsed = (time.monotonic() - started) / self.seconds
            if not killed and elapsed > 0.2:
                self.out(f"killing {b.name} with SIGKILL")
                b.kill()
                killed, killed_at = True, time.monotonic()
            if killed and not restarted and time.monotonic() - killed_at > 3:
                self._restart(b)
                restarted = True
            if not deleted and elapsed > 0.6:
                self._delete_index(a)
                deleted = True
            up = [n for n in self.web if not n.down]
            node = up[step % len(up)]
            if step % 10 == 5:
                self.upload(node, 3, f"more{step}")
            else:
                actions[step % len(actions)](node)
            for each in up:
                self.query(each)
            step += 1
            time.sleep(0.05)
        if killed and not restarted:
            self._restart(b)
        if not deleted:  # the restart took the rest of a short run
            self._delete_index(a)
        self.out(f"{step} steps")

    def _delete_index(self, node: Node) -> None:
        self.out(f"deleting {node.name}'s index")
        shutil.rmtree(node.index_dir / f"org-{self.org.pk}", ignore_errors=True)

    def _restart(self, node: Node) -> None:
        node.start()
        node.wait_serving()
        self.sessions.pop(node.name, None)
        self.query(node)
        self.out(f"{node.name} restarted")

    def _converge(self) -> None:
        deadline = time.monotonic() + CONVERGE_TIMEOUT
        while time.monotonic() < deadline:
            close_old_connections()
            expected = set(Fragment.objects.filter(org=self.org, status=FragmentStatus.ACTIVE)
                           .values_list("public_id", flat=True))
            held = {node.name: node.index_ids(self.org.pk) for node in self.web}
            if all(ids == expected for ids in held.values()):
                self.report.converged = True
                return
            time.sleep(0.2)
        for name, ids in held.items():
            if ids != expected:
                missing = len(expected - (ids or set()))
                extra = len((ids or set()) - expected)
                self.report.notes.append(f"{name}: {missing} missing, {extra} extra")

    def _check_acks(self) -> None:
        close_old_connections()
        for ack in self.acks:
            if not ack.check():
                self.report.lost += 1
                self.report.notes.append(f"lost: {ack.description}")

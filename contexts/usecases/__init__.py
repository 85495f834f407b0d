"""The use-case layer: what a caller can ask of Contexts, once, for every surface.

Each use case is a plain function of a principal (a user or an agent token) and a typed
command (a frozen dataclass), returning domain objects and raising the errors of
:mod:`contexts.usecases.errors` (or :class:`~contexts.services.errors.InvalidOperation`).
The adapters — REST (``contexts.api``), MCP (``contexts.mcp.server``), the console
(``contexts.console``) and the management commands — parse their input into a command, call
one function and render the result; none of them imports another (ADR 0013, enforced by the
import contracts in ``pyproject.toml``).

- :mod:`~contexts.usecases.retrieval` — plan and run a retrieval, the empty answer's hint;
- :mod:`~contexts.usecases.fragments` — an agent's fragment write and its feedback; a
  person's write from the console ("New fragment") and its near-duplicate check;
- :mod:`~contexts.usecases.agent_sessions` — a session opened by an agent's first write that
  names a new ``session_id``, bounded per token, expiring when idle;
- :mod:`~contexts.usecases.proposals` — agents' proposals (promote a session fragment, a new
  repository fragment) and their review: approve, reject, merge, auto-accept, the policy;
- :mod:`~contexts.usecases.ingestion` — submitting a source (a server path or uploads) as an
  ingestion job and queueing it;
- :mod:`~contexts.usecases.stored_secrets` — the operator's re-screening of stored text for
  secrets (text stored before the scan existed), through the one door;
- :mod:`~contexts.usecases.scoping`, :mod:`~contexts.usecases.org_scope` — resolving the scope
  fields of a command (public id or slug) and ``"repo_id": "*"``.

The work a request asks of the worker (an ingestion, a sync, a re-embedding, feedback) is
queued here, once its transaction commits (``delay_on_commit`` or ``transaction.on_commit``):
nothing is published for a transaction that rolls back. Two other places queue tasks: the
``fragments_changed`` receiver (``contexts.signals``) queues ``reindex`` after any change to
fragments commits, and beat's tasks queue the work they find due (``contexts.tasks``: a reaped
job's re-run, due git syncs; ``contexts.governance.tasks``: a generation left building).
"""

"""gunicorn's worker for the ASGI application (``make run`` and the Docker image use it).

uvicorn's own worker trusts ``X-Forwarded-For`` and ``X-Forwarded-Proto`` from whatever
gunicorn's ``forwarded_allow_ips`` says, 127.0.0.1 by default: behind no proxy, any local
client could name any address and dodge the login throttle. This one trusts exactly
``CONTEXTS_TRUSTED_PROXIES`` (nobody by default), the list ``contexts.kernel.client_address`` uses,
so the access log, the request's address and every throttle agree. It also starts the node's
index follower (``contexts.indexes.follower``) in every web process, serves only once the process's
query encoder answers, and closes a keep-alive connection after
``CONTEXTS_KEEPALIVE_REQUESTS`` requests (:class:`RecyclingHttpProtocol`). Its access log redacts
credentials in URLs (``contexts.kernel.logfilters``).
"""

from __future__ import annotations

import warnings
from typing import Any

from django.conf import settings

with warnings.catch_warnings():
    # uvicorn suggests the separate uvicorn-worker package; this module is the same class.
    warnings.simplefilter("ignore", DeprecationWarning)
    from uvicorn.workers import UvicornWorker as _UvicornWorker

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from contexts.kernel import local_secrets
from contexts.kernel.logfilters import redact_every_handler


class RecyclingHttpProtocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, answering ``Connection: close`` on a connection's
    ``settings.KEEPALIVE_REQUESTS``-th request (0: never), as nginx's ``keepalive_requests``.

    Why: the web processes share one listening socket and a connection stays with the process
    that accepted it. A burst of new connections (a fleet of agents starting, every client
    reconnecting after a restart) is accepted mostly by the first process to wake, which then
    serves them all for as long as they stay open while the other cores idle — measured with
    ``manage.py loadtest``: 60–80 req/s with every connection on one of two processes, 97 when
    they were split. A closed connection is opened again by the client, and a busy process is
    the slower one to accept it, so the connections drift back to an even spread.
    """

    served = 0  # requests begun on this connection

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is before:  # a WebSocket upgrade: no HTTP request cycle to count
            return
        self.served += 1
        if settings.KEEPALIVE_REQUESTS and self.served >= settings.KEEPALIVE_REQUESTS:
            self.cycle.keep_alive = False  # uvicorn sends "connection: close" and closes


class UvicornWorker(_UvicornWorker):
    def load_wsgi(self) -> None:
        super().load_wsgi()  # the application, so Django is set up
        # Serve only once the query encoder answers: until then a question the query-vector
        # cache does not know would hold a request thread for seconds (query_encoder's
        # wait_until_ready). Heartbeats keep gunicorn from taking the wait for a hang.
        from contexts.retrieval import query_encoder

        query_encoder.wait_until_ready(heartbeat=self.notify)
        # Every web process runs a follower thread; the one holding the node's leader lock
        # applies the change feed to the node's index, the others stand by (ADR 0015).
        from contexts.indexes import follower

        follower.start_in_background()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Made in gunicorn's master, which reads the settings here, before it forks the web
        # processes: the secrets they read must exist first (contexts/kernel/local_secrets.py).
        local_secrets.prepare()
        # Applied after gunicorn's settings, so --forwarded-allow-ips or FORWARDED_ALLOW_IPS
        # cannot widen it by accident. An empty list trusts no peer.
        self.CONFIG_KWARGS = {**_UvicornWorker.CONFIG_KWARGS,
                              "forwarded_allow_ips": list(settings.TRUSTED_PROXIES),
                              "http": RecyclingHttpProtocol}
        super().__init__(*args, **kwargs)
        # uvicorn's loggers now write through gunicorn's access and error handlers: those
        # redact credentials in URLs too (a set-password or nudge link, an SSO callback).
        redact_every_handler()

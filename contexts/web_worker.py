"""gunicorn's worker for the ASGI application (``make run`` and the Docker image use it).

uvicorn's own worker trusts ``X-Forwarded-For`` and ``X-Forwarded-Proto`` from whatever
gunicorn's ``forwarded_allow_ips`` says, 127.0.0.1 by default: behind no proxy, any local
client could name any address and dodge the login throttle. This one trusts exactly
``CONTEXTS_TRUSTED_PROXIES`` (nobody by default), the list ``contexts.client_address`` uses, so
the access log, the request's address and every throttle agree. It also starts the node's
index follower (``contexts.follower``) in every web process.
"""

from __future__ import annotations

import warnings
from typing import Any

from django.conf import settings

with warnings.catch_warnings():
    # uvicorn suggests the separate uvicorn-worker package; this module is the same class.
    warnings.simplefilter("ignore", DeprecationWarning)
    from uvicorn.workers import UvicornWorker as _UvicornWorker


class UvicornWorker(_UvicornWorker):
    def load_wsgi(self) -> None:
        super().load_wsgi()  # the application, so Django is set up
        # Every web process runs a follower thread; the one holding the node's leader lock
        # applies the change feed to the node's index, the others stand by (ADR 0015).
        from contexts import follower

        follower.start_in_background()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Applied after gunicorn's settings, so --forwarded-allow-ips or FORWARDED_ALLOW_IPS
        # cannot widen it by accident. An empty list trusts no peer.
        self.CONFIG_KWARGS = {**_UvicornWorker.CONFIG_KWARGS,
                              "forwarded_allow_ips": list(settings.TRUSTED_PROXIES)}
        super().__init__(*args, **kwargs)

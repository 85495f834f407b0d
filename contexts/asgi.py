"""ASGI entry point (what gunicorn's uvicorn workers serve): ``/mcp`` is the MCP server
(``contexts.mcp.server``), everything else is Django.

Django is served as its WSGI application in a small thread pool (``contexts.web.wsgi_bridge``, one
thread hop per request; ``a2wsgi`` for uploads and other long bodies), not through Django's
ASGI handler. Every view and middleware here is synchronous, and the ASGI handler runs
them by hopping between the event loop and a thread several times per request (the middleware
chain is not all async-capable, and the view is sync): measured with ``bench_retrieve --asgi``,
the retrieval endpoint answered in 56–57 ms p50 through it and in 42–48 ms through the WSGI
application on the same server, the same minute. ``CONTEXTS_WEB_THREADS`` requests run at once
per process, MCP tool calls included (they run in the same threads).

Django cannot take ASGI lifespan events, and the MCP SDK needs them (its session manager runs
for the life of the process), so lifespan goes to the MCP app only.
"""

import os

from django.core.wsgi import get_wsgi_application

from contexts.kernel import local_secrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")
local_secrets.prepare()  # before the settings read them
# First: sets Django up, which the MCP module's imports (models, settings) need.
wsgi_application = get_wsgi_application()

from contexts.config.checks import refuse_to_start  # noqa: E402

# Exit status 3, gunicorn's "worker failed to boot": the server stops instead of booting
# worker after worker on a configuration with mistakes in it.
refuse_to_start("web", exit_status=3)

from django.conf import settings  # noqa: E402
from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

from contexts.mcp.server import MCP_PATH, build_application  # noqa: E402
from contexts.web import serving  # noqa: E402
from contexts.web.wsgi_bridge import WSGIBridge  # noqa: E402

serving.prepare()


class Router:
    def __init__(self, django: ASGIApp, mcp: ASGIApp) -> None:
        self.django = django
        self.mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or _is_mcp(scope.get("path", "")):
            await self.mcp(scope, receive, send)
        else:
            await self.django(scope, receive, send)


def _is_mcp(path: str) -> bool:
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


django_application = WSGIBridge(wsgi_application, workers=settings.WEB_THREADS,
                                timeout=settings.REQUEST_BODY_TIMEOUT)
# MCP's tool calls run in the same request threads: one bound for both surfaces.
application = Router(django_application, build_application(django_application.executor))

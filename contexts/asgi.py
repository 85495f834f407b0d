"""ASGI entry point (what gunicorn's uvicorn workers serve): ``/mcp`` is the MCP server
(``contexts.mcp_server``), everything else is Django.

Django cannot take ASGI lifespan events, and the MCP SDK needs them (its session manager runs
for the life of the process), so lifespan goes to the MCP app only.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contexts.settings")
# First: sets Django up, which the MCP module's imports (models, settings) need.
django_application = get_asgi_application()

from starlette.types import ASGIApp, Receive, Scope, Send  # noqa: E402

from contexts.mcp_server import MCP_PATH, build_application  # noqa: E402
from contexts.retrieval import query_encoder  # noqa: E402

query_encoder.warm()


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


application = Router(django_application, build_application())

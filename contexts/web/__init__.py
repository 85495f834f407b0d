"""The web runtime: the ASGI worker, Django's WSGI bridge inside it, what a web process does before
its first request, health endpoints, who may see internals, and the Content-Security-Policy."""

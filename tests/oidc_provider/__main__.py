"""Serve the test OpenID provider on an inherited, already listening socket.

    python -m tests.oidc_provider --fd N --data-dir DIR [--access-token-seconds S]
        [--id-token-seconds S]

The parent binds and listens before starting this process, so no other process can take the
port in between; the issuer is ``http://<host>:<port>/o`` of that socket. The control secret
comes in ``OIDC_PROVIDER_CONTROL_SECRET`` (never on the command line, which ``ps`` shows).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.oidc_provider")
    parser.add_argument("--fd", type=int, required=True,
                        help="file descriptor of a bound, listening TCP socket")
    parser.add_argument("--data-dir", type=Path, required=True,
                        help="directory for the SQLite database")
    parser.add_argument("--access-token-seconds", type=int, default=300)
    parser.add_argument("--id-token-seconds", type=int, default=300)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    if not os.environ.get("OIDC_PROVIDER_CONTROL_SECRET"):
        sys.exit("OIDC_PROVIDER_CONTROL_SECRET must be set (the control API's shared secret)")
    listener = socket.socket(fileno=args.fd)
    host, port = listener.getsockname()[:2]
    url_host = f"[{host}]" if ":" in host else host
    args.data_dir.mkdir(parents=True, exist_ok=True)
    os.environ.update({
        # Forced, not defaulted: the parent (pytest) has the project's settings module set.
        "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
        "OIDC_PROVIDER_DATA_DIR": str(args.data_dir),
        "OIDC_PROVIDER_ISSUER": f"http://{url_host}:{port}/o",
        "OIDC_PROVIDER_ACCESS_TOKEN_SECONDS": str(args.access_token_seconds),
        "OIDC_PROVIDER_ID_TOKEN_SECONDS": str(args.id_token_seconds),
    })

    import django
    from django.core.management import call_command

    django.setup()
    # run_syncdb: this package's Profile has no migrations.
    call_command("migrate", run_syncdb=True, interactive=False, verbosity=0)

    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    # The server's own socket is never bound: it is swapped for the inherited one, and the
    # parts of server_bind() that describe the address are done by hand.
    server = ThreadedWSGIServer((host, port), WSGIRequestHandler, bind_and_activate=False)
    server.socket.close()
    server.socket = listener
    server.server_address = listener.getsockname()
    server.server_name = host
    server.server_port = port
    server.setup_environ()
    server.set_app(WSGIHandler())
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


if __name__ == "__main__":
    main()

"""The web processes: links, threads, connections, timeouts, the API's throttle."""

from contexts.config.schema import INT, TEXT, THROTTLE_RATE, Area, Setting

AREA = Area("Web", "How a web process serves requests (`contexts/asgi.py`, `contexts/web/`).", (
    Setting("CONTEXTS_BASE_URL", TEXT, "",
            "Start of absolute links in e-mails (nudges, set-password) and of the MCP "
            "endpoint's resource URL (its 401 challenge and protected-resource metadata); set "
            "it to the address people and agents open.",
            shown_default="the address `make run` serves, `http://$HOST:$PORT`"),
    Setting("CONTEXTS_WEB_THREADS", INT, 4,
            "Requests served at once per web process: Django's and MCP tool calls, "
            "in one pool of threads.", minimum=1),
    Setting("CONTEXTS_KEEPALIVE_REQUESTS", INT, 100,
            "Requests a keep-alive connection serves before the server closes it, so that "
            "connections spread over the web processes again (0: no limit).", minimum=0),
    Setting("CONTEXTS_REQUEST_BODY_TIMEOUT", INT, 30,
            "Seconds a request body may take to arrive, and a stalled streaming response may "
            "wait for its reader.", minimum=1),
    Setting("CONTEXTS_GC_THRESHOLD", INT, 20_000,
            "A web process collects young objects every this many allocations (0: Python's "
            "default of 700)."),
    Setting("CONTEXTS_AFTER_RESPONSE_TIMEOUT_MS", INT, 500,
            "Bound on each statement a retrieval writes after its response (trace, use counts, "
            "metrics), so that a stuck database cannot hold a web worker.", minimum=1),
    Setting("CONTEXTS_THROTTLE_AGENT", THROTTLE_RATE, "6000/min",
            "Requests per token (or user) to the REST API; more get 429 with Retry-After."),
))

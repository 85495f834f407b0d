"""What the agents' two surfaces, REST (``contexts.api``) and MCP (``contexts.mcp.server``),
share so that they cannot disagree: the request rules (serializers), the response shapes, the
error mapping and the per-token throttle.

Not an adapter itself: it parses and renders for the adapters and calls no use case, so REST
and MCP each import it and never each other (ADR 0013).
"""

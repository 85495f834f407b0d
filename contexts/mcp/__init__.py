"""The agents' API as MCP tools (an adapter beside REST and the console)."""

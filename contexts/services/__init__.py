"""Service functions: the one way every caller (API, console, CLI, jobs) changes state."""

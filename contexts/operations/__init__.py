"""Operational procedures that are code rather than prose: backup and restore."""

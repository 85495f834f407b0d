"""Pure-Python ingestion stages: normalize raw source files, chunk them, fingerprint chunks.

No Django imports and no database here: every stage takes and returns the plain frozen
dataclasses in ``types`` so it can run in a Celery worker, a management command or a test.
"""

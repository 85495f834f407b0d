"""Retrieval evaluation: golden sets in BEIR layout scored through the real ingestion and
retrieval code (``manage.py eval``), and regression replays of recorded traces
(``manage.py replay``). See ``docs/evaluation.md``."""

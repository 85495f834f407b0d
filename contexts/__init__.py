"""Contexts: the Django project package and the core app (fragments, retrieval, ingestion)."""

from .celery import app as celery_app

__all__ = ["celery_app"]

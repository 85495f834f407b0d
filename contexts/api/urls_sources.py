"""API routes of one area (included by contexts/api/urls.py, app namespace 'api'): git sources
Contexts follows (issue 24)."""

urlpatterns: list = []

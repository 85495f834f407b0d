"""API routes of one area (included by contexts/api/urls.py, app namespace 'api'): an
organization's export (issue 24)."""

urlpatterns: list = []

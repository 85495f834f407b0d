"""API routes of one area (included by contexts/api/urls.py, app namespace 'api'): an
organization's export (issue 24)."""

from django.urls import path

from contexts.api import portability

urlpatterns: list = [
    path("orgs/<slug:org>/export", portability.export_view, name="org-export"),
]

"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console'):
an organization's sources — git repositories Contexts follows (issue 24)."""

from django.urls import path

from contexts.console.views import sources

urlpatterns: list = [
    path("o/<slug:slug>/sources/", sources.sources, name="sources"),
    path("o/<slug:slug>/sources/<pid:source_id>/sync", sources.sync_now, name="source-sync"),
]

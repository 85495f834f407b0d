"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console'):
exporting an organization (issue 24)."""

from django.urls import path

from contexts.console.views import portability

urlpatterns: list = [
    path("o/<slug:slug>/export", portability.org_export, name="org-export"),
]

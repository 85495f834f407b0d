"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console'):
writing fragments in the browser."""

from django.urls import path

from contexts.console.views import fragment_new

urlpatterns: list = [
    path("o/<slug:slug>/fragments/new", fragment_new.fragment_new, name="fragment-new"),
    path("o/<slug:slug>/fragments/new/preview", fragment_new.fragment_preview,
         name="fragment-new-preview"),
]

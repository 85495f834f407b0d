"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console')."""

from django.urls import path  # noqa: F401  (routes are added here)

urlpatterns: list = []

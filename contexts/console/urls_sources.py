"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console'):
an organization's sources — git repositories Contexts follows (issue 24)."""

urlpatterns: list = []

"""Console routes of one area (included by contexts/console/urls.py, app namespace 'console'):
exporting an organization (issue 24)."""

urlpatterns: list = []

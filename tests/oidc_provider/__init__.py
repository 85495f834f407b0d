"""A real OpenID Connect provider for the SSO tests, run in its own process.

django-oauth-toolkit in OIDC mode on its own SQLite database, plus a small control API the tests
drive it with (clients, users, ID-token tampering). ``fixture.py`` starts it; nothing here is
imported by the project itself, and this package must not import Django at import time (pytest
imports it, with the project's settings, to reach ``fixture.py``).
"""

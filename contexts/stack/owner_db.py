"""Work that needs the schema's owner — migrations, backups, restores — while the application
itself connects as a role that owns nothing (``contexts/stack/db_roles.py``).

``settings.DATABASE_OWNER`` holds the owner's connection settings: from ``DATABASE_OWNER_URL``,
or ``contexts_owner`` with its generated password when PostgreSQL is embedded. Without it the
role of ``DATABASE_URL`` is taken to be the owner (a deployment with one role, as before).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

from contexts.stack.db_roles import APPLICATION_GROUP, LOGIN_ATTRIBUTES, RETRIEVAL_ROLE

OWNER_KEYS = ("HOST", "PORT", "NAME", "USER", "PASSWORD")


def owner_settings(alias: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """The connection settings of ``alias`` with the owner's in place of the application's."""
    current = connections[alias].settings_dict
    owner = getattr(settings, "DATABASE_OWNER", None) if alias == DEFAULT_DB_ALIAS else None
    return {**current, **(owner or {})}


@contextmanager
def as_owner(alias: str = DEFAULT_DB_ALIAS) -> Iterator[dict[str, Any] | None]:
    """Connect ``alias`` as the owner for the duration; yields the application's settings it
    replaced (None when the two are the same role)."""
    connection = connections[alias]
    owner = owner_settings(alias)
    application = {key: connection.settings_dict.get(key) for key in OWNER_KEYS}
    if all(owner.get(key) == value for key, value in application.items()):
        yield None
        return
    connection.close()
    connection.settings_dict.update({key: owner.get(key) for key in OWNER_KEYS})
    try:
        yield application
    finally:
        connection.close()
        connection.settings_dict.update(application)


def ensure_login_role(alias: str, user: str, password: str) -> list[str]:
    """Make the application's login role a member of the application's group roles, creating
    it (unprivileged, with ``password``) if it does not exist. Runs as the owner, after the
    migrations; returns warnings about what it found but would not change."""
    from psycopg import sql

    warnings = []
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = %s",
                       [user])
        found = cursor.fetchone()
        if found is None:
            cursor.execute(sql.SQL("CREATE ROLE {} " + LOGIN_ATTRIBUTES + " PASSWORD {}").format(
                sql.Identifier(user), sql.Literal(password)).as_string(cursor.connection))
        elif found[0]:
            # Someone's deliberate choice, or an administrator's account: say so, change nothing.
            warnings.append(f"the application's database role {user!r} is a superuser or "
                            "bypasses row-level security; see docs/operations.md")
        for group in (APPLICATION_GROUP, RETRIEVAL_ROLE):
            cursor.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", [user, group])
            if not cursor.fetchone()[0]:
                cursor.execute(sql.SQL("GRANT {} TO {}").format(
                    sql.Identifier(group), sql.Identifier(user)).as_string(cursor.connection))
    return warnings

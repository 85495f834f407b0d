"""The database roles Contexts uses, and the SQL that gives the application's login role its
rights (docs/operations.md, "Database roles").

- the **owner** (``contexts_owner`` when embedded, ``DATABASE_OWNER_URL`` elsewhere) owns the
  schema and runs migrations, backups and restores;
- ``contexts_application`` (NOLOGIN) holds the application's rights: DML on every table and
  sequence (default privileges cover tables later migrations create), the partition functions,
  and a row-level-security policy that lets it see every row *outside* retrieval;
- ``contexts_retrieval`` (NOLOGIN, migration 0002) is what a retrieval switches to with
  ``SET LOCAL ROLE``; there only the scope policies apply;
- the **application's login role** (``contexts_app`` when embedded, the user of
  ``DATABASE_URL``) is a member of both group roles and nothing else: no superuser, no
  BYPASSRLS, no CREATEROLE or CREATEDB, and it owns no table.

No Django import here: ``contexts.stack.servers`` (loaded by the settings) uses it.
"""

from __future__ import annotations

APPLICATION_GROUP = "contexts_application"
RETRIEVAL_ROLE = "contexts_retrieval"
# Attributes the application's login role must have; the superuser's and BYPASSRLS would turn
# row-level security off, CREATEROLE / CREATEDB would let a SQL injection grant itself more.
LOGIN_ATTRIBUTES = "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB NOREPLICATION"

# The application's group roles, created by whoever may (a superuser when embedded, the owner
# in a migration otherwise); the IF NOT EXISTS keeps both orders working.
CREATE_GROUP_ROLES = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{RETRIEVAL_ROLE}') THEN
        CREATE ROLE {RETRIEVAL_ROLE} NOLOGIN NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APPLICATION_GROUP}') THEN
        CREATE ROLE {APPLICATION_GROUP} NOLOGIN NOBYPASSRLS;
    END IF;
END $$;
"""


def role_attributes_sql() -> str:
    """Columns of pg_roles that must all be false for the application's login role."""
    return "rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication"

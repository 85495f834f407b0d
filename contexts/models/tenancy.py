"""Which table holds whose data: the one classification of every table in the schema, the rule
each class keeps, and the Citus DDL that distributes the schema by organization (issue 21,
item 5; ``docs/scale-out.md``).

- **tenant** — rows of one organization. Distributed by ``org_id`` (NOT NULL). Every unique
  key holds ``org_id`` — the primary key on ``id`` alone excepted, which the DDL swaps for
  ``(org_id, id)`` — and every foreign key to another tenant table is composite,
  ``(org_id, x_id) → (org_id, id)``, so related rows always live on one node.
- **reference** — no tenant data, read beside tenant rows (users, permissions, the
  organizations themselves, embedding generations): replicated to every node. A reference
  table refers to reference tables only.
- **local** — no tenant data, never joined with tenant rows: stays on the coordinator.
  Only local tables refer to local tables.

:func:`violations` checks a schema read from ``pg_catalog`` (:func:`read_schema`) against this
(``tests/foundation/test_tenant_schema.py`` runs it on the live schema); :func:`citus_ddl`
writes the distribution DDL that ``docs/scale-out.md`` carries verbatim (``manage.py citus_ddl``
prints it). A new table fails the test until it is classified here and the document is
regenerated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TENANT, REFERENCE, LOCAL = "tenant", "reference", "local"
ORG = "org_id"

# table → (class, why). One place; the test fails on a table missing here or here too much.
TABLES: dict[str, tuple[str, str]] = {
    # accounts
    "accounts_organization": (REFERENCE, "the tenants themselves: every tenant table refers to "
                              "it; slug and public id unique across the installation"),
    "accounts_scope": (TENANT, "scope rows of an organization's objects"),
    "accounts_repository": (TENANT, ""),
    "accounts_persona": (TENANT, ""),
    "accounts_session": (TENANT, ""),
    "accounts_membership": (TENANT, "a user's role in one organization"),
    "accounts_apitoken": (TENANT, ""),
    "accounts_apitoken_scopes": (TENANT, "a token's scopes (ApiToken.scopes)"),
    "accounts_externalidentity": (REFERENCE, "a person's identity at the single-sign-on "
                                  "provider: like auth_user, it spans every organization "
                                  "the person belongs to"),
    "accounts_verifiedemail": (REFERENCE, "the address an account's owner proved theirs: "
                               "like auth_user, it spans the person's organizations"),
    "accounts_invitation": (TENANT, "an administrator's invitation of an existing account, "
                            "which becomes a membership when its owner accepts"),
    # contexts
    "contexts_fragment": (TENANT, ""),
    "contexts_fragment_contexts": (TENANT, "a fragment's contexts (Fragment.contexts)"),
    "contexts_fragmentversion": (TENANT, ""),
    "contexts_pin": (TENANT, ""),
    "contexts_link": (TENANT, ""),
    "contexts_sourcedocument": (TENANT, ""),
    "contexts_sourcepointer": (TENANT, ""),
    "contexts_context": (TENANT, ""),
    "contexts_context_owners": (TENANT, "a context's owners (Context.owners)"),
    "contexts_contextsubscription": (TENANT, "with the subscriber's organization"),
    "contexts_embedding": (TENANT, "LIST-partitioned by org_id as well (one HNSW graph per "
                           "organization); its partitions follow it"),
    "contexts_dedupcandidate": (TENANT, ""),
    "contexts_stalenessscan": (TENANT, ""),
    "contexts_nudge": (TENANT, ""),
    "contexts_auditevent": (TENANT, ""),
    "contexts_ingestionjob": (TENANT, ""),
    "contexts_upload": (TENANT, "uploaded files waiting for their job"),
    "contexts_retrievaltrace": (TENANT, ""),
    "contexts_change": (TENANT, "the change feed: an organization's changes, in order"),
    "contexts_change_head": (TENANT, "the last sequence number of an organization's feed"),
    "contexts_follower": (TENANT, "how far each node's index follower has got, per "
                          "organization"),
    "contexts_proposal": (TENANT, "agents' proposals awaiting review (docs/adr/0017)"),
    "contexts_source": (TENANT, "git repositories followed, one per repository scope "
                        "(docs/sources.md)"),
    "contexts_secretfinding": (TENANT, "secrets found on the way in: kind, file and line, "
                               "never the value"),
    "contexts_embeddinggeneration": (REFERENCE, "one model per namespace for everyone; the "
                                     "embeddings refer to it"),
    "contexts_vectorcache": (LOCAL, "vectors by model and content hash, shared by every "
                             "organization on purpose and names none; written by every "
                             "ingestion (a reference table would copy each write to every "
                             "node), read by key alone"),
    "contexts_evalrun": (LOCAL, "evaluation runs of the operator's datasets, no organization"),
    # Django and django-guardian
    "auth_user": (REFERENCE, "people belong to many organizations; tenant rows refer to them "
                  "(owners, editors, actors)"),
    "auth_group": (REFERENCE, ""),
    "auth_permission": (REFERENCE, ""),
    "auth_group_permissions": (REFERENCE, ""),
    "auth_user_groups": (REFERENCE, ""),
    "auth_user_user_permissions": (REFERENCE, ""),
    "django_content_type": (REFERENCE, ""),
    "guardian_userobjectpermission": (REFERENCE, "grants on organizations, repositories, "
                                      "personas and sessions, by (content type, object pk): "
                                      "read with the tenant rows they name (accounts.scopes)"),
    "guardian_groupobjectpermission": (REFERENCE, "as above, for groups"),
    "django_session": (LOCAL, "console logins, read by key"),
    "django_admin_log": (LOCAL, "the operator's admin history"),
    "django_migrations": (LOCAL, "the schema's history; migrate runs on the coordinator"),
}

# Tenant columns that name a row of another tenant table with no foreign key, on purpose:
# (table, column) → why. The rule: such a column has no foreign key at all.
CROSS_TENANT: dict[tuple[str, str], str] = {
    ("contexts_contextsubscription", "context_id"):
        "a published context may be another organization's (subscribed across organizations, "
        "accounts.scopes); Django's on_delete removes the subscriptions of a deleted context",
}

# The first distributed table: the others are co-located with it.
COLOCATION_ANCHOR = "accounts_scope"


@dataclass(frozen=True)
class Key:
    """A unique index (primary key, unique constraint or unique index)."""

    name: str
    columns: tuple[str, ...]
    primary: bool = False


@dataclass(frozen=True)
class ForeignKey:
    name: str
    columns: tuple[str, ...]
    table: str
    ref_columns: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    name: str
    columns: dict[str, bool]  # name → NOT NULL
    keys: tuple[Key, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    partitioned: bool = False

    @property
    def primary_key(self) -> Key | None:
        return next((key for key in self.keys if key.primary), None)


Schema = dict[str, Table]

_TABLES_SQL = """
    SELECT c.oid, c.relname, c.relkind = 'p' FROM pg_class c
    WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
      AND NOT c.relispartition
"""
_COLUMNS_SQL = """
    SELECT attrelid, attname, attnotnull FROM pg_attribute
    WHERE attrelid = ANY(%s) AND attnum > 0 AND NOT attisdropped
"""
# An expression in an index has no column name: it shows as NULL, never as org_id.
_KEYS_SQL = """
    SELECT ix.indrelid, i.relname, ix.indisprimary,
           ARRAY(SELECT a.attname FROM unnest(ix.indkey[0:ix.indnkeyatts - 1])
                        WITH ORDINALITY AS k(attnum, n)
                 LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.attnum
                 ORDER BY k.n)
    FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid
    WHERE ix.indisunique AND ix.indrelid = ANY(%s)
"""
_FOREIGN_KEYS_SQL = """
    SELECT con.conrelid, con.conname, r.relname,
           ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, n)
                 JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
                 ORDER BY k.n),
           ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, n)
                 JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum
                 ORDER BY k.n)
    FROM pg_constraint con JOIN pg_class r ON r.oid = con.confrelid
    WHERE con.contype = 'f' AND con.conrelid = ANY(%s)
"""


def read_schema(connection) -> Schema:
    """The tables of the connection's schema (partitions left out: they follow their parent),
    with their columns, unique keys and foreign keys, from ``pg_catalog``."""
    with connection.cursor() as cursor:
        cursor.execute(_TABLES_SQL)
        tables = {oid: (name, partitioned) for oid, name, partitioned in cursor.fetchall()}
        oids = list(tables)
        columns: dict[int, dict[str, bool]] = {oid: {} for oid in oids}
        keys: dict[int, list[Key]] = {oid: [] for oid in oids}
        fks: dict[int, list[ForeignKey]] = {oid: [] for oid in oids}
        cursor.execute(_COLUMNS_SQL, [oids])
        for oid, name, not_null in cursor.fetchall():
            columns[oid][name] = not_null
        cursor.execute(_KEYS_SQL, [oids])
        for oid, name, primary, cols in cursor.fetchall():
            keys[oid].append(Key(name, tuple(c or "<expression>" for c in cols), primary))
        cursor.execute(_FOREIGN_KEYS_SQL, [oids])
        for oid, name, ref, cols, ref_cols in cursor.fetchall():
            fks[oid].append(ForeignKey(name, tuple(cols), ref, tuple(ref_cols)))
    return {name: Table(name, columns[oid], tuple(sorted(keys[oid], key=lambda k: k.name)),
                        tuple(sorted(fks[oid], key=lambda f: f.name)), partitioned)
            for oid, (name, partitioned) in tables.items()}


def _kind(classification: dict[str, tuple[str, str]], table: str) -> str | None:
    entry = classification.get(table)
    return entry[0] if entry else None


def violations(schema: Schema, classification: dict[str, tuple[str, str]] = TABLES,
               cross_tenant: dict[tuple[str, str], str] = CROSS_TENANT) -> list[str]:
    """Every way ``schema`` breaks the rules of its classification (empty: it keeps them)."""
    found: list[str] = []
    for name in sorted(set(schema) - set(classification)):
        found.append(f"{name}: not classified (add it to contexts/models/tenancy.py TABLES)")
    for name in sorted(set(classification) - set(schema)):
        found.append(f"{name}: classified, but the schema has no such table")
    for name, (kind, _) in sorted(classification.items()):
        if kind not in (TENANT, REFERENCE, LOCAL):
            found.append(f"{name}: unknown class {kind!r}")
    for name, table in sorted(schema.items()):
        kind = _kind(classification, name)
        if kind == TENANT:
            if ORG not in table.columns:
                found.append(f"{name}: tenant table without {ORG}")
            elif not table.columns[ORG]:
                found.append(f"{name}: {ORG} may be NULL")
            for key in table.keys:
                if ORG in key.columns or (key.primary and key.columns == ("id",)):
                    continue
                found.append(f"{name}: unique key {key.name} {key.columns} lacks {ORG}")
        for fk in table.foreign_keys:
            ref_kind = _kind(classification, fk.table)
            if kind is None or ref_kind is None:
                continue  # reported as unclassified
            if kind == TENANT and ref_kind == TENANT:
                if (ORG, ORG) not in zip(fk.columns, fk.ref_columns, strict=True):
                    found.append(f"{name}: foreign key {fk.name} {fk.columns} → {fk.table}"
                                 f"{fk.ref_columns} between tenant tables lacks {ORG}")
            elif ref_kind == TENANT or (ref_kind == LOCAL and kind != LOCAL):
                found.append(f"{name}: a {kind} table may not refer to a {ref_kind} table "
                             f"({fk.name} → {fk.table})")
        for (cross_table, column), _ in cross_tenant.items():
            if cross_table != name:
                continue
            if column not in table.columns:
                found.append(f"{name}: cross-tenant column {column} does not exist")
            if any(column in fk.columns for fk in table.foreign_keys):
                found.append(f"{name}: cross-tenant column {column} has a foreign key")
    return found


def _in_reference_order(schema: Schema, names: list[str], first: str | None = None
                        ) -> list[str]:
    """``names`` with every table after the ones it refers to (ties alphabetical)."""
    wanted = set(names)
    after = {name: {fk.table for fk in schema[name].foreign_keys
                    if fk.table in wanted and fk.table != name} for name in names}
    ordered: list[str] = []
    if first in wanted and not after[first]:
        ordered.append(first)
    while len(ordered) < len(names):
        ready = sorted(n for n in names if n not in ordered and after[n] <= set(ordered))
        if not ready:
            raise ValueError(f"foreign keys in a cycle among {sorted(wanted - set(ordered))}")
        ordered.append(ready[0])
    return ordered


def citus_ddl(schema: Schema, classification: dict[str, tuple[str, str]] = TABLES) -> str:
    """The statements that distribute ``schema`` on Citus, run on the coordinator once the
    schema is migrated (docs/scale-out.md carries this text verbatim)."""
    by_kind: dict[str, list[str]] = {TENANT: [], REFERENCE: [], LOCAL: []}
    for name in schema:
        by_kind[_kind(classification, name)].append(name)
    lines = ["-- 1. Citus wants the distribution column in every primary key.",
             *(f"ALTER TABLE {name} DROP CONSTRAINT {schema[name].primary_key.name},"
               f" ADD PRIMARY KEY ({ORG}, id);"
               for name in sorted(by_kind[TENANT])
               if schema[name].primary_key and ORG not in schema[name].primary_key.columns),
             "",
             "-- 2. Reference tables: a copy on every node (referenced tables first).",
             *(f"SELECT create_reference_table('{name}');"
               for name in _in_reference_order(schema, by_kind[REFERENCE])),
             "",
             "-- 3. Tenant tables: distributed by organization, all co-located",
             "--    (referenced tables first).",
             ]
    for name in _in_reference_order(schema, by_kind[TENANT], first=COLOCATION_ANCHOR):
        colocate = "" if name == COLOCATION_ANCHOR else f", colocate_with => '{COLOCATION_ANCHOR}'"
        lines.append(f"SELECT create_distributed_table('{name}', '{ORG}'{colocate});")
    lines += ["",
              "-- 4. Local tables: stay on the coordinator, nothing to run.",
              *(f"-- local: {name}" for name in sorted(by_kind[LOCAL]))]
    return "\n".join(lines) + "\n"


_DOC_TABLE = re.compile(
    r"create_distributed_table\('(?P<tenant>\w+)', 'org_id'"
    r"|create_reference_table\('(?P<reference>\w+)'\)"
    r"|^-- local: (?P<local>\w+)$", re.MULTILINE)


def documented_tables(text: str) -> list[tuple[str, str]]:
    """(table, class) for every table a text's DDL names, in order."""
    return [(match.group(match.lastgroup), match.lastgroup) for match in _DOC_TABLE.finditer(text)]

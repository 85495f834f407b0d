"""Every tenant table carries the organization (issue 21, item 5): the live schema, read from
``pg_catalog``, has every table classified in ``contexts/models/tenancy.py`` and keeps the rule of
its class — a tenant table has a NOT NULL ``org_id`` in every unique key and in every foreign key to
another tenant table; reference and local tables refer to no tenant table — and
``docs/scale-out.md`` carries the Citus DDL of exactly these tables. The checker is shown to
catch each kind of break, and the rows the application writes carry their organization."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from accounts.models import Scope, TokenScope
from accounts.tokens import create_token
from contexts.models import (
    Context,
    ContextOwner,
    ContextSubscription,
    Fragment,
    FragmentContext,
    FragmentVersion,
    Link,
    Pin,
    SourceDocument,
    SourcePointer,
    tenancy,
)
from contexts.services import fragments as fragment_service
from contexts.services.pins import pin_fragment
from tests.factories import OrganizationFactory, RepositoryFactory

DOC = Path(__file__).resolve().parents[2] / "docs" / "scale-out.md"


@pytest.fixture
def schema(db) -> tenancy.Schema:
    return tenancy.read_schema(connection)


def test_every_table_is_classified_and_keeps_the_rule_of_its_class(schema):
    assert tenancy.violations(schema) == []
    # What the rule was checked on: the tables the issue names among them, with org_id.
    for name in ("contexts_fragmentversion", "contexts_pin", "contexts_link",
                 "contexts_sourcepointer", "contexts_nudge", "contexts_contextsubscription",
                 "contexts_fragment_contexts", "contexts_context_owners",
                 "accounts_apitoken_scopes", "accounts_scope", "contexts_auditevent"):
        assert tenancy.TABLES[name][0] == tenancy.TENANT
        assert schema[name].columns["org_id"] is True, name  # NOT NULL
    tenant_fks = [fk for table in schema.values() if tenancy.TABLES[table.name][0] == "tenant"
                  for fk in table.foreign_keys if tenancy.TABLES[fk.table][0] == "tenant"]
    assert len(tenant_fks) >= 30
    assert all(fk.columns[0] == "org_id" and fk.ref_columns == ("org_id", "id")
               for fk in tenant_fks)
    embedding = schema["contexts_embedding"]
    assert embedding.partitioned and embedding.primary_key.columns == ("org_id", "id")
    assert not any(name.startswith("contexts_embedding_p") for name in schema)  # partitions


def _with(schema: tenancy.Schema, name: str, **changes) -> tenancy.Schema:
    return {**schema, name: dataclasses.replace(schema[name], **changes)}


def test_the_checker_catches_every_kind_of_break(schema):
    pin = schema["contexts_pin"]
    broken = {
        "not classified": {**schema, "contexts_rogue": tenancy.Table("contexts_rogue",
                                                                     {"id": True})},
        "classified, but the schema has no such table": {
            k: v for k, v in schema.items() if k != "contexts_link"},
        "tenant table without org_id": _with(
            schema, "contexts_pin", columns={k: v for k, v in pin.columns.items()
                                             if k != "org_id"}),
        "org_id may be NULL": _with(schema, "contexts_pin",
                                    columns={**pin.columns, "org_id": False}),
        "lacks org_id": _with(schema, "contexts_pin", keys=(
            *pin.keys, tenancy.Key("pin_scope_position", ("scope_id", "position")))),
        "between tenant tables lacks org_id": _with(schema, "contexts_pin", foreign_keys=(
            *pin.foreign_keys,
            tenancy.ForeignKey("pin_fragment", ("fragment_id",), "contexts_fragment", ("id",)))),
        "a reference table may not refer to a tenant table": _with(
            schema, "accounts_organization", foreign_keys=(tenancy.ForeignKey(
                "org_scope", ("scope_id",), "accounts_scope", ("id",)),)),
        "a tenant table may not refer to a local table": _with(
            schema, "contexts_pin", foreign_keys=(*pin.foreign_keys, tenancy.ForeignKey(
                "pin_cache", ("fragment_id",), "contexts_vectorcache", ("id",)))),
        "cross-tenant column context_id has a foreign key": _with(
            schema, "contexts_contextsubscription", foreign_keys=(tenancy.ForeignKey(
                "sub_context", ("org_id", "context_id"), "contexts_context",
                ("org_id", "id")),)),
    }
    for expected, doctored in broken.items():
        found = tenancy.violations(doctored)
        assert len(found) == 1 and expected in found[0], (expected, found)
    # A primary key on id alone is allowed (the DDL swaps it); on anything else without org_id,
    # not.
    assert pin.primary_key.columns == ("id",)
    renamed = _with(schema, "contexts_pin", keys=(
        dataclasses.replace(pin.primary_key, columns=("uid",)),))
    assert any("lacks org_id" in problem for problem in tenancy.violations(renamed))


def test_docs_scale_out_carries_the_ddl_of_exactly_the_schemas_tables(schema):
    text = DOC.read_text()
    named = tenancy.documented_tables(text)
    assert len(named) == len({table for table, _ in named}), "a table is named twice"
    assert dict(named) == {name: tenancy.TABLES[name][0] for name in schema}
    ddl = tenancy.citus_ddl(schema)
    assert f"```sql\n{ddl}```" in text, (
        "docs/scale-out.md's DDL is not this schema's: paste `manage.py citus_ddl`\n" + ddl)
    # Every tenant table whose primary key is id alone gets the key swap before it is
    # distributed.
    for name, table in schema.items():
        if tenancy.TABLES[name][0] == tenancy.TENANT and table.primary_key.columns == ("id",):
            assert (f"ALTER TABLE {name} DROP CONSTRAINT {table.primary_key.name}, "
                    f"ADD PRIMARY KEY (org_id, id);") in ddl
    # And a document that forgets a table, or names one the schema lacks, is caught.
    forgetful = text.replace("SELECT create_distributed_table('contexts_pin', 'org_id', "
                             "colocate_with => 'accounts_scope');\n", "")
    assert forgetful != text
    assert dict(tenancy.documented_tables(forgetful)) != dict(named)
    assert "contexts_pin" not in dict(tenancy.documented_tables(forgetful))


def test_the_command_prints_the_ddl_and_checks(schema, capsys):
    call_command("citus_ddl")
    assert capsys.readouterr().out == tenancy.citus_ddl(schema)
    call_command("citus_ddl", "--check")
    assert "every one classified" in capsys.readouterr().out


def test_rows_written_by_the_application_carry_their_organization(db):
    org, other = OrganizationFactory(slug="acme"), OrganizationFactory(slug="globex")
    assert Scope.objects.get(pk=org.scope_id).org_id == org.pk  # written before the org row
    repo = RepositoryFactory(org=org, slug="web")
    admin = get_user_model().objects.create(username="root", is_superuser=True)
    context = Context.objects.create(org=org, home=repo.scope, slug="runbooks", name="r")
    context.owners.add(admin)
    first = fragment_service.create_fragment(admin, repo.scope, body="one", contexts=[context])
    second = fragment_service.create_fragment(admin, org.scope, body="two")
    fragment_service.edit_fragment(admin, second, based_on_version=1, body="two, edited")
    fragment_service.update_metadata(admin, [first, second], kind="runbook")  # bulk_create
    pin_fragment(admin, first, repo.scope)  # before it is superseded: then it cannot be
    fragment_service.supersede_fragment(admin, first, second)  # a link, through save()
    document = SourceDocument.objects.create(org=org, repository=repo, path="a.md",
                                             content_hash="x")
    SourcePointer.objects.create(document=document, fragment=first, anchor="a")
    subscriber = RepositoryFactory(org=other, slug="api").scope
    ContextSubscription.objects.create(context=context, subscriber=subscriber)  # across orgs
    token, _ = create_token(org, "agent", [repo.scope, org.scope])
    rows = {
        FragmentVersion: FragmentVersion.objects.filter(fragment__in=[first, second]),
        FragmentContext: FragmentContext.objects.all(),
        ContextOwner: ContextOwner.objects.all(),
        Pin: Pin.objects.all(),
        Link: Link.objects.all(),
        SourcePointer: SourcePointer.objects.all(),
        TokenScope: TokenScope.objects.filter(apitoken=token),
    }
    for model, queryset in rows.items():
        orgs = list(queryset.values_list("org_id", flat=True))
        assert orgs and set(orgs) == {org.pk}, model
    assert FragmentVersion.objects.filter(fragment=second).count() == 3
    assert ContextSubscription.objects.get().org_id == other.pk  # the subscriber's
    with transaction.atomic():  # every deferred composite key holds
        connection.cursor().execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_a_row_in_another_organization_than_its_parent_is_refused(db):
    org, other = OrganizationFactory(slug="acme"), OrganizationFactory(slug="globex")
    admin = get_user_model().objects.create(username="root", is_superuser=True)
    fragment = fragment_service.create_fragment(admin, org.scope, body="one")
    assert Fragment.objects.get(pk=fragment.pk).org_id == org.pk
    with pytest.raises(IntegrityError, match="contexts_pin_fragment_org_fk"), \
            transaction.atomic():
        Pin.objects.create(org=other, fragment=fragment, scope=other.scope)
        connection.cursor().execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_the_admin_edits_token_scopes_and_context_owners_through_their_rows(client, db):
    """Through models leave Django's many-to-many form field out: inlines take its place,
    and the rows they write take the organization of the token or context."""
    org = OrganizationFactory(slug="acme")
    repo = RepositoryFactory(org=org, slug="web")
    admin = get_user_model().objects.create(username="root", is_superuser=True,
                                            is_staff=True)
    client.force_login(admin)
    token, _ = create_token(org, "agent", [org.scope])
    context = Context.objects.create(org=org, home=org.scope, slug="c", name="c")
    forms = {
        f"/admin/accounts/apitoken/{token.pk}/change/": (
            "bindings", "scope", repo.scope_id,
            {"name": "agent", "org": org.pk}),
        f"/admin/contexts/context/{context.pk}/change/": (
            "ownerships", "user", admin.pk,
            {"home": org.scope_id, "slug": "c", "name": "c", "org": org.pk,
             "created_at_0": "2026-01-01", "created_at_1": "00:00:00"}),
    }
    for url, (prefix, field, value, data) in forms.items():
        page = client.get(url)
        assert page.status_code == 200 and f"{prefix}-TOTAL_FORMS" in page.text
        existing = int(page.context["inline_admin_formsets"][0].formset.initial_form_count())
        rows = {f"{prefix}-TOTAL_FORMS": existing + 1, f"{prefix}-INITIAL_FORMS": existing}
        for n, form in enumerate(page.context["inline_admin_formsets"][0].formset.forms):
            rows |= {f"{prefix}-{n}-id": form.instance.pk,
                     f"{prefix}-{n}-{field}": getattr(form.instance, f"{field}_id")}
        rows[f"{prefix}-{existing}-{field}"] = value
        response = client.post(url, {**data, **rows})
        assert response.status_code == 302, response.context["adminform"].form.errors
    assert sorted(TokenScope.objects.filter(apitoken=token).values_list("scope", "org")) == \
        sorted([(org.scope_id, org.pk), (repo.scope_id, org.pk)])
    assert list(ContextOwner.objects.values_list("user", "org")) == [(admin.pk, org.pk)]


# Runs in a database of its own: migrate to the schema before issue 21's item 5, write one of
# every row that lacked an organization (through the models of that time), migrate forward,
# back and forward again, and print each table's org_id values.
UPGRADE = """
import json, uuid, django
django.setup()
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("accounts", "0002_scope_restrict"), ("contexts", "0023_legacy_uploads_into_storage")]
for app, name in BEFORE:
    call_command("migrate", app, name, verbosity=0)
apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
M = lambda label: apps.get_model(*label.split("."))
Scope, Org = M("accounts.Scope"), M("accounts.Organization")

def org(slug):
    scope = Scope.objects.create(kind="org", public_id="org_" + slug, label=slug)  # org NULL
    return Org.objects.create(public_id="org_" + slug, slug=slug, name=slug, scope=scope)

a, b = org("acme"), org("globex")
def child(kind, owner, parent, pid):
    return Scope.objects.create(kind=kind, public_id=pid, label=pid, org=owner, parent=parent)
repo = M("accounts.Repository").objects.create(
    org=a, slug="web", name="web", public_id="repo_a", scope=child("repo", a, a.scope, "repo_a"))
other = M("accounts.Repository").objects.create(
    org=b, slug="api", name="api", public_id="repo_b", scope=child("repo", b, b.scope, "repo_b"))
user = M("auth.User").objects.create(username="u")
ctx = M("contexts.Context").objects.create(org=a, home=a.scope, slug="c", name="c",
                                           public_id="cx_a", scope=child("context", a, a.scope,
                                                                         "cx_a"))
ctx.owners.add(user)
Fragment = M("contexts.Fragment")
f1, f2 = (Fragment.objects.create(org=a, scope=repo.scope, body=t, content_hash=t,
                                  public_id="frag_" + t, uid=uuid.uuid4()) for t in "xy")
f1.contexts.add(ctx)
M("contexts.FragmentVersion").objects.create(fragment=f1, number=1, body="x")
M("contexts.Pin").objects.create(fragment=f1, scope=repo.scope)
M("contexts.Link").objects.create(source=f1, target=f2)
doc = M("contexts.SourceDocument").objects.create(org=a, repository=repo, path="a.md",
                                                  content_hash="h")
M("contexts.SourcePointer").objects.create(fragment=f1, document=doc, anchor="a")
M("contexts.Nudge").objects.create(fragment=f1, owner=user)
M("contexts.ContextSubscription").objects.create(context=ctx, subscriber=other.scope)
token = M("accounts.ApiToken").objects.create(org=a, name="t", prefix="p", secret_hash="s",
                                              public_id="tok_a")
token.scopes.add(repo.scope)
M("contexts.AuditEvent").objects.create(org=None, action="fragment.edit", object_type="fragment",
                                        object_id=f1.public_id)
generation = M("contexts.EmbeddingGeneration").objects.create(namespace="prose", model_name="m")
with connection.cursor() as cursor:
    cursor.execute("SELECT contexts_create_embedding_partition(%s)", [a.pk])
    cursor.execute("INSERT INTO contexts_embedding (org_id, fragment_id, fragment_version,"
                   " generation_id, namespace, content_hash, embedding)"
                   " VALUES (%s, %s, 1, %s, 'prose', 'h', %s)",
                   [a.pk, f1.pk, generation.pk, "[" + ",".join(["0.1"] * 384) + "]"])

call_command("migrate", verbosity=0)
call_command("migrate", "contexts", "0023_legacy_uploads_into_storage", verbosity=0)
call_command("migrate", "accounts", "0002_scope_restrict", verbosity=0)
call_command("migrate", verbosity=0)
orgs = {}
with connection.cursor() as cursor:
    for table in ("accounts_scope", "accounts_apitoken_scopes", "contexts_fragmentversion",
                  "contexts_pin", "contexts_link", "contexts_sourcepointer", "contexts_nudge",
                  "contexts_contextsubscription", "contexts_fragment_contexts",
                  "contexts_context_owners", "contexts_auditevent"):
        cursor.execute(f"SELECT org_id FROM {table} ORDER BY id")
        orgs[table] = [row[0] for row in cursor.fetchall()]
    cursor.execute("SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass"
                   " AND contype = 'f'", ["contexts_embedding_p%d" % a.pk])
    partition_fks = sorted(row[0] for row in cursor.fetchall())
print(json.dumps({"a": a.pk, "b": b.pk, "orgs": orgs, "partition_fks": partition_fks}))
"""


@pytest.mark.slow
def test_migrations_fill_the_organization_of_existing_rows_and_reverse(services):
    import json
    import subprocess
    import sys

    from contexts.stack.servers import PG_OWNER_ROLE
    from tests.conftest import ROOT

    services.postgres.ensure_database("tenancy_upgrade")
    owner = services.postgres.url_for(PG_OWNER_ROLE, "tenancy_upgrade")
    result = subprocess.run([sys.executable, "-c", UPGRADE], cwd=ROOT, capture_output=True,
                            text=True, timeout=600, env={**services.env(), "DATABASE_URL": owner,
                                                         "DATABASE_OWNER_URL": owner})
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    a, b = out["a"], out["b"]
    assert out["orgs"].pop("accounts_scope") == [a, b, a, b, a]  # the org scopes filled too
    assert out["orgs"].pop("contexts_contextsubscription") == [b]  # the subscriber's
    assert out["orgs"] == {table: [a] for table in out["orgs"]}
    assert "contexts_embedding_fragment_org_fk" in out["partition_fks"]

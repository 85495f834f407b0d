"""``import_org --as NEW`` (issue 40, item 6): the copy gets a name of its own, the operator is
told which roles stayed behind, and the new organization's index is made without alarm.

- Under ``--as`` without ``--name`` the organization is named as in the archive followed by
  the new slug ("Small (small2)"); ``--name`` names it; an empty name is refused naming the
  field, and nothing is written.
- The archive carries organization roles only: the command prints how many object
  permission grants (repository roles) stayed behind, counted at export.
- An import keeps its transaction open while it embeds. A node follower running meanwhile (the
  web process's, under ``make run``) no longer takes the new organization's index directory
  for a deleted organization's and removes it, which left the import to recreate it with the
  warning "lexical index of org N is unreadable".
- Nor does that transaction hold the embeddings' table: the new organization's partition is
  made and committed before it, so every other organization's retrievals and writes go on
  while the import runs; a refused import drops it.
"""

from __future__ import annotations

import logging
import threading

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models.signals import post_save

from accounts.models import Organization, Role
from accounts.permissions import SYSTEM
from contexts.indexes import follower, indexing
from contexts.usecases import members
from tests.portability.conftest import small  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _export(tmp_path) -> str:
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    return str(out)


def test_the_copy_is_named_after_its_slug_unless_named(small, tmp_path, capsys):  # noqa: F811
    archive = _export(tmp_path)
    call_command("import_org", archive, "--as", "small2")
    assert Organization.objects.get(slug="small2").name == "Small (small2)"
    call_command("import_org", archive, "--as", "small3", "--name", "  Small, restored ")
    assert Organization.objects.get(slug="small3").name == "Small, restored"
    assert "“Small, restored”" in capsys.readouterr().out
    names = list(Organization.objects.values_list("name", flat=True))
    assert len(names) == len(set(names)) == 3


def test_a_bad_name_is_refused_naming_the_field(small, tmp_path):  # noqa: F811
    archive = _export(tmp_path)
    for bad in ("", "   ", "x" * 201, "a\x00b"):
        with pytest.raises(CommandError, match="name: "):
            call_command("import_org", archive, "--as", "small4", "--name", bad)
    assert not Organization.objects.filter(slug="small4").exists()


def test_the_dropped_repository_roles_are_counted(small, tmp_path, capsys):  # noqa: F811
    repo = small.org.repositories.get(slug="api")
    members.set_repository_role(SYSTEM, members.SetRepositoryRole(
        small.org, "val", repo, Role.TECH_LEAD))  # view, curate, pin: three grants
    archive = _export(tmp_path)
    capsys.readouterr()
    call_command("import_org", archive, "--as", "small5")
    out = capsys.readouterr().out
    assert "repository roles were not imported: 3 object permission grants" in out
    assert "Members page" in out


def test_no_roles_no_alarm(small, tmp_path, capsys):  # noqa: F811
    archive = _export(tmp_path)
    capsys.readouterr()
    call_command("import_org", archive, "--as", "small6")
    assert "none dropped" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_a_follower_pass_during_the_import_leaves_its_index(small, tmp_path,  # noqa: F811
                                                            caplog):
    archive = _export(tmp_path)
    caplog.set_level(logging.INFO, logger="contexts.indexes.follower")
    seen: list[bool] = []

    def follower_elsewhere(sender, instance: Organization, created: bool, **kwargs) -> None:
        """While the import's transaction is open: one pass of a node follower on its own
        connection, as the web process runs it."""
        if not created:
            return

        def one_pass() -> None:
            try:
                follower.NodeFollower(interval=1).follow_once()
            finally:
                connection.close()

        thread = threading.Thread(target=one_pass)
        thread.start()
        thread.join()
        seen.append(indexing.index_path(instance.pk).exists())

    post_save.connect(follower_elsewhere, sender=Organization, weak=False)
    try:
        call_command("import_org", archive, "--as", "small7")
    finally:
        post_save.disconnect(follower_elsewhere, sender=Organization)
    assert seen == [True]  # the directory survived the pass
    alarms = [r.getMessage() for r in caplog.records
              if r.name == "contexts.indexes.follower" and r.levelno >= logging.WARNING]
    assert alarms == []
    assert not [r for r in caplog.records if "removed the index" in r.getMessage()]
    assert follower.lexical_index(Organization.objects.get(slug="small7").pk).count() == 2


@pytest.mark.django_db(transaction=True)
def test_other_organizations_read_and_write_while_an_import_runs(small, tmp_path,  # noqa: F811
                                                                 services):
    archive = _export(tmp_path)
    outcomes: dict[str, str] = {}

    def meanwhile(sender, instance: Organization, created: bool, **kwargs) -> None:
        """While the import's transaction is open: another session reads the embeddings (as
        a retrieval does) and writes fragments (as an ingestion does), each given 2 s."""
        if not created:
            return
        with psycopg.connect(services.test_database_owner_url, autocommit=True) as other:
            other.execute("SET lock_timeout = '2s'")
            for name, sql in (("read embeddings", "SELECT count(*) FROM contexts_embedding"),
                              ("write fragments",
                               "UPDATE contexts_fragment SET title = title WHERE false")):
                try:
                    other.execute(sql)
                    outcomes[name] = "done"
                except psycopg.errors.LockNotAvailable:
                    outcomes[name] = "waited past 2 s"

    post_save.connect(meanwhile, sender=Organization, weak=False)
    try:
        call_command("import_org", archive, "--as", "small8")
    finally:
        post_save.disconnect(meanwhile, sender=Organization)
    assert outcomes == {"read embeddings": "done", "write fragments": "done"}
    org = Organization.objects.get(slug="small8")
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"contexts_embedding_p{org.pk}"])
        assert cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_refused_import_leaves_no_partition(small, tmp_path):  # noqa: F811
    archive = _export(tmp_path)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = "
                       "'contexts_embedding'::regclass")
        before = cursor.fetchone()[0]
    with pytest.raises(CommandError, match="exists already"):
        call_command("import_org", archive)  # as "small", which exists
    with pytest.raises(CommandError, match="name: "):
        call_command("import_org", archive, "--as", "small9", "--name", " ")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = "
                       "'contexts_embedding'::regclass")
        assert cursor.fetchone()[0] == before


def _partition_of(org_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"contexts_embedding_p{org_id}"])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_failed_import_drops_only_what_no_organization_uses(small, tmp_path,  # noqa: F811
                                                              monkeypatch):
    from contexts.services import change_feed, partitions

    archive = _export(tmp_path)
    # A slug taken is refused before anything is made for the import.
    prepared: list[int | None] = []
    real = partitions.prepared_organization_id
    monkeypatch.setattr(partitions, "prepared_organization_id",
                        lambda: prepared.append(real()) or prepared[-1])
    with pytest.raises(CommandError, match="exists already"):
        call_command("import_org", archive)
    assert prepared == []
    # The organizations' sequence lags (rows restored with their ids): the id it gives is
    # small's; the import is refused and small keeps its partition.
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('accounts_organization', 'id'), "
                       "%s, false)", [small.org.pk])
    with pytest.raises(CommandError, match="import refused"):
        call_command("import_org", archive, "--as", "small10")
    assert prepared == [small.org.pk] and _partition_of(small.org.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('accounts_organization', 'id'), "
                       "(SELECT max(id) FROM accounts_organization))")

    # Interrupted after its transaction committed (Ctrl-C during the on-commit work): the
    # organization is there, and so is its partition.
    def interrupted(**kwargs) -> None:
        raise KeyboardInterrupt

    change_feed.changes_committed.connect(interrupted, weak=False)
    try:
        with pytest.raises(KeyboardInterrupt):
            call_command("import_org", archive, "--as", "small11", "--no-wait")
    finally:
        change_feed.changes_committed.disconnect(interrupted)
    org = Organization.objects.get(slug="small11")
    assert prepared[-1] == org.pk and _partition_of(org.pk)

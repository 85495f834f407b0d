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
"""

from __future__ import annotations

import logging
import threading

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

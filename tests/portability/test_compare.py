"""``manage.py compare_orgs``: the check after an import says "same" for a faithful copy and
fails, naming the query, once one organization's answer differs."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.permissions import SYSTEM
from contexts.indexes import follower
from contexts.models import Fragment
from contexts.services import fragments as fragment_service

pytestmark = pytest.mark.django_db

QUERIES = ["--query", "cache keys tenant", "--query", "release train"]


def test_compare_says_same_then_different(small, tmp_path, capsys):
    follower.reindex_fragments([f.pk for f in small.fragments])
    out = tmp_path / "small.tar.gz"
    call_command("export_org", "--org", "small", str(out))
    call_command("import_org", str(out), "--as", "copy")
    capsys.readouterr()
    call_command("compare_orgs", "small", "copy", "--repo", "api", *QUERIES)
    assert "2 of 2 queries return the same answer" in capsys.readouterr().out

    changed = Fragment.objects.get(org__slug="copy", title="Release train")
    fragment_service.edit_fragment(SYSTEM, changed, based_on_version=changed.version,
                                   body="The release train leaves every Thursday.")
    follower.reindex_fragments([changed.pk])
    # Both fragments fit every answer of this small organization: both answers change.
    with pytest.raises(CommandError, match="2 queries differ"):
        call_command("compare_orgs", "small", "copy", "--repo", "api", *QUERIES)
    printed = capsys.readouterr().out
    assert "DIFFERENT" in printed and "0 of 2 queries return the same answer" in printed
    with pytest.raises(CommandError, match="no organization"):
        call_command("compare_orgs", "small", "nowhere", *QUERIES)

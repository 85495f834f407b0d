"""Red-team finding 3 (medium): front matter could make any user of the installation the owner of
a fragment — who was then e-mailed it, could edit it from a login-free nudge link (the version
recording no editor), and an unknown name fell back silently (a cross-tenant username oracle).

After: an owner named in front matter must curate the target scope, else the next rule of the
owner chain decides (issue 38: CODEOWNERS, front matter, the file's git author, the scope's tech
lead — never whoever ran the ingest) and the job warns in words that do not say whether the
name exists; a nudge-link edit records its editor; a link stops working for someone who lost
access.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from accounts.models import Membership
from contexts.governance import nudges
from contexts.ingestion.jobs import run_job
from contexts.models import Fragment, FragmentVersion, IngestionJob, Nudge
from contexts.usecases.ingestion import create_job
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def ingest_with_owner(cast, tmp_path, name: str, settings) -> IngestionJob:
    settings.LEXICAL_INDEX_DIR = tmp_path / "index"
    folder = tmp_path / f"src-{len(name)}-{abs(hash(name))}"
    folder.mkdir()
    (folder / "runbook.md").write_text(
        f"---\nowner: {name}\nkind: runbook\n---\n# Restart\n\nRestart the worker first.\n")
    from accounts.permissions import SYSTEM

    job = create_job(SYSTEM, cast.repo.scope, str(folder), created_by=cast.teammate)
    return run_job(job.pk)


def owners(job: IngestionJob) -> set[str]:
    return {f.owner.username for f in Fragment.objects.filter(sources__document__path="runbook.md",
                                                              scope=job.scope)}


def test_an_owner_outside_the_organization_is_not_honoured(cast, tmp_path, settings):
    job = ingest_with_owner(cast, tmp_path, "stranger", settings)  # admin of globex only
    assert owners(job) == {"lead"}  # the scope's tech lead, not the uploader (teammate)
    [warning] = job.warnings
    assert "stranger" in warning["reason"] and warning["path"] == "runbook.md"


def test_a_member_who_may_not_curate_is_not_honoured(cast, tmp_path, settings):
    job = ingest_with_owner(cast, tmp_path, "viewer", settings)
    assert owners(job) == {"lead"} and len(job.warnings) == 1


def test_the_warning_does_not_tell_whether_the_name_exists(cast, tmp_path, settings):
    exists = ingest_with_owner(cast, tmp_path, "stranger", settings).warnings[0]["reason"]
    Fragment.objects.all().delete()
    missing = ingest_with_owner(cast, tmp_path, "nobody-by-that-name", settings)
    assert missing.warnings[0]["reason"].replace("nobody-by-that-name", "X") == \
        exists.replace("stranger", "X")


def test_a_curator_of_the_scope_is_honoured(cast, tmp_path, settings):
    job = ingest_with_owner(cast, tmp_path, "lead", settings)
    assert owners(job) == {"lead"} and job.warnings == []


# --- nudge links ------------------------------------------------------------------------------
LINK = re.compile(r"https?://[^/\s]+(/governance/nudges/\S+/(edit|still-accurate))")


def open_nudge_for(cast, owner, mailoutbox) -> tuple[Fragment, dict[str, str]]:
    from accounts.permissions import SYSTEM
    from contexts.services.fragments import create_fragment

    fragment = create_fragment(SYSTEM, cast.repo.scope, title="Limiter",
                               body="The bucket refills once per second.", owner=owner)
    _, nudge = nudges.open_nudge(fragment, [{"code": "age", "detail": "old"}])
    nudges.send_nudge_email([nudge], owner)
    return fragment, {answer: path for path, answer in LINK.findall(mailoutbox[-1].body)}


def test_a_nudge_link_edit_records_its_editor(cast, mailoutbox):
    # The viewer owns a fragment (handed over to them earlier) but may not curate the scope.
    fragment, paths = open_nudge_for(cast, cast.viewer, mailoutbox)
    response = Client().post(paths["edit"], {"body": "It refills twice a second.",
                                             "version": "1"})
    assert response.status_code == 200
    version = FragmentVersion.objects.get(fragment=fragment, number=2)
    assert version.editor == cast.viewer


def test_a_nudge_link_stops_working_when_access_is_lost(cast, mailoutbox):
    fragment, paths = open_nudge_for(cast, cast.viewer, mailoutbox)
    Membership.objects.filter(user=cast.viewer).delete()
    client = Client()
    assert client.get(paths["still-accurate"]).status_code == 403
    assert client.post(paths["edit"], {"body": "pwned", "version": "1"}).status_code == 403
    fragment.refresh_from_db()
    assert fragment.version == 1 and fragment.body.startswith("The bucket")
    assert Nudge.objects.get(fragment=fragment).state != "answered"

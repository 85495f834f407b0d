"""A nudge's id never leaves the server as its integer key (issue 38; docs/data-model.md).

Before: ``GET /api/fragments/{id}`` listed ``open_nudges[].id`` as the nudge's primary key, and
the e-mailed one-click answer links carried it (the link's token is signed, not encrypted:
anyone holding the link reads it), as did the audit events a nudge's answer writes (an
organization's export carries them).

After: every nudge has a public id (``nud_`` + 14 random characters, unique per organization),
given to new rows by the field's default (bulk creation too) and to existing rows by the data
step of migration 0036. The API, the links and the audit events name that id; a link mailed
before the change (naming a key) still answers until it expires.
"""

from __future__ import annotations

import base64
import importlib
import json
import re

import pytest
from django.apps import apps
from django.core import signing
from django.test import Client

from accounts.tokens import create_personal_token
from contexts.governance import nudges
from contexts.models import AuditEvent, Nudge
from contexts.models.governance import NudgeKind, NudgeState
from contexts.services.fragments import create_fragment
from tests.api.conftest import api, as_token  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db
PUBLIC = re.compile(r"^nud_[0-9a-z]{14}$")


def token_payload(token: str) -> dict:
    """What anyone holding the link can read from it (TimestampSigner's ``payload:ts:sig``)."""
    encoded = token.split(":")[0]
    compressed = encoded.startswith(".")
    raw = base64.urlsafe_b64decode(encoded.lstrip(".") + "=" * (-len(encoded) % 4))
    assert not compressed  # small payloads are never compressed
    return json.loads(raw)


@pytest.fixture
def nudge(cast) -> Nudge:
    fragment = create_fragment(cast.owner, cast.repo.scope, title="Limits",
                               body="Internal callers are exempt.", owner=cast.teammate)
    return nudges.open_nudge(fragment, [{"code": "hot"}])[1]


def test_every_nudge_gets_its_own_public_id_even_in_bulk(cast, nudge):
    assert PUBLIC.match(nudge.public_id)
    others = [create_fragment(cast.owner, cast.repo.scope, title=f"n{i}", body=f"Text {i}.")
              for i in range(3)]
    bulk = Nudge.objects.bulk_create([Nudge(fragment=f, owner=cast.teammate, reasons=[])
                                      for f in others])
    ids = {n.public_id for n in bulk} | {nudge.public_id}
    assert len(ids) == 4 and all(PUBLIC.match(i) for i in ids)


def test_existing_nudges_are_given_public_ids_by_the_migration(cast, nudge):
    kept = nudges.open_nudge(
        create_fragment(cast.owner, cast.repo.scope, title="B", body="Other text."),
        [{"code": "hot"}])[1]
    Nudge.objects.filter(pk=nudge.pk).update(public_id="")  # a row from before 0036
    migration = importlib.import_module("contexts.migrations.0036_nudge_public_id")
    migration.fill_public_ids(apps, None)
    filled = Nudge.objects.get(pk=nudge.pk).public_id
    assert PUBLIC.match(filled) and filled != nudge.public_id
    assert Nudge.objects.get(pk=kept.pk).public_id == kept.public_id  # ids are never changed


def test_the_api_names_open_nudges_by_public_id(cast, api, nudge):  # noqa: F811
    raw = create_personal_token(cast.org, cast.viewer, "script")[1]
    body = as_token(api, raw).get(f"/api/fragments/{nudge.fragment.public_id}").json()
    # Exactly the public id and the kind: the row's integer key is in no field. (A substring
    # test for the key's digits failed whenever the random public id happened to hold them.)
    assert body["open_nudges"] == [{"id": nudge.public_id, "kind": NudgeKind.STALE}]


def test_an_answer_link_names_the_nudge_by_public_id_and_still_answers(cast, nudge):
    token = nudges.signed_token(nudge, cast.teammate)
    assert token_payload(token)["n"] == nudge.public_id
    response = Client().post(f"/governance/nudges/{token}/still-accurate")
    assert response.status_code == 200
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.ANSWERED
    event = AuditEvent.objects.get(action="nudge.answer", object_id=nudge.fragment.public_id)
    verified = AuditEvent.objects.get(action="fragment.verify",
                                      object_id=nudge.fragment.public_id)
    assert event.after["nudge"] == verified.after["nudge"] == nudge.public_id


def test_a_link_mailed_before_public_ids_still_answers_until_it_expires(cast, nudge):
    legacy = signing.TimestampSigner(salt=nudges.NUDGE_SALT).sign_object(
        {"n": nudge.pk, "u": cast.teammate.pk})
    assert Client().post(f"/governance/nudges/{legacy}/still-accurate").status_code == 200
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.ANSWERED


@pytest.mark.parametrize("named", [None, True, ["x"], {"a": 1}, "nud_doesnotexist00"])
def test_a_signed_link_naming_no_nudge_is_refused_not_a_500(cast, nudge, named):
    token = signing.TimestampSigner(salt=nudges.NUDGE_SALT).sign_object(
        {"n": named, "u": cast.teammate.pk})
    assert Client().post(f"/governance/nudges/{token}/still-accurate").status_code == 400
    nudge.refresh_from_db()
    assert nudge.state == NudgeState.OPEN

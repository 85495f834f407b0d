"""Writing a fragment in the console: the form names a bad field, a negative context is
composed as "Don't / Do instead / Why", near-duplicates are shown before saving, secrets are
redacted or refused by the policy, and the page is permission-checked (a stranger 404, a
viewer 403, nothing leaked). Pinning a retired or superseded fragment is refused."""

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from contexts.console.markup import compose_negative, split_negative
from contexts.kernel.tokens import count_tokens
from contexts.models import AuditEvent, Fragment, Pin, SecretFinding
from contexts.models.changes import Change
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import create_fragment, retire_fragment, supersede_fragment
from contexts.services.pins import pin_fragment
from tests.console.conftest import HTMX, client_for, world  # noqa: F401 - fixture
from tests.factories import UserFactory
from tests.secrets.fakes import Secrets

URL = "/o/acme/fragments/new"
PREVIEW = "/o/acme/fragments/new/preview"


def form(cast, **fields) -> dict:
    return {"kind": "prose", "scope": cast.repo.scope.public_id, "title": "Deploy windows",
            "body": "Deploy between 09:00 and 15:00 so that someone is around to roll back.",
            "owner": "teammate", "action": "save", **fields}


def test_the_form_offers_every_kind_and_only_writable_scopes(cast, notes):
    html = client_for(cast.teammate).get(URL).content.decode()
    for kind in ("prose", "code", "adr", "runbook", "policy", "negative", "session-summary",
                 "test"):
        assert f'value="{kind}"' in html
    assert cast.repo.scope.public_id in html and cast.org.scope.public_id in html
    assert cast.other_org.scope.public_id not in html
    assert '<option value="teammate" selected>' in html  # the writer owns it by default


def test_a_scope_can_be_preselected_from_the_fragment_list(cast, notes):
    client = client_for(cast.teammate)
    listing = client.get(f"/scopes/{cast.repo.scope.public_id}/fragments/").content.decode()
    assert f'href="{URL}?scope={cast.repo.scope.public_id}"' in listing
    assert f'href="{URL}"' in client.get("/o/acme/").content.decode()
    html = client.get(f"{URL}?scope={cast.repo.scope.public_id}").content.decode()
    assert f'<option value="{cast.repo.scope.public_id}" selected>' in html


def test_saving_goes_through_the_door(cast, notes):
    expires = (timezone.now() + dt.timedelta(days=30)).strftime("%Y-%m-%dT%H:%M")
    response = client_for(cast.teammate).post(URL, form(cast, owner="lead",
                                                        expires_at=expires))
    assert response.status_code == 302
    fragment = Fragment.objects.get(title="Deploy windows")
    assert response["Location"] == f"/fragments/{fragment.public_id}/"
    assert (fragment.scope, fragment.owner, fragment.kind) == (cast.repo.scope, cast.lead,
                                                               "prose")
    assert fragment.valid_to is not None and fragment.valid_to > timezone.now()
    assert fragment.versions.get().reason == "written in the console"
    event = AuditEvent.objects.get(action="fragment.create", object_id=fragment.public_id)
    assert event.actor == cast.teammate
    assert Change.objects.filter(fragment_id=fragment.pk, kind="create").exists()


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"title": ""}, "title", "This field is required"),
    ({"body": "   "}, "body", "This field is required"),
    ({"kind": "memo"}, "kind", "Select a valid choice"),
    ({"owner": "stranger"}, "owner", "Select a valid choice"),
    ({"scope": "sc_notavalidscope00"}, "scope", "Select a valid choice"),
    ({"expires_at": "tomorrow"}, "expires_at", "Enter a valid date/time"),
    ({"expires_at": "2001-01-01T10:00"}, "expires_at", "the expiry must be in the future"),
    ({"body": "nul \x00 byte"}, "body", "Null characters are not allowed"),
    ({"tags": "payments, no spaces allowed"}, "tags", "is not a tag"),
    ({"tags": ",".join(f"t{n}" for n in range(21))}, "tags", "at most 20 tags"),
    ({"kind": "negative", "dont": "", "instead": "x"}, "dont",
     "required for a negative context"),
])
def test_a_bad_field_is_a_form_error_naming_it(cast, notes, fields, field, message):
    response = client_for(cast.teammate).post(URL, form(cast, **fields))
    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    # Django renders a field's errors in its group, described by the field.
    assert f'id="id_{field}_error"' in html or (field == "expires_at" and message in html)
    assert not Fragment.objects.filter(title="Deploy windows").exists()


def test_tags_are_saved_shown_and_filtered(cast, notes):
    client = client_for(cast.teammate)
    response = client.post(URL, form(cast, tags="Payments, retries,payments, "))
    fragment = Fragment.objects.get(title="Deploy windows")
    assert fragment.tags == ["payments", "retries"]
    page = client.get(response["Location"]).content.decode()
    tag_url = f"/scopes/{cast.repo.scope.public_id}/fragments/?tag=payments"
    assert f'href="{tag_url}">payments</a>' in page
    listing = client.get(tag_url).content.decode()
    assert ">Deploy windows</a>" in listing and ">Rate limiter</a>" not in listing
    assert '<span class="badge tag">#retries</span>' in listing


def test_a_negative_context_is_composed_and_rendered_as_its_three_parts(cast, notes):
    client = client_for(cast.teammate)
    response = client.post(URL, form(
        cast, kind="negative", title="Retrying payments blindly", body="",
        dont="Retry a failed charge in a loop.",
        instead="Retry with the **same idempotency key**, at most three times.",
        why="A retry without the key charges the customer twice."))
    assert response.status_code == 302
    fragment = Fragment.objects.get(title="Retrying payments blindly")
    assert fragment.negative and fragment.kind == "negative"
    assert fragment.body == compose_negative(
        "Retry a failed charge in a loop.",
        "Retry with the **same idempotency key**, at most three times.",
        "A retry without the key charges the customer twice.")
    assert fragment.body.startswith("## Don't\nRetry a failed charge in a loop.\n\n## Do instead\n")
    assert split_negative(fragment.body)["why"].startswith("A retry without")
    page = client.get(response["Location"]).content.decode()
    assert '<dl class="negative-context"><dt>Don\'t</dt><dd><p>Retry a failed charge' in page
    assert "<dt>Do instead</dt><dd><p>Retry with the <strong>same idempotency key</strong>" in page


def test_why_is_optional_and_a_body_in_another_shape_renders_as_markdown():
    assert split_negative(compose_negative("a", "b")) == {"dont": "a", "instead": "b", "why": ""}
    assert split_negative("Caching tokens in memory leaks them.") is None


def test_the_preview_shows_the_text_its_tokens_and_near_duplicates(cast, notes):
    client = client_for(cast.teammate)
    response = client.post(PREVIEW, form(cast, body=notes.limiter.body), **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="fragment-preview"')
    assert "<strong>once per second</strong>" in html  # rendered Markdown
    assert f'id="preview-tokens">{count_tokens(notes.limiter.body)} tokens<' in html
    assert f'href="/fragments/{notes.limiter.public_id}/"' in html
    negative = client.post(PREVIEW, form(cast, kind="negative", dont="x", instead="y"), **HTMX)
    assert "<dt>Do instead</dt>" in negative.content.decode()


def test_the_preview_without_javascript_is_the_page(cast, notes):
    response = client_for(cast.teammate).post(URL, form(cast, action="preview"))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.startswith("<!doctype html>") and 'id="preview-tokens"' in html
    assert not Fragment.objects.filter(title="Deploy windows").exists()


def test_a_near_duplicate_is_shown_before_saving_and_saved_anyway_on_confirmation(cast, notes):
    client = client_for(cast.teammate)
    data = form(cast, title="Limiter again", body=notes.limiter.body + " ")
    warned = client.post(URL, data)
    assert warned.status_code == 200
    html = warned.content.decode()
    assert 'id="near-duplicates"' in html and "Nothing was saved yet" in html
    assert f'href="/fragments/{notes.limiter.public_id}/"' in html
    assert 'name="save_anyway" value="1"' in html and ">Save anyway<" in html
    assert not Fragment.objects.filter(title="Limiter again").exists()
    saved = client.post(URL, {**data, "save_anyway": "1"})
    assert saved.status_code == 302
    assert Fragment.objects.filter(title="Limiter again").exists()


def test_a_near_duplicate_the_writer_cannot_read_is_not_shown(cast, notes):
    # The same text lives in globex; acme's writer never hears of it.
    response = client_for(cast.teammate).post(URL, form(cast, body=notes.secret.body))
    assert response.status_code == 302
    assert b"Globex" not in response.content


def test_a_secret_is_redacted_by_default(cast, notes, settings):
    settings.SECRET_POLICY = "redact"
    keys = Secrets(23)
    client = client_for(cast.teammate)
    body = f"Deploy with the bot.\nGITHUB_TOKEN={keys.github_token}\n"
    preview = client.post(PREVIEW, form(cast, body=body), **HTMX).content.decode()
    assert "Secrets found: GitHub Token on line 2" in preview
    assert "replaced by placeholders" in preview
    response = client.post(URL, form(cast, body=body), follow=True)
    assert response.status_code == 200
    fragment = Fragment.objects.get(title="Deploy windows")
    assert keys.github_token not in fragment.body
    assert "[REDACTED:GitHub Token]" in fragment.body
    assert SecretFinding.objects.filter(fragment=fragment, action="redacted").exists()
    assert "1 secret was replaced by a placeholder" in response.content.decode()


def test_a_secret_is_refused_under_policy_refuse_naming_the_body(cast, notes, settings):
    settings.SECRET_POLICY = "refuse"
    keys = Secrets(24)
    body = f"Deploy with the bot.\nGITHUB_TOKEN={keys.github_token}\n"
    response = client_for(cast.teammate).post(URL, form(cast, body=body))
    assert response.status_code == 400
    html = response.content.decode()
    assert "not stored: the text holds 1 secret (GitHub Token on line 2)" in html
    assert 'id="id_body_error"' in html
    assert keys.github_token not in html.split("<textarea")[0]
    assert not Fragment.objects.filter(title="Deploy windows").exists()
    assert SecretFinding.objects.filter(action="refused").exists()


def test_a_stranger_gets_404_and_a_viewer_403_with_nothing_leaked(cast, notes):
    for user, status in ((cast.stranger, 404), (cast.viewer, 403)):
        client = client_for(user)
        for response in (client.get(URL), client.post(URL, form(cast)),
                         client.post(PREVIEW, form(cast, body=notes.limiter.body), **HTMX)):
            assert response.status_code == status
            html = response.content.decode()
            assert "Rate limiter" not in html and cast.repo.scope.public_id not in html
    assert not Fragment.objects.filter(title="Deploy windows").exists()
    # A viewer sees no "New fragment" link either.
    viewer = client_for(cast.viewer)
    assert URL not in viewer.get("/o/acme/").content.decode()
    assert URL not in viewer.get(f"/scopes/{cast.repo.scope.public_id}/fragments/").content.decode()


def test_a_writer_cannot_post_into_a_scope_of_another_organization(cast, notes):
    response = client_for(cast.teammate).post(URL, form(cast,
                                                        scope=cast.other_org.scope.public_id))
    assert response.status_code == 400
    assert not Fragment.objects.filter(title="Deploy windows").exists()


# --- pins of fragments no longer active ---------------------------------------------------------
def test_pinning_a_retired_or_superseded_fragment_is_refused_naming_the_field(cast, notes):
    retire_fragment(cast.lead, notes.limiter)
    with pytest.raises(InvalidOperation) as refused:
        pin_fragment(cast.lead, notes.limiter, cast.repo.scope)
    assert refused.value.field == "fragment_id"
    assert str(refused.value) == "a retired fragment cannot be pinned: restore it first"
    newer = create_fragment(cast.lead, cast.repo.scope, title="Retry v2", body="Retry twice.")
    supersede_fragment(cast.lead, notes.retry, newer)
    with pytest.raises(InvalidOperation, match="a superseded fragment cannot be pinned"):
        pin_fragment(cast.lead, notes.retry, cast.repo.scope)
    assert not Pin.objects.filter(fragment__in=[notes.limiter, notes.retry]).exists()


def test_the_console_refuses_the_pin_with_its_message(cast, notes):
    retire_fragment(cast.lead, notes.limiter)
    client = client_for(cast.lead)
    fid = notes.limiter.public_id
    htmx = client.post(f"/fragments/{fid}/pin", {"scope": cast.repo.scope.public_id,
                                                 "partial": "pin"}, **HTMX)
    assert htmx.status_code == 400
    assert htmx.content.decode() == "a retired fragment cannot be pinned: restore it first"
    plain = client.post(f"/fragments/{fid}/pin", {"scope": cast.repo.scope.public_id},
                        follow=True)
    assert "a retired fragment cannot be pinned: restore it first" in plain.content.decode()
    assert not Pin.objects.filter(fragment=notes.limiter).exists()
    # The page of a retired fragment offers Restore, not Pin.
    page = client.get(f"/fragments/{fid}/").content.decode()
    assert ">Restore<" in page and "Pin here" not in page


def test_a_superseded_fragment_is_restored(cast, notes):
    newer = create_fragment(cast.lead, cast.repo.scope, title="Retry v2", body="Retry twice.")
    supersede_fragment(cast.lead, notes.retry, newer)
    client = client_for(cast.lead)
    fid = notes.retry.public_id
    assert ">Restore<" in client.get(f"/fragments/{fid}/").content.decode()
    client.post(f"/fragments/{fid}/restore", {"reason": "v2 was wrong"})
    notes.retry.refresh_from_db()
    assert (notes.retry.status, notes.retry.superseded_by, notes.retry.valid_to) == (
        "active", None, None)
    event = AuditEvent.objects.get(action="fragment.restore", object_id=fid)
    assert event.before["status"] == "superseded" and event.after["reason"] == "v2 was wrong"
    pin_fragment(cast.lead, notes.retry, cast.repo.scope)  # active again: pinnable


def test_an_expired_fragment_is_no_longer_retrieved(cast, world,  # noqa: F811
                                                    django_capture_on_commit_callbacks):
    expires = (timezone.now() + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    with django_capture_on_commit_callbacks(execute=True):  # the index follows the feed
        client_for(cast.teammate).post(URL, form(
            cast, title="Freeze notice", expires_at=expires,
            body="Deploy freeze: the quokka release waits."))
    fragment = Fragment.objects.get(title="Freeze notice")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {cast.raw_token}")
    ask = {"query": "quokka release deploy freeze", "scope": {"org_id": "acme", "repo_id": "web"}}

    def found() -> list[str]:
        response = api.post("/api/contexts/retrieve", ask, format="json")
        assert response.status_code == 200, response.json()
        return [f["id"] for f in response.json()["fragments"]]

    assert fragment.public_id in found()
    Fragment.objects.filter(pk=fragment.pk).update(valid_to=timezone.now()
                                                   - dt.timedelta(minutes=1))
    assert fragment.public_id not in found()


def test_the_preview_and_the_negative_sections_are_sanitized(cast, notes):
    mark = "<script>alert(1)</script>"
    html = client_for(cast.teammate).post(PREVIEW, form(
        cast, kind="negative", dont=f"Do not {mark}", instead=f'<img src=x onerror="{mark}">',
        why=f"[click](javascript:{mark})"), **HTMX).content.decode()
    assert "<dt>Don't</dt>" in html
    # Shown as text, never as markup.
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert "Do not &lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_a_superuser_who_is_no_member_writes_and_owns_by_default(cast, notes):
    root = UserFactory(username="root", is_superuser=True)
    client = client_for(root)
    assert '<option value="root" selected>' in client.get(URL).content.decode()
    assert client.post(URL, form(cast, owner="root")).status_code == 302
    assert Fragment.objects.get(title="Deploy windows").owner == root

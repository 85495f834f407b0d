"""Row-level security for the retrieval role fails closed and shows exactly the set scopes."""

import numpy as np
import pytest
from django.db import connection

from contexts.models import Embedding, EmbeddingGeneration, Fragment
from contexts.services.fragments import create_fragment
from contexts.services.rls import retrieval_scope


def _fragments(cast):
    return {
        "org": create_fragment(cast.owner, cast.org.scope, body="org-wide"),
        "repo": create_fragment(cast.owner, cast.repo.scope, body="repo"),
        "other_repo": create_fragment(cast.owner, cast.other_repo.scope, body="other repo"),
        "session": create_fragment(cast.owner, cast.session.scope, body="session"),
        "globex": create_fragment(cast.stranger, cast.other_org.scope, body="other org"),
    }


def _embed_all(fragments):
    generation = EmbeddingGeneration.objects.create(namespace="prose", model_name="test",
                                                    state="active")
    for fragment in fragments.values():
        Embedding.objects.create(
            org_id=fragment.org_id, fragment=fragment, fragment_version=1,
            generation=generation, namespace="prose", scope_ids=fragment.scope_ids,
            content_hash=fragment.content_hash, embedding=np.ones(generation.dim),
        )


def _visible_ids():
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM contexts_fragment")
        fragments = {row[0] for row in cursor.fetchall()}
        cursor.execute("SELECT fragment_id FROM contexts_embedding")
        embeddings = {row[0] for row in cursor.fetchall()}
    return fragments, embeddings


def test_no_scopes_set_reads_zero_rows(cast):
    _embed_all(_fragments(cast))
    with retrieval_scope([]):
        assert _visible_ids() == (set(), set())
        assert Fragment.objects.count() == 0


def test_a_reset_setting_still_reads_zero_rows(cast):
    _embed_all(_fragments(cast))
    with retrieval_scope([cast.org.scope_id]):
        with connection.cursor() as cursor:
            cursor.execute("RESET app.allowed_scopes")
        assert _visible_ids() == (set(), set())


def test_scopes_set_read_exactly_their_rows(cast):
    fragments = _fragments(cast)
    _embed_all(fragments)
    with retrieval_scope([cast.org.scope_id, cast.repo.scope_id]):
        expected = {fragments["org"].pk, fragments["repo"].pk}
        assert _visible_ids() == (expected, expected)
    with retrieval_scope([cast.other_org.scope_id]):
        assert _visible_ids() == ({fragments["globex"].pk}, {fragments["globex"].pk})
    # Outside the block the application role sees everything again.
    assert Fragment.objects.count() == len(fragments)


@pytest.mark.django_db(transaction=True)
def test_an_outermost_block_leaves_the_connection_as_the_application_role():
    # No explicit reset runs here (the API path): COMMIT must end the role and the scopes.
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        application_user = cursor.fetchone()[0]
    assert not connection.in_atomic_block
    with retrieval_scope([1, 2]):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user, current_setting('app.allowed_scopes', true)")
            assert cursor.fetchone() == ("contexts_retrieval", "{1,2}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_setting('app.allowed_scopes', true)")
        assert cursor.fetchone() in {(application_user, ""), (application_user, None)}


@pytest.mark.django_db
def test_pins_and_sources_are_visible_exactly_with_their_fragment(cast):
    """A query under the retrieval role that forgets its scope filter sees no other scope's
    file paths, anchors or pin reasons (migration 0013)."""
    from contexts.models import Pin, SourceDocument, SourcePointer

    fragments = _fragments(cast)
    for name, fragment in fragments.items():
        document = SourceDocument.objects.create(org_id=fragment.org_id, path=f"{name}.md",
                                                 content_hash=name)
        SourcePointer.objects.create(fragment=fragment, document=document, anchor=name)
        Pin.objects.create(fragment=fragment, scope_id=fragment.scope_id,
                           reason=f"pinned {name}")
    with retrieval_scope({cast.repo.scope_id, cast.org.scope_id}):
        with connection.cursor() as cursor:
            cursor.execute("SELECT path FROM contexts_sourcedocument")
            paths = {row[0] for row in cursor.fetchall()}
            cursor.execute("SELECT anchor FROM contexts_sourcepointer")
            anchors = {row[0] for row in cursor.fetchall()}
            cursor.execute("SELECT reason FROM contexts_pin")
            reasons = {row[0] for row in cursor.fetchall()}
        cited = set(SourcePointer.objects.values_list("document__path", flat=True))
    assert paths == cited == {"org.md", "repo.md"}
    assert anchors == {"org", "repo"}
    assert reasons == {"pinned org", "pinned repo"}
    with retrieval_scope(set()):  # fails closed
        assert not SourcePointer.objects.exists() and not SourceDocument.objects.exists()

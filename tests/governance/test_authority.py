"""Authority: PageRank over the citation graph (damping 0.85, dangling nodes, max = 1.0)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from accounts.permissions import SYSTEM
from contexts.governance.authority import compute_authority, pagerank
from contexts.models import Fragment, Link
from contexts.models.fragments import LinkKind
from contexts.services.fragments import retire_fragment, supersede_fragment
from tests.governance.conftest import make


def test_two_nodes_match_the_closed_form():
    # a → b, b dangling: r_a = 0.075 + 0.425·r_b, r_a + r_b = 1 ⇒ r_a = 0.5/1.425.
    ranks = pagerank(["a", "b"], [("a", "b")])
    r_a = 0.5 / 1.425
    assert ranks["b"] == 1.0
    assert ranks["a"] == pytest.approx(r_a / (1 - r_a), abs=1e-9)


def test_ordering_on_a_small_graph():
    #   a ─┐          hub is cited by everyone; d is cited only by the hub;
    #   b ─┼→ hub ⇄ d  e is cited by nobody and cites nothing (dangling, isolated).
    #   c ─┘
    edges = [("a", "hub"), ("b", "hub"), ("c", "hub"), ("hub", "d"), ("d", "hub"),
             ("a", "zzz-unknown"), ("a", "a")]  # unknown nodes and self-loops are ignored
    ranks = pagerank(["a", "b", "c", "hub", "d", "e"], edges)
    assert max(ranks.values()) == 1.0 == ranks["hub"]
    assert ranks["hub"] > ranks["d"] > ranks["e"] >= ranks["a"] == ranks["b"] == ranks["c"] > 0
    assert pagerank([], []) == {}
    assert set(pagerank(["x", "y"], []).values()) == {1.0}  # no links: everyone equal


def test_parallel_edges_count_once():
    once = pagerank(["a", "b", "c"], [("a", "b"), ("a", "c")])
    twice = pagerank(["a", "b", "c"], [("a", "b"), ("a", "b"), ("a", "c")])
    assert once == twice


@pytest.mark.django_db
def test_compute_authority_stores_normalised_pagerank(cast):
    scope = cast.repo.scope
    guide, adr, note, lonely = (make(scope, name, f"{name} text") for name in
                                ("Guide", "ADR", "Note", "Lonely"))
    other_org = make(cast.other_org.scope, "Elsewhere", "Other organization.")
    Link.objects.create(source=guide, target=adr, kind=LinkKind.MARKDOWN)
    Link.objects.create(source=note, target=adr, kind=LinkKind.FRONT_MATTER)
    Link.objects.create(source=adr, target=guide, kind=LinkKind.REFERENCE)
    # Supersession links count: the new note "cites" the old one it replaces.
    new_note = make(scope, "Note v2", "Note v2 text")
    supersede_fragment(SYSTEM, note, new_note)
    retired = make(scope, "Retired", "Retired text")
    Link.objects.create(source=retired, target=lonely, kind=LinkKind.REFERENCE)
    retire_fragment(SYSTEM, retired)

    scores = compute_authority(cast.org)
    values = dict(Fragment.objects.values_list("pk", "authority"))
    assert values[adr.pk] == 1.0 and scores[adr.pk] == 1.0
    assert values[adr.pk] > values[guide.pk] > values[note.pk] > values[new_note.pk]
    assert values[note.pk] > values[lonely.pk]  # a retired fragment's citation does not count
    assert retired.pk not in scores and other_org.pk not in scores
    assert values[other_org.pk] == 0.0
    assert all(0 < v <= 1 for pk, v in values.items() if pk in scores)


@pytest.mark.django_db
def test_command_and_rerun_are_idempotent(cast, capsys):
    a = make(cast.repo.scope, "A", "a")
    b = make(cast.repo.scope, "B", "b")
    Link.objects.create(source=a, target=b)
    call_command("compute_authority", "--org", "acme", "--top", "1")
    first = dict(Fragment.objects.values_list("pk", "authority"))
    call_command("compute_authority", "--org", "acme")
    assert dict(Fragment.objects.values_list("pk", "authority")) == first
    assert first[b.pk] == 1.0 and first[a.pk] < 1.0
    out = capsys.readouterr().out
    assert "acme: 2 fragments ranked" in out and b.public_id in out

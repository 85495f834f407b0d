"""Search preview: the API's retrieve() with every signal as a bar, a trace, and "pin here"."""

from contexts.models import Pin, RetrievalTrace
from tests.console.conftest import client_for, htmx_to

QUERY = "/o/acme/search/?query=why+does+the+rate+limiter+drop+requests"


def test_it_retrieves_like_the_api_and_shows_bars(cast, world):
    response = client_for(cast.lead).get(QUERY + f"&repo={cast.repo.public_id}")
    assert response.status_code == 200
    items = response.context["items"]
    assert items[0]["fragment"].public_id == world.repo_limiter.public_id
    ids = {item["fragment"].public_id for item in items}
    assert world.globex_secret.public_id not in ids
    assert world.other_repo_billing.public_id not in ids
    html = response.content.decode()
    for label in ("BM25 rank", "Dense rank", "RRF", "Rerank", "Freshness", "Authority",
                  "Pinned"):
        assert f"<dt>{label}</dt>" in html
    assert 'class="meter"' in html and 'style="width: 100%"' in html
    trace = RetrievalTrace.objects.get(public_id=response.context["result"].trace_id)
    assert trace.user == cast.lead and f"/traces/{trace.public_id}/" in html


def test_weights_from_the_form_reach_the_pipeline(cast, world):
    response = client_for(cast.lead).get(QUERY + "&w_r=0.2&w_f=0.8")
    weights = response.context["weights"]
    assert (weights.w_r, weights.w_f, weights.w_c, weights.w_p) == (0.2, 0.8, 0.1, 0.05)
    trace = RetrievalTrace.objects.get(public_id=response.context["result"].trace_id)
    assert trace.parameters["weights"]["w_f"] == 0.8


def test_the_results_are_a_partial_for_htmx(cast, world):
    html = client_for(cast.viewer).get(QUERY, **htmx_to("search-results")).content.decode()
    assert html.startswith('<section id="search-results"')


def test_pin_here_pins_in_the_most_specific_scope(cast, world):
    client = client_for(cast.lead)
    response = client.get(QUERY + f"&repo={cast.repo.public_id}")
    assert response.context["pin_scope"] == cast.repo.scope
    assert "Pin here" in response.content.decode()
    pinned = client.post(f"/fragments/{world.org_note.public_id}/pin",
                         {"scope": cast.repo.scope.public_id, "partial": "pin"},
                         HTTP_HX_REQUEST="true")
    assert b"pinned in acme/web" in pinned.content
    assert Pin.objects.filter(fragment=world.org_note, scope=cast.repo.scope).exists()
    again = client.get(QUERY + f"&repo={cast.repo.public_id}")
    assert again.context["items"][0]["fragment"].public_id == world.org_note.public_id


def test_viewers_get_no_pin_button_and_bad_input_is_a_form_error(cast, world):
    client = client_for(cast.viewer)
    assert "Pin here" not in client.get(QUERY).content.decode()
    bad = client.get("/o/acme/search/?query=x&session=not-a-session")
    assert bad.context["form"].non_field_errors() == ["scope not found or not readable"]
    negative = client.get("/o/acme/search/?query=x&budget_tokens=-5")
    assert "budget_tokens" in negative.context["form"].errors


def test_a_stranger_cannot_search_another_organization(cast, world):
    assert client_for(cast.stranger).get(QUERY).status_code == 404


# --- organization-wide scope (issue 19, item 6) -------------------------------------------------
def test_the_repository_field_defaults_to_all_repositories_i_can_read(cast, world):
    client = client_for(cast.lead)
    form = client.get("/o/acme/search/").context["form"]
    assert form["repo"].value() == "*"
    assert list(form.fields["repo"].choices)[0] == ("*", "all repositories I can read")
    # A bare ?query= link searches every repository the user reads and the org-wide scope.
    response = client.get(QUERY)
    got = {item["fragment"].public_id for item in response.context["items"]}
    assert {world.repo_limiter.public_id, world.org_note.public_id,
            world.other_repo_billing.public_id} <= got
    assert not got & {world.globex_secret.public_id, world.session_note.public_id,
                      world.persona_runbook.public_id}
    # "Pin here" pins organization-wide, not in whichever repository came first.
    assert response.context["pin_scope"] == cast.org.scope


def test_none_is_still_the_organization_wide_scope_alone(cast, world):
    response = client_for(cast.lead).get(QUERY + "&repo=")
    assert response.context["form"]["repo"].value() == ""
    got = {item["fragment"].public_id for item in response.context["items"]}
    assert got == {world.org_note.public_id}


def test_an_empty_answer_says_where_the_readable_fragments_are(cast, world):
    from tests.factories import RepositoryFactory

    empty = RepositoryFactory(org=cast.org, slug="empty")
    response = client_for(cast.viewer).get(QUERY + f"&repo={empty.public_id}&min_score=1")
    assert response.context["items"] == []
    hint = response.context["result"].hint
    # The viewer reads web, billing and the org-wide note: those count; the slug, not the id.
    assert hint.startswith("nothing in repository 'empty' matched; 2 fragments you can read "
                           "are elsewhere in organization 'acme' — choose \"all repositories "
                           "I can read\" as the repository")
    assert hint.replace('"', "&quot;") in response.content.decode() or \
        hint.replace('"', "&quot;").replace("'", "&#x27;") in response.content.decode()

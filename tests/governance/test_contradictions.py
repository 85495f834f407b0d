"""The deterministic difference detector (no database, no model)."""

import pytest

from contexts.governance.contradictions import claim, differences

BASE = ("The payments service retries failed card charges with exponential backoff. "
        "The token bucket holds 10 requests and refills once per second.")


@pytest.mark.parametrize(("older", "newer", "kind"), [
    ("Deploys happen on weekdays only; never deploy on Friday afternoon.",
     "Deploys happen on weekdays only; deploying on Friday afternoon is fine now.", "negation"),
    ("Always run migrations before deploying the service.",
     "Don't run migrations before deploying the service.", "negation"),
    (BASE, BASE.replace("holds 10", "holds 20"), "number"),
    ("The cache TTL is 1,000 ms for search results.",
     "The cache TTL is 250 ms for search results.", "number"),
    ("Freeze starts on 2026-03-01 for the billing release.",
     "Freeze starts on 2026-04-15 for the billing release.", "date"),
    ("Freeze starts on March 3, 2026 for the billing release.",
     "Freeze starts on March 17, 2026 for the billing release.", "date"),
    ("Pin the client library to v1.2.3 in every service.",
     "Pin the client library to v2.0.0 in every service.", "version"),
])
def test_a_replaced_fact_is_a_difference(older, newer, kind):
    found = differences(older, newer)
    assert [d.kind for d in found] == [kind]
    assert found[0].describe().startswith(kind)


@pytest.mark.parametrize(("older", "newer"), [
    # Saying more is not saying something else.
    (BASE, BASE + " Alerts go to the payments on-call rotation."),
    ("Deploys happen on weekdays only; never deploy on Friday afternoon.",
     "Deploys happen on weekdays only; never deploy on Friday afternoon. Ask first."),
    # A value added next to the same one is a detail, not a replacement.
    ("Billing retries failed charges 3 times.", "Billing retries failed charges 3 times "
                                                "with 2 s backoff."),
    # Unrelated sentences never align.
    ("Never deploy on Friday afternoon.", "The bucket holds 20 requests."),
    # Same numbers formatted differently.
    ("The limit is 1,000 requests.", "The limit is 1000 requests."),
])
def test_consistent_texts_have_no_difference(older, newer):
    assert differences(older, newer) == []


def test_claims_separate_dates_versions_and_numbers():
    parsed = claim("Upgrade to v1.2.3 before 2026-03-01 and keep 5% headroom at 1,000 rps.")
    assert parsed.versions == {"1.2.3"}
    assert parsed.dates == {"2026-03-01"}
    assert parsed.numbers == {"5", "1000"}
    assert not parsed.negated
    assert claim("We do not retry.").negated and claim("We never retry.").negated
    # Digits inside identifiers are not numbers.
    assert claim("Use sha256 over http2 with utf-8 bodies.").numbers == frozenset()


@pytest.mark.parametrize(("older", "newer", "kind"), [
    ("Run migrations before deploying the application code.",
     "Run migrations after deploying the application code.", "reversal"),
    ("Enable `task_acks_late` for every queue.", "Disable `task_acks_late` for every queue.",
     "reversal"),
    ("Cordon the node first, then drain it.", "Drain the node first, then cordon it.",
     "reversal"),
    ("The limits are configured in `settings.API_RATE_LIMIT`.",
     "The limits are configured in `settings.THROTTLE_RATES`.", "name"),
    ("Set `CONTEXTS_PG_PORT` to change the embedded PostgreSQL port.",
     "Set `CONTEXTS_DB_PORT` to change the embedded PostgreSQL port.", "name"),
    ("We use Celery with Redis as the broker for background jobs.",
     "We use Celery with RabbitMQ as the broker for background jobs.", "name"),
    ("Keep shards between 10 and 50 GB per node.", "Keep shards between 10 and 40 GB per node.",
     "number"),
    ("Retry the charge twice before paging.", "Retry the charge 4 times before paging.",
     "number"),
    ("| `GOVERNANCE_NEIGHBOURS` | 10 | k of the nearest-neighbour searches |",
     "| `GOVERNANCE_NEIGHBOURS` | 20 | k of the nearest-neighbour searches |", "number"),
])
def test_reversals_renames_and_replaced_quantities_are_differences(older, newer, kind):
    assert kind in [d.kind for d in differences(older, newer)]


@pytest.mark.parametrize(("older", "newer"), [
    # Quantities compare by value, across units and spelled-out numbers.
    ("Backups are kept for 1 year.", "Backups are kept for 12 months."),
    ("Flaky tests are fixed within 2 weeks.", "Flaky tests are fixed within fourteen days."),
    ("The cache has a 6 GB limit per node.", "The cache has a 6144 MB limit per node."),
    ("Each token may make 600 requests per minute.",
     "Each token may make 10 requests per second."),
    # `-> None` is Python, not a "no"; code spans never negate.
    ("The hook `on_saved(fragment) -> None` runs after every save.",
     "The hook on_saved(fragment) -> None runs after every save and every merge."),
    ("`find_org(slug) -> Organization | None` returns None for an unknown slug.",
     "`find_org(slug) -> Organization | None` returns the organization for a known slug."),
    # "never X without Y" is "X needs Y".
    ("Never reset consumer offsets without the data team's approval.",
     "Resetting consumer offsets always needs the data team's approval."),
    # Examples, fenced code, dated log lines and URLs state nothing.
    ("For example, a job that sleeps for 10 minutes is killed.",
     "For example, a job that hangs for 20 minutes is killed."),
    ("```sh\ncurl -d '{\"budget_tokens\": 1500}' http://127.0.0.1:8000/api\n```",
     "```sh\ncurl -d '{\"budget_tokens\": 800}' http://127.0.0.1:8000/api\n```"),
    ("- 2026-02-14: the primary ran out of disk; 40 minutes of degraded search.",
     "- 2026-05-03: the primary ran out of disk; 15 minutes of degraded search."),
    # Two rows of a results table are two measurements; a row is never a sentence.
    ("| the best passage (max over the head and windows) | 0.6752 | 0.6547 |",
     "| its best passage per document (max) | 0.6045 | 0.5871 |"),
    ("The scope includes the organization-wide fragments it may read.",
     "| `{\"repo_id\": \"web\"}` | the organization-wide fragments it may not read |"),
    # A sentence both texts still make is settled, whatever else changed around it.
    ("The bucket holds 10 requests. Alerts page on-call.",
     "The bucket holds 10 requests. Alerts page on-call. The old bucket held 20 requests."),
])
def test_what_is_not_a_contradiction(older, newer):
    assert differences(older, newer) == []


def test_a_difference_explains_itself_in_plain_words():
    [found] = differences("Backups are kept for 35 days.", "Backups are kept for 14 days.")
    assert found.explain() == "a number changed (35 → 14)"
    [found] = differences("Do not deploy on Fridays.", "You may deploy on Fridays.")
    assert found.explain().startswith("one says the opposite of the other")

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

"""The request serializers' fields are shallow copies of the declared ones
(``contexts.protocol.validation.StrictFieldsMixin.get_fields``): no request may see another's
binding, values or errors, and a field holding others, or a mutable default, is still copied
whole."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from rest_framework import serializers

from contexts.protocol.retrieval import RetrieveRequestSerializer
from contexts.protocol.validation import StrictSerializer

VALID = {"query": "how are agent tokens hashed?", "scope": {"org_id": "demo"},
         "budget_tokens": 800, "exclude_states": ["changed"]}
INVALID = {"query": "x", "scope": {"org_id": "demo", "repo": "nope"}, "budget_tokens": 0,
           "exclude_states": ["not-a-state"]}


def test_each_serializer_binds_fields_of_its_own_and_leaves_the_declared_ones_unbound():
    first, second = RetrieveRequestSerializer(data=VALID), RetrieveRequestSerializer(data=VALID)
    declared = RetrieveRequestSerializer._declared_fields
    for name in declared:
        assert first.fields[name] is not second.fields[name]
        assert first.fields[name] is not declared[name]
        assert first.fields[name].parent is first and second.fields[name].parent is second
        assert declared[name].parent is None, name  # a declared field is never bound
    # A list's child is bound to that serializer's own list, not to the declared one.
    assert first.fields["exclude_states"].child.parent is first.fields["exclude_states"]
    assert second.fields["exclude_states"].child.parent is second.fields["exclude_states"]


def test_values_and_errors_stay_with_their_own_request():
    bad = RetrieveRequestSerializer(data=INVALID)
    good = RetrieveRequestSerializer(data=VALID)
    assert not bad.is_valid()
    assert good.is_valid(), good.errors
    assert set(bad.errors) == {"scope", "budget_tokens", "exclude_states"}
    assert good.validated_data["budget_tokens"] == 800
    assert good.validated_data["exclude_states"] == ["changed"]
    # and the other way round: an earlier valid request leaves nothing for a later bad one
    assert not RetrieveRequestSerializer(data=INVALID).is_valid()


def test_request_threads_validating_at_once_get_their_own_answers():
    def check(n: int) -> tuple[bool, object]:
        data = VALID if n % 2 else INVALID
        serializer = RetrieveRequestSerializer(data={**data, "query": f"question {n}"})
        valid = serializer.is_valid()
        return valid, (serializer.validated_data["query"] if valid
                       else sorted(serializer.errors))

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(check, range(600)))
    for n, (valid, seen) in enumerate(answers):
        if n % 2:
            assert valid and seen == f"question {n}"
        else:
            assert not valid and seen == ["budget_tokens", "exclude_states", "scope"]


class _WithMutableDefault(StrictSerializer):
    tags = serializers.JSONField(default=[])
    name = serializers.CharField(default="x")


def test_a_mutable_default_is_copied_for_each_serializer():
    first, second = _WithMutableDefault(data={}), _WithMutableDefault(data={})
    assert first.fields["tags"].default is not second.fields["tags"].default
    assert first.is_valid() and second.is_valid()
    first.validated_data["tags"].append("mine")
    assert second.validated_data["tags"] == []
    assert _WithMutableDefault._declared_fields["tags"].default == []

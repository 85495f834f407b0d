"""The API's JSON renderer (orjson) writes the bytes DRF's own renderer writes."""

import datetime as dt
import json
import math
import uuid
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer

from contexts.api.renderers import FastJSONRenderer

UTC = dt.UTC
PAYLOAD = {
    "fragments": [{
        "id": "frag_0123", "score": 0.6123, "tokens": 412, "pinned": False, "source": None,
        "updated_at": dt.datetime(2026, 11, 30, 9, 15, 2, 123456, tzinfo=UTC),
        "verified_at": dt.datetime(2026, 11, 30, 9, 15, tzinfo=UTC),
        "local": dt.datetime(2026, 11, 30, 9, 15, tzinfo=ZoneInfo("Europe/Paris")),
        "zone_utc": dt.datetime(2026, 11, 30, 9, 15, tzinfo=ZoneInfo("UTC")),
        "naive": dt.datetime(2026, 1, 2, 3, 4, 5),
        "day": dt.date(2026, 11, 30), "at": dt.time(9, 15, 2),
        "heading_path": ("Runbook", "Rate limiter"),
        "text": "naïve — “quoted” \"json\" \\ back\u2028line\u2029para\n\ttab \U0001f600",
    }],
    "counts": {1: "one", 2: "two"},
    "lazy": gettext_lazy("Search"), "decimal": Decimal("1.50"), "uid": uuid.UUID(int=7),
    "took": dt.timedelta(seconds=1.5), "big": 2**53, "small": 0.0001234, "empty": {},
}


def test_it_writes_the_same_bytes_as_drf():
    assert FastJSONRenderer().render(PAYLOAD) == JSONRenderer().render(PAYLOAD)


def test_a_float_in_exponent_form_has_the_same_value():
    # The one spelling that differs: Python writes 1e-07, orjson 1e-7.
    data = {"scores": [1e-7, 2.5e-12, 1e21]}
    assert json.loads(FastJSONRenderer().render(data)) == data


def test_indented_output_is_left_to_drf():
    media_type = "application/json; indent=4"
    assert (FastJSONRenderer().render(PAYLOAD, media_type)
            == JSONRenderer().render(PAYLOAD, media_type))
    assert b'\n    "fragments"' in FastJSONRenderer().render(PAYLOAD, media_type)


def test_no_data_is_an_empty_body_and_a_non_finite_float_is_null():
    assert FastJSONRenderer().render(None) == b""
    # DRF's strict renderer raises here, which became a 500.
    assert FastJSONRenderer().render({"score": math.nan}) == b'{"score":null}'

"""Every API error has one JSON shape: {"error": {"code", "message", "field"}}."""

from django.test import RequestFactory
from rest_framework import serializers

from contexts.api.errors import handler404, handler500
from contexts.protocol.errors import exception_handler


def test_an_unknown_api_url_is_json_404(client, db):
    response = client.get("/api/no-such-thing")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "not found",
                                         "field": None}}


def test_a_wrong_method_is_json_405(client, db):
    response = client.delete("/api/")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_validation_errors_name_the_field():
    exc = serializers.ValidationError({"scope": {"org_id": ["This field is required."]}})
    response = exception_handler(exc, {})
    assert response.status_code == 400
    assert response.data["error"]["field"] == "scope.org_id"
    assert response.data["error"]["message"] == "This field is required."


def test_unexpected_exceptions_become_json_500():
    response = exception_handler(RuntimeError("boom"), {})
    assert response.status_code == 500
    assert response.data["error"]["code"] == "server_error"
    assert "boom" not in str(response.data)  # internals are logged, not shown


def test_django_handlers_answer_json_under_api_and_html_elsewhere(db):
    factory = RequestFactory()
    assert handler500(factory.get("/api/x"))["Content-Type"] == "application/json"
    assert handler404(factory.get("/api/x"), None).status_code == 404
    assert "text/html" in handler404(factory.get("/elsewhere"), None)["Content-Type"]


def test_the_openapi_schema_and_docs_are_served(client, db):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"openapi" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower()  # swagger UI comes from the sidecar package

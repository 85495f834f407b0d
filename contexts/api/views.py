"""API entry points that belong to no single resource."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import ApiToken, Scope
from accounts.scopes import readable_scopes
from contexts.api.schema import AUTH, errors


class ApiIndexSerializer(serializers.Serializer):
    name = serializers.CharField()
    schema = serializers.URLField()
    docs = serializers.URLField()
    retrieve = serializers.URLField()


class PrincipalSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["token", "user"])
    id = serializers.CharField(required=False, help_text="tokens")
    name = serializers.CharField(required=False, help_text="tokens")
    org = serializers.CharField(required=False, help_text="tokens: the organization's slug")
    username = serializers.CharField(required=False, help_text="users")


class ReadableScopeSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    label = serializers.CharField()


class WhoamiSerializer(serializers.Serializer):
    principal = PrincipalSerializer()
    scopes = ReadableScopeSerializer(many=True)


@extend_schema(summary="API index", responses={200: ApiIndexSerializer})
@api_view(["GET"])
@permission_classes([AllowAny])
def api_root(request: Request) -> Response:
    return Response(
        {
            "name": "Contexts API",
            "schema": request.build_absolute_uri("/api/schema/"),
            "docs": request.build_absolute_uri("/api/docs/"),
            "retrieve": request.build_absolute_uri("/api/contexts/retrieve"),
        }
    )


@extend_schema(summary="Who am I, and which scopes may I read?",
               responses={200: WhoamiSerializer, **errors(*AUTH)})
@api_view(["GET"])
def whoami(request: Request) -> Response:
    principal = request.user
    scopes = Scope.objects.filter(id__in=readable_scopes(principal)).order_by("kind", "label")
    if isinstance(principal, ApiToken):
        identity = {"type": "token", "id": principal.public_id, "name": principal.name,
                    "org": principal.org.slug}
    else:
        identity = {"type": "user", "username": principal.get_username()}
    return Response({
        "principal": identity,
        "scopes": [{"id": s.public_id, "kind": s.kind, "label": s.label} for s in scopes],
    })

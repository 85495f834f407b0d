"""``POST /api/sources`` (upload files → ingestion job) and ``GET /api/jobs/{id}``."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.permissions import may, principal_user
from accounts.scopes import readable_scopes
from contexts.api.schema import AUTH, BODY, errors
from contexts.api.scoping import resolve_in_org, resolve_org
from contexts.api.validation import StrictSerializer
from contexts.ingestion.sources import INGESTIBLE_SUFFIXES
from contexts.models import Context, IngestionJob
from contexts.services.errors import InvalidOperation
from contexts.services.jobs import create_job, enqueue, save_uploads

# Django refuses more file parts than this before the serializer runs (TooManyFilesSent, a 400
# naming "files"); the schema's maxItems says the same.
MAX_UPLOAD_FILES = settings.DATA_UPLOAD_MAX_NUMBER_FILES or 200
CURATE_REFUSED = ("you may not add knowledge to this scope (curators, tech leads and "
                  "administrators can; agent tokens write only into sessions)")


class JobSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="public_id")
    org = serializers.CharField(source="org.slug")
    scope = serializers.CharField(source="scope.public_id")
    progress = serializers.FloatField()

    class Meta:
        model = IngestionJob
        fields = ["id", "org", "scope", "source_kind", "state", "progress", "files_total",
                  "files_done", "fragments_created", "fragments_updated", "fragments_unchanged",
                  "fragments_retired", "duplicates_collapsed", "errors", "skipped", "warnings",
                  "attempts", "created_at", "started_at", "finished_at"]


@extend_schema_field(OpenApiTypes.BINARY)
class UploadedFileField(serializers.FileField):
    """A file part of a multipart body (described as binary, not as the URL a read would
    give)."""


class UploadSerializer(StrictSerializer):
    org_id = serializers.CharField(max_length=64)
    repo_id = serializers.CharField(max_length=64, required=False, allow_blank=True)
    persona_id = serializers.CharField(max_length=64, required=False, allow_blank=True)
    context = serializers.CharField(max_length=64, required=False, allow_blank=True)
    files = serializers.ListField(child=UploadedFileField(max_length=255),
                                  min_length=1, max_length=MAX_UPLOAD_FILES)

    def validate_files(self, files):
        for upload in files:
            name = Path(upload.name).name
            if Path(name).suffix.lower() not in INGESTIBLE_SUFFIXES:
                raise ValidationError(f"{name}: unsupported file type (use Markdown, text, "
                                      "Python, JavaScript, TypeScript, Go, Java or Rust)")
            if upload.size > settings.INGEST_MAX_FILE_BYTES:
                raise ValidationError(f"{name}: larger than {settings.INGEST_MAX_FILE_BYTES} "
                                      "bytes")
        return files


@extend_schema(summary="Upload files for ingestion", request={"multipart/form-data":
               UploadSerializer}, responses={202: JobSerializer, **errors(*BODY, *AUTH)})
@api_view(["POST"])
@parser_classes([MultiPartParser])
def upload_sources(request: Request) -> Response:
    data = UploadSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    values = data.validated_data
    org = resolve_org(request.user, values["org_id"])
    target = (resolve_in_org(org, "persona", values.get("persona_id"))
              or resolve_in_org(org, "repo", values.get("repo_id")) or org)
    context = None
    if values.get("context"):
        # Among the contexts the caller reads: one it may not read answers like a missing one
        # (it was 403 against 400, which told whether another team's context slug exists).
        context = Context.objects.filter(org=org, slug=values["context"],
                                         scope_id__in=readable_scopes(request.user)).first()
        if context is None:
            raise ValidationError({"context": ["no such context in this organization"]})
    if not may(request.user, "curate", target.scope):
        # The caller may name this scope (resolve_* refused it otherwise), so saying it exists
        # reveals nothing; what is missing is the right to write.
        raise PermissionDenied(CURATE_REFUSED)
    with transaction.atomic():
        try:
            job = create_job(request.user, target.scope, "", source_kind="upload",
                             context=context, created_by=principal_user(request.user))
        except InvalidOperation as exc:
            raise ValidationError({exc.field or "scope": [str(exc)]}) from exc
        save_uploads(job, values["files"])
        enqueue(job)
    return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


@extend_schema(summary="An ingestion job's progress",
               responses={200: JobSerializer, **errors(*AUTH, 404)})
@api_view(["GET"])
def job_detail(request: Request, job_id: str) -> Response:
    job = get_object_or_404(
        IngestionJob.objects.select_related("org", "scope"),
        public_id=job_id, scope_id__in=readable_scopes(request.user),
    )
    return Response(JobSerializer(job).data)

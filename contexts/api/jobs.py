"""``POST /api/sources`` (upload files → ingestion job) and ``GET /api/jobs/{id}``."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.scopes import readable_scopes
from contexts.api.schema import AUTH, BODY, errors
from contexts.ingestion.archives import looks_like_zip
from contexts.ingestion.sources import INGESTIBLE_SUFFIXES
from contexts.kernel.sizes import byte_size
from contexts.models import IngestionJob
from contexts.protocol.validation import StrictSerializer
from contexts.usecases import ingestion
from contexts.usecases.ingestion import UploadSources
from contexts.usecases.retrieval import ScopeRef

# Django refuses more file parts than this before the serializer runs (TooManyFilesSent, a 400
# naming "files"); the schema's maxItems says the same.
MAX_UPLOAD_FILES = settings.DATA_UPLOAD_MAX_NUMBER_FILES or 200


class JobSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="public_id")
    org = serializers.CharField(source="org.slug")
    scope = serializers.CharField(source="scope.public_id")
    progress = serializers.FloatField()
    error_kind = serializers.ChoiceField(
        choices=["", "transient", "permanent"], read_only=True,
        help_text="a failed job's cause: 'transient' (the database stayed unavailable past "
                  "the retry budget; run it again), 'permanent' (its errors say what); "
                  "'' unless failed")

    class Meta:
        model = IngestionJob
        fields = ["id", "org", "scope", "source_kind", "include_untracked", "state",
                  "error_kind", "progress",
                  "files_total", "files_done", "fragments_created", "fragments_updated",
                  "fragments_unchanged", "fragments_retired", "duplicates_collapsed", "errors",
                  "skipped", "warnings", "attempts", "created_at", "started_at", "finished_at"]


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
        seen: set[str] = set()
        for upload in files:
            name = Path(upload.name).name
            # A job's files are keyed by name (contexts/services/uploads.py): a second file of
            # the same name would be renamed or lost.
            if name in seen:
                raise ValidationError(f"{name}: two files of this name")
            seen.add(name)
            archive = looks_like_zip(name)  # a documentation export: docs/ingestion.md
            if Path(name).suffix.lower() not in INGESTIBLE_SUFFIXES and not archive:
                raise ValidationError(f"{name}: unsupported file type (use Markdown, text, "
                                      "Python, JavaScript, TypeScript, Go, Java, Rust or a "
                                      "zip of documentation)")
            limit = settings.ARCHIVE_MAX_BYTES if archive else settings.INGEST_MAX_FILE_BYTES
            if upload.size > limit:
                raise ValidationError(f"{name}: larger than {byte_size(limit)}")
        return files


@extend_schema(summary="Upload files for ingestion", request={"multipart/form-data":
               UploadSerializer}, responses={202: JobSerializer, **errors(*BODY, *AUTH)})
@api_view(["POST"])
@parser_classes([MultiPartParser])
def upload_sources(request: Request) -> Response:
    data = UploadSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    values = data.validated_data
    scope = ScopeRef(org_id=values["org_id"], repo_id=values.get("repo_id"),
                     persona_id=values.get("persona_id"))
    job = ingestion.submit_uploads(request.user, UploadSources(
        scope=scope, files=values["files"], context=values.get("context") or None))
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

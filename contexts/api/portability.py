"""``GET /api/orgs/{org}/export``: an organization's archive (``docs/export-format.md``), for
its administrators — throttled per caller (``CONTEXTS_THROTTLE_EXPORT``, default 10 an hour:
an export reads the whole organization) and audited (``org.export``: who, when)."""

from __future__ import annotations

import tempfile

from django.conf import settings
from django.http import FileResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view, throttle_classes
from rest_framework.request import Request

from contexts.api.schema import AUTH, errors
from contexts.protocol.throttling import AgentRateThrottle
from contexts.usecases import portability


class ExportRateThrottle(AgentRateThrottle):
    """One bucket per caller for exports, apart from (and far below) the agent rate."""

    scope = "export"

    def get_rate(self) -> str:
        return settings.EXPORT_RATE


@extend_schema(
    operation_id="org_export",
    summary="Export an organization",
    description="The organization as one gzip-compressed tar archive (manifest.json and JSON "
                "Lines per entity; docs/export-format.md), for its administrators. Restore it "
                "with `manage.py import_org`.",
    responses={(200, "application/gzip"): OpenApiResponse(OpenApiTypes.BINARY),
               **errors(*AUTH, 404, 429)},
)
@api_view(["GET"])
@throttle_classes([ExportRateThrottle])
def export_view(request: Request, org: str) -> FileResponse:
    # Refused (403/404) before anything is read; the archive is built in a temporary file,
    # then streamed from it in chunks (a large organization never sits in memory whole).
    organization = portability.exportable_org(request.user, portability.ExportOrg(org=org))
    stream = tempfile.TemporaryFile()
    try:
        portability.export_org(request.user, portability.ExportOrg(org=organization.public_id),
                               stream)
    except BaseException:
        stream.close()
        raise
    stream.seek(0)
    name = f"{organization.slug}-{timezone.now():%Y%m%d-%H%M%S}.tar.gz"
    return FileResponse(stream, as_attachment=True, filename=name,
                        content_type="application/gzip")

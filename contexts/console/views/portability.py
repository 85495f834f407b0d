"""The organization's Export button (on the Members page, for its administrators): the same
archive as ``GET /api/orgs/{org}/export`` and ``manage.py export_org``, as a download.

A POST (with the page's CSRF token), not a link: an export reads the whole organization and
writes an audit event, which a prefetching browser or a crawler must not set off."""

from __future__ import annotations

import tempfile

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest
from django.utils import timezone
from django.views.decorators.http import require_POST

from contexts.console.views.common import get_org
from contexts.usecases import portability
from contexts.usecases.errors import NotVisible, Refused


@login_required
@require_POST
def org_export(request: HttpRequest, slug: str) -> FileResponse:
    org = get_org(request, slug)  # 404 for anyone who cannot see it
    command = portability.ExportOrg(org=org.public_id)
    stream = tempfile.TemporaryFile()
    try:
        portability.export_org(request.user, command, stream)
    except NotVisible:
        stream.close()
        raise Http404 from None
    except Refused as exc:
        stream.close()
        raise PermissionDenied(str(exc)) from None
    stream.seek(0)
    name = f"{org.slug}-{timezone.now():%Y%m%d-%H%M%S}.tar.gz"
    return FileResponse(stream, as_attachment=True, filename=name,
                        content_type="application/gzip")

"""A Django storage backed by a PostgreSQL table (``contexts_upload``): the embedded default for
uploaded files, so that a web node and a worker that share no disk still share the uploads.

Configured as ``STORAGES["uploads"]`` (``CONTEXTS_UPLOAD_STORAGE`` names another backend, e.g.
``storages.backends.s3.S3Storage``, with ``CONTEXTS_UPLOAD_STORAGE_OPTIONS``). Names begin with
the organization's id (``<org id>/<job>/<file>``, see ``contexts.services.uploads``): this
backend stores it as the row's ``org_id``, so the table is distributable by organization.

Writes happen on the caller's connection and transaction: an upload whose job rolls back leaves
no blob behind.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile, File
from django.core.files.storage import Storage
from django.db.models import QuerySet
from django.utils.deconstruct import deconstructible

from contexts.models import UploadBlob


def org_of(name: str) -> int:
    """The organization a name belongs to: its first segment."""
    head = name.split("/", 1)[0]
    if not head.isdigit():
        raise SuspiciousFileOperation(f"an upload's name begins with its organization's id: "
                                      f"{name!r}")
    return int(head)


@deconstructible
class DatabaseStorage(Storage):
    """Files as ``bytea`` rows, one per name. No URLs: uploads are read by the worker only."""

    def _open(self, name: str, mode: str = "rb") -> File:
        if "w" in mode or "a" in mode:
            raise ValueError("database uploads are written with save(), not opened for writing")
        blob = self._blobs(name).only("content").first()
        if blob is None:
            raise FileNotFoundError(name)
        return ContentFile(bytes(blob.content), name=name)

    def _save(self, name: str, content: File) -> str:
        raw = b"".join(content.chunks())
        UploadBlob.objects.create(org_id=org_of(name), key=name, content=raw, size=len(raw),
                                  sha256=hashlib.sha256(raw).hexdigest())
        return name

    def delete(self, name: str) -> None:
        self._blobs(name).delete()

    def exists(self, name: str) -> bool:
        return self._blobs(name).exists()

    def listdir(self, path: str) -> tuple[list[str], list[str]]:
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        rows = UploadBlob.objects.all()
        if prefix:
            rows = rows.filter(org_id=org_of(prefix), key__startswith=prefix)
        dirs: set[str] = set()
        files: list[str] = []
        for key in rows.order_by("key").values_list("key", flat=True):
            head, slash, _ = key[len(prefix):].partition("/")
            if slash:
                dirs.add(head)
            else:
                files.append(head)
        return sorted(dirs), files

    def size(self, name: str) -> int:
        size = self._blobs(name).values_list("size", flat=True).first()
        if size is None:
            raise FileNotFoundError(name)
        return size

    def get_created_time(self, name: str) -> datetime:
        created = self._blobs(name).values_list("created_at", flat=True).first()
        if created is None:
            raise FileNotFoundError(name)
        return created

    get_modified_time = get_created_time  # a blob is written once

    def url(self, name: str) -> str:
        raise NotImplementedError("uploads are not served")

    @staticmethod
    def _blobs(name: str) -> QuerySet[UploadBlob]:
        return UploadBlob.objects.filter(org_id=org_of(name), key=name)

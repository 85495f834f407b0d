"""Exporting an organization to one self-describing archive and restoring it, in this
instance or another (issue 24; the format: ``docs/export-format.md``).

- ``archive``: the container — manifest, entity files, bounds on reading;
- ``export``: an organization's rows as entity files, in one snapshot;
- ``restore``: entity files back into rows, fragments through the one door.

The use cases (``contexts.usecases.portability``) decide who may, and re-derive the vectors
and the lexical index.
"""

from contexts.portability.archive import (
    FORMAT,
    VERSION,
    Archive,
    ArchiveRefused,
    Limits,
    read_archive,
)
from contexts.portability.export import export_organization
from contexts.portability.restore import Restored, refuse_unusable_slug, restore

__all__ = ["FORMAT", "VERSION", "Archive", "ArchiveRefused", "Limits", "Restored",
           "export_organization", "read_archive", "refuse_unusable_slug", "restore"]

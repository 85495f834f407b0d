"""Ingestion: files, server paths, git sources, archives, uploads, export and import."""

from contexts.config.schema import INT, JSON_OBJECT, LIST, TEXT, THROTTLE_RATE, Area, Setting

AREA = Area("Ingestion, export and import", "What an ingestion reads, and the bounds that "
            "refuse an upload or an archive before anything is written.", (
    Setting("CONTEXTS_INGEST_MAX_FILE_BYTES", INT, 1_000_000,
            "Files larger than this are skipped by an ingestion."),
    Setting("CONTEXTS_INGEST_ROOTS", LIST, [],
            "Directories under which superusers may ingest server paths from the console "
            "(empty: nobody may; the command line is unaffected)."),
    Setting("CONTEXTS_INGEST_BATCH", INT, 256,
            "Chunks embedded in one batch during an ingestion.", minimum=1),
    Setting("CONTEXTS_INGEST_INTERACTIVE_MAX_FILES", INT, 50,
            "A path job of more files than this runs in the bulk lane, behind other long work; "
            "smaller ones and uploads run in the interactive lane.", minimum=0),
    Setting("CONTEXTS_INGEST_BUSY_RETRY_SECONDS", INT, 10,
            "A queued job or git sync whose repository another run is ingesting goes back to "
            "its queue for this many seconds instead of holding its worker.", minimum=1),
    Setting("CONTEXTS_SOURCE_GIT_TIMEOUT_SECONDS", INT, 300,
            "How long one git fetch, log or read of a git source may take."),
    Setting("CONTEXTS_SOURCE_POLL_SECONDS", INT, 60,
            "How often beat looks for git sources whose next sync is due."),
    Setting("CONTEXTS_ARCHIVE_MAX_BYTES", INT, 100_000_000,
            "An uploaded zip, and its members together uncompressed, at most."),
    Setting("CONTEXTS_ARCHIVE_MAX_FILES", INT, 5_000, "Members of an uploaded zip, at most."),
    Setting("CONTEXTS_ARCHIVE_MAX_RATIO", INT, 100,
            "Largest expansion of a zip member over 64 KiB (or of the whole over 1 MiB) over "
            "its compressed size."),
    Setting("CONTEXTS_UPLOAD_STORAGE", TEXT, "contexts.services.upload_storage.DatabaseStorage",
            "Django storage backend of uploads waiting for their job: PostgreSQL by default, so "
            "that nodes share no disk."),
    Setting("CONTEXTS_UPLOAD_STORAGE_OPTIONS", JSON_OBJECT, {},
            "The upload storage backend's options, as a JSON object."),
    Setting("CONTEXTS_UPLOAD_RETENTION_HOURS", INT, 168,
            "Uploads of a job not finished this long after it was created are deleted."),
    Setting("CONTEXTS_THROTTLE_EXPORT", THROTTLE_RATE, "10/hour",
            "Organization exports per caller over the API."),
    Setting("CONTEXTS_IMPORT_MAX_BYTES", INT, 512 * 1024**2,
            "Largest export archive an import reads."),
    Setting("CONTEXTS_IMPORT_MAX_MEMBER_BYTES", INT, 1024**3,
            "Largest member of an export archive, uncompressed."),
    Setting("CONTEXTS_IMPORT_MAX_TOTAL_BYTES", INT, 2 * 1024**3,
            "All members of an export archive together, uncompressed, at most."),
))

"""Background jobs: Celery's redelivery, the ingestion jobs' leases, periodic flushes."""

from contexts.config.schema import FLOAT, INT, Area, Setting

AREA = Area("Background jobs", "Celery and the ingestion jobs' leases "
            "(`contexts/services/job_leases.py`).", (
    Setting("CELERY_VISIBILITY_TIMEOUT", INT, 300,
            "Seconds after which a killed worker's unacknowledged task is delivered again.",
            minimum=1),
    Setting("CONTEXTS_JOB_HEARTBEAT_SECONDS", FLOAT, 10.0,
            "Seconds between the heartbeats a running job's worker stamps on it."),
    Setting("CONTEXTS_JOB_LEASE_SECONDS", INT, 60,
            "A running job whose heartbeat is older than this and whose lock nobody holds lost "
            "its worker and is queued again."),
    Setting("CONTEXTS_JOB_QUEUED_LEASE_SECONDS", INT, 600,
            "A queued job older than this with no message in the broker is queued again."),
    Setting("CONTEXTS_JOB_MAX_ATTEMPTS", INT, 3,
            "A job started this many times is marked failed instead of started again."),
    Setting("CONTEXTS_JOB_DATABASE_RETRY_SECONDS", FLOAT, 120.0,
            "How long, in all, a running job waits out transient database errors before it "
            "fails."),
    Setting("CONTEXTS_JOB_REAP_SECONDS", INT, 30,
            "How often beat looks for jobs that lost their worker."),
    Setting("CONTEXTS_USAGE_FLUSH_SECONDS", INT, 30,
            "How often the retrievals counted in Redis reach the fragments' use counters."),
))

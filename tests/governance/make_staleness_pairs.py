"""Writes ``staleness_pairs.jsonl``: the labelled pairs ``manage.py eval_staleness`` scores.

Run ``python tests/governance/make_staleness_pairs.py`` after changing the cases below; the
JSONL is committed beside it, so the evaluation never depends on running this script.

Each pair is an older fragment ``a``, a newer fragment ``b``, how they are related
(``relation.type``: ``same-section`` — same source document and heading path,
``same-definition`` — same document and symbol, ``supersession``, ``link``, or ``none`` — two
different files) and a label a reviewer would give: ``contradicted`` when ``b`` makes
something ``a`` states untrue, so ``a``'s owner should be asked; ``not`` otherwise.

The texts are written by hand from the kinds of edit that happen to real runbooks and docs:
a number changed in the same runbook, an instruction reversed, a setting renamed, a
rewording that keeps the meaning, a detail added, history lines appended, code, tests,
migrations and logs of one file, and look-alike passages from different files. Some
contradictions are deliberately hard (a component swapped for another, a role changed) —
the set measures the detector, it is not built around it.
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).with_name("staleness_pairs.jsonl")
C, N = "contradicted", "not"


def frag(path: str, heading: list[str], text: str, *, kind: str = "prose", title: str = "",
         symbol: str = "", language: str = "") -> dict:
    return {"title": title or (heading[-1] if heading else Path(path).stem), "body": text,
            "kind": kind, "path": path, "heading": heading, "symbol": symbol,
            "language": language}


def edited(text: str, replacements: list[tuple[str, str]]) -> str:
    for old, new in replacements:
        if old not in text:
            raise ValueError(f"{old!r} not in {text[:60]!r}")
        text = text.replace(old, new, 1)
    return text


PAIRS: list[dict] = []
# "dev": the pairs the detector was debugged on; "heldout": written afterwards and only ever
# scored (eval_staleness prints both).
SPLIT = "dev"


def add(pair_id: str, a: dict, b: dict, relation: str, label: str, edit: str,
        note: str = "") -> None:
    PAIRS.append({"id": pair_id, "a": a, "b": b, "split": SPLIT,
                  "relation": {"type": relation, "note": note}, "label": label, "edit": edit})


def section(stem: str, path: str, heading: list[str], text: str, edits: list[tuple],
            *, kind: str = "prose", relation: str = "same-section") -> None:
    """Pairs of one section: (label, edit, replacements | new text[, relation])."""
    a = frag(path, heading, text, kind=kind)
    for n, (label, edit, change, *rest) in enumerate(edits, 1):
        new = change if isinstance(change, str) else edited(text, change)
        add(f"{stem}-{n:02d}", a, frag(path, heading, new, kind=kind), rest[0] if rest
            else relation, label, edit)


# --- runbooks -------------------------------------------------------------------------------
section("rb-payments", "runbooks/payments.md", ["Payments", "Card charge retries"], (
    "When the card processor times out, the payments worker retries the charge up to 3 times "
    "with exponential backoff starting at 2 seconds.\n"
    "If all retries fail, the charge is parked in the `failed_charges` queue and the on-call "
    "engineer is paged.\n"
    "Never retry a charge manually from the admin panel; the idempotency key would be reused."),
    [(C, "changed number", [("up to 3 times", "up to 5 times")]),
     (C, "changed number", [("starting at 2 seconds", "starting at 500 ms")]),
     (C, "reversed instruction", [
         ("Never retry a charge manually from the admin panel; the idempotency key would be "
          "reused.", "Retry a stuck charge manually from the admin panel; a fresh idempotency "
          "key is generated for it.")]),
     (C, "renamed setting", [("`failed_charges` queue", "`charges_dead_letter` queue")]),
     (N, "benign rewording", [("When the card processor times out, the payments worker "
                               "retries the charge up to 3 times",
                               "On a processor timeout the payments worker makes at most three "
                               "retries of the charge")]),
     (N, "added detail", [("the on-call engineer is paged.",
                           "the on-call engineer is paged through PagerDuty (service "
                           "payments-primary).")]),
     (N, "same value, other unit", [("starting at 2 seconds", "starting at 2000 ms")]),
     ])

section("rb-db-failover", "runbooks/database-failover.md", ["Database failover", "Promote"], (
    "Check replication lag on the standby first: promote only when `pg_last_xact_replay_"
    "timestamp()` is less than 30 seconds behind.\n"
    "Run `patronictl switchover --candidate db-2` from the bastion host.\n"
    "After the switchover, restart the connection poolers so they pick up the new primary.\n"
    "The whole procedure takes about 10 minutes."),
    [(C, "changed number", [("less than 30 seconds behind", "less than 5 seconds behind")]),
     (C, "changed number", [("about 10 minutes", "about 25 minutes")]),
     (C, "reversed instruction", [(
         "After the switchover, restart the connection poolers so they pick up the new "
         "primary.", "After the switchover, do not restart the connection poolers; they "
         "follow the new primary on their own.")]),
     (C, "renamed command", [("`patronictl switchover --candidate db-2`",
                              "`patronictl failover --candidate db-2`")]),
     (N, "benign rewording", [("The whole procedure takes about 10 minutes.",
                               "Expect the procedure to take roughly ten minutes in total.")]),
     (N, "added step", [("from the bastion host.", "from the bastion host (ssh "
                         "bastion.internal, your own account).")]),
     ])

section("rb-deploy-freeze", "runbooks/release.md", ["Release", "Deploy windows"], (
    "Production deploys happen Monday to Thursday between 09:00 and 16:00 UTC.\n"
    "Do not deploy on Fridays or the day before a public holiday.\n"
    "The release captain announces each deploy in #deploys at least 15 minutes ahead."),
    [(C, "reversed instruction", [("Do not deploy on Fridays", "You may deploy on Fridays")]),
     (C, "changed number", [("at least 15 minutes ahead", "at least 60 minutes ahead")]),
     (C, "changed channel", [("in #deploys", "in #release-train")]),
     (N, "benign rewording", [("The release captain announces each deploy in #deploys at "
                               "least 15 minutes ahead.",
                               "Each deploy is announced by the release captain in #deploys, "
                               "15 minutes or more before it starts.")]),
     (N, "added exception", [("or the day before a public holiday.",
                              "or the day before a public holiday. Security fixes are the "
                              "only exception.")]),
     ])

section("rb-backup", "runbooks/backups.md", ["Backups", "Schedule and retention"], (
    "Full backups of the primary database run nightly at 01:30 UTC with `pg_basebackup`.\n"
    "WAL segments are archived to the `backups-prod` bucket every 60 seconds.\n"
    "Backups are kept for 35 days; monthly snapshots are kept for 1 year.\n"
    "Restores are tested on the first Tuesday of every month."),
    [(C, "changed number", [("kept for 35 days", "kept for 14 days")]),
     (C, "changed number", [("every 60 seconds", "every 300 seconds")]),
     (C, "renamed bucket", [("`backups-prod` bucket", "`db-archive-eu` bucket")]),
     (C, "changed schedule", [("first Tuesday of every month", "last Friday of every quarter")]),
     (N, "same value, other unit", [("kept for 1 year", "kept for 12 months")]),
     (N, "benign rewording", [("Restores are tested on the first Tuesday of every month.",
                               "On the first Tuesday of each month we test a restore.")]),
     (N, "added detail", [("with `pg_basebackup`.", "with `pg_basebackup`, compressed with "
                           "zstd.")]),
     ])

section("rb-oncall", "runbooks/on-call.md", ["On-call", "Paging"], (
    "Sev-1 incidents page the primary on-call immediately and the secondary after 10 minutes "
    "without acknowledgement.\n"
    "Sev-2 incidents page during business hours only.\n"
    "The incident commander writes the status page update, not the engineer fixing the issue."),
    [(C, "changed number", [("after 10 minutes", "after 5 minutes")]),
     (C, "reversed rule", [("Sev-2 incidents page during business hours only.",
                            "Sev-2 incidents page around the clock, like Sev-1.")]),
     (C, "role swapped", [("The incident commander writes the status page update, not the "
                           "engineer fixing the issue.",
                           "The engineer fixing the issue writes the status page update, not "
                           "the incident commander.")]),
     (N, "benign rewording", [("page the primary on-call immediately",
                               "page the primary on-call engineer at once")]),
     (N, "added detail", [("Sev-2 incidents page during business hours only.",
                           "Sev-2 incidents page during business hours only (09:00–18:00 in "
                           "the on-call's time zone).")]),
     ])

section("rb-cert", "runbooks/tls.md", ["TLS certificates", "Rotation"], (
    "Certificates are issued by the internal ACME server and renewed 30 days before expiry.\n"
    "The renewal job runs as the `cert-manager` service account in the `infra` namespace.\n"
    "If a renewal fails twice, rotate the certificate by hand with `make rotate-cert`."),
    [(C, "changed number", [("renewed 30 days before expiry", "renewed 7 days before expiry")]),
     (C, "renamed namespace", [("in the `infra` namespace", "in the `platform-system` "
                                "namespace")]),
     (C, "changed number", [("fails twice", "fails 4 times")]),
     (N, "benign rewording", [("If a renewal fails twice, rotate the certificate by hand",
                               "After two failed renewals, rotate the certificate manually")]),
     ])

section("rb-kafka", "runbooks/kafka.md", ["Kafka", "Consumer lag"], (
    "Alert when consumer lag on `orders.v2` exceeds 50,000 messages for 5 minutes.\n"
    "Scale the `order-projector` deployment to at most 12 replicas; the topic has 12 "
    "partitions, so more replicas sit idle.\n"
    "Never reset consumer offsets in production without the data team's approval."),
    [(C, "changed number", [("exceeds 50,000 messages", "exceeds 10,000 messages")]),
     (C, "changed number (two places)", [("at most 12 replicas", "at most 24 replicas"),
                                         ("has 12 partitions", "has 24 partitions")]),
     (C, "renamed topic", [("lag on `orders.v2`", "lag on `orders.v3`")]),
     (C, "reversed instruction", [("Never reset consumer offsets in production without the "
                                   "data team's approval.",
                                   "Reset consumer offsets in production whenever a projector "
                                   "is stuck; no approval is needed.")]),
     (N, "same number, other format", [("exceeds 50,000 messages", "exceeds 50000 messages")]),
     (N, "benign rewording", [("Never reset consumer offsets in production without the data "
                               "team's approval.",
                               "Resetting consumer offsets in production always needs the data "
                               "team's approval.")]),
     ])

section("rb-redis", "runbooks/redis.md", ["Redis", "Memory"], (
    "The cache cluster runs with `maxmemory-policy allkeys-lru` and a 6 GB limit per node.\n"
    "Session data lives in a separate instance with eviction disabled.\n"
    "Flush the cache only with `redis-cli -n 2 FLUSHDB`; database 0 holds rate-limit "
    "counters."),
    [(C, "renamed setting value", [("`maxmemory-policy allkeys-lru`",
                                     "`maxmemory-policy volatile-lfu`")]),
     (C, "changed number", [("a 6 GB limit per node", "a 16 GB limit per node")]),
     (C, "reversed statement", [("with eviction disabled", "with eviction enabled")]),
     (C, "changed number", [("`redis-cli -n 2 FLUSHDB`; database 0 holds",
                             "`redis-cli -n 3 FLUSHDB`; database 2 holds")]),
     (N, "same value, other unit", [("a 6 GB limit per node", "a 6144 MB limit per node")]),
     (N, "added detail", [("with eviction disabled.", "with eviction disabled and AOF "
                           "persistence every second.")]),
     ])

section("rb-k8s", "runbooks/kubernetes.md", ["Kubernetes", "Draining a node"], (
    "Cordon the node first, then drain it with `kubectl drain --ignore-daemonsets "
    "--delete-emptydir-data`.\n"
    "Pods with a PodDisruptionBudget of minAvailable 2 block the drain until replacements are "
    "ready.\n"
    "Uncordon the node only after the kernel upgrade and a reboot."),
    [(C, "reversed order", [("Cordon the node first, then drain it",
                             "Drain the node first, then cordon it")]),
     (C, "changed number", [("minAvailable 2", "minAvailable 1")]),
     (C, "renamed flag", [("--delete-emptydir-data", "--delete-local-data")]),
     (N, "benign rewording", [("Uncordon the node only after the kernel upgrade and a reboot.",
                               "Once the kernel is upgraded and the node rebooted, uncordon "
                               "it.")]),
     ])

section("rb-search", "runbooks/search-index.md", ["Search index", "Rebuild"], (
    "A full rebuild of the product index takes about 40 minutes for 2 million documents.\n"
    "Build into a new index and switch the `products` alias when the document count matches; "
    "never rebuild in place.\n"
    "Run rebuilds from the `reindex` worker pool, which has 8 workers."),
    [(C, "changed number", [("about 40 minutes", "about 90 minutes")]),
     (C, "reversed instruction", [("never rebuild in place", "rebuilding in place is fine")]),
     (C, "renamed alias", [("switch the `products` alias", "switch the `catalog-live` alias")]),
     (C, "changed number", [("which has 8 workers", "which has 3 workers")]),
     (N, "added detail", [("for 2 million documents.", "for 2 million documents on the "
                           "current hardware.")]),
     (N, "benign rewording", [("Run rebuilds from the `reindex` worker pool, which has 8 "
                               "workers.", "Rebuilds run on the eight workers of the `reindex` "
                               "pool.")]),
     ])

section("rb-cdn", "runbooks/cdn.md", ["CDN", "Purging"], (
    "Purge single URLs from the dashboard; a full purge needs a change ticket.\n"
    "Static assets are cached for 365 days and carry a content hash in their file name.\n"
    "HTML pages are cached for 60 seconds at the edge."),
    [(C, "changed number", [("cached for 60 seconds", "cached for 10 minutes")]),
     (C, "reversed rule", [("a full purge needs a change ticket",
                            "a full purge needs no change ticket")]),
     (N, "same value, other unit", [("cached for 60 seconds", "cached for 1 minute")]),
     (N, "benign rewording", [("Static assets are cached for 365 days",
                               "Static assets stay in the cache for a year (365 days)")]),
     ])

section("rb-migrations", "runbooks/schema-migrations.md", ["Schema migrations", "Rules"], (
    "Run migrations before deploying the application code that needs them.\n"
    "Adding a column with a default is safe on PostgreSQL 11 and later.\n"
    "Create indexes with CONCURRENTLY; a plain CREATE INDEX locks writes on the table."),
    [(C, "reversed order", [("Run migrations before deploying the application code",
                             "Run migrations after deploying the application code")]),
     (C, "changed version", [("PostgreSQL 11 and later", "PostgreSQL 15 and later")]),
     (C, "reversed instruction", [("Create indexes with CONCURRENTLY; a plain CREATE INDEX "
                                   "locks writes on the table.",
                                   "Create indexes without CONCURRENTLY; it is not needed on "
                                   "our table sizes.")]),
     (N, "benign rewording", [("Run migrations before deploying the application code that "
                               "needs them.", "Migrations go out before the application code "
                               "that depends on them.")]),
     (N, "added detail", [("locks writes on the table.", "locks writes on the table for the "
                           "whole build.")]),
     ])

section("rb-queue", "runbooks/workers.md", ["Workers", "Celery queues"], (
    "The `emails` queue is served by 4 worker processes with a prefetch multiplier of 1.\n"
    "Tasks that call external APIs must set a soft time limit of 30 seconds.\n"
    "Enable `task_acks_late` for every queue so a killed worker's task is redelivered."),
    [(C, "changed number", [("served by 4 worker processes", "served by 16 worker processes")]),
     (C, "changed number", [("soft time limit of 30 seconds", "soft time limit of 120 "
                             "seconds")]),
     (C, "reversed instruction", [("Enable `task_acks_late` for every queue",
                                   "Disable `task_acks_late` for every queue")]),
     (C, "renamed setting", [("a prefetch multiplier of 1", "a `worker_prefetch_count` of 1")]),
     (N, "benign rewording", [("must set a soft time limit of 30 seconds",
                               "need a soft time limit of thirty seconds")]),
     (N, "added detail", [("with a prefetch multiplier of 1.", "with a prefetch multiplier "
                           "of 1 and concurrency set per host.")]),
     ])

section("rb-ratelimit", "docs/api/rate-limits.md", ["Rate limits"], (
    "Each API token may make 600 requests per minute; bursts of up to 100 requests are "
    "absorbed by the token bucket.\n"
    "Over the limit the API answers 429 with a `Retry-After` header.\n"
    "The limits are configured in `settings.API_RATE_LIMIT`."),
    [(C, "changed number", [("600 requests per minute", "1200 requests per minute")]),
     (C, "changed status", [("answers 429", "answers 503")]),
     (C, "renamed setting", [("`settings.API_RATE_LIMIT`", "`settings.THROTTLE_RATES`")]),
     (N, "same value, other unit", [("600 requests per minute", "10 requests per second")]),
     (N, "benign rewording", [("Over the limit the API answers 429 with a `Retry-After` "
                               "header.", "Requests over the limit get a 429 and a "
                               "`Retry-After` header.")]),
     (N, "added detail", [("absorbed by the token bucket.", "absorbed by the token bucket, "
                           "which refills continuously.")]),
     ])

section("rb-ci", "docs/ci.md", ["Continuous integration", "Pipeline"], (
    "Every pull request runs lint, unit tests and the integration suite; merging needs all "
    "three to pass.\n"
    "The integration suite runs on 4 parallel runners and takes about 18 minutes.\n"
    "Flaky tests are quarantined with the `@flaky` marker and fixed within 2 weeks."),
    [(C, "changed number", [("on 4 parallel runners", "on 8 parallel runners"),
                            ("about 18 minutes", "about 9 minutes")]),
     (C, "reversed rule", [("merging needs all three to pass",
                            "merging needs only lint and unit tests to pass")]),
     (C, "renamed marker", [("the `@flaky` marker", "the `@quarantine` marker")]),
     (N, "benign rewording", [("fixed within 2 weeks", "fixed within fourteen days")]),
     (N, "added detail", [("takes about 18 minutes.", "takes about 18 minutes, most of it "
                           "in database set-up.")]),
     ])

section("rb-auth", "docs/auth.md", ["Authentication", "Tokens"], (
    "Access tokens expire after 15 minutes and refresh tokens after 30 days.\n"
    "Refresh tokens are single-use: using one twice revokes the whole session.\n"
    "Tokens are signed with RS256; the public keys are served at `/.well-known/jwks.json`."),
    [(C, "changed number", [("expire after 15 minutes", "expire after 60 minutes")]),
     (C, "reversed rule", [("Refresh tokens are single-use: using one twice revokes the whole "
                            "session.", "Refresh tokens may be reused until they expire.")]),
     (C, "changed algorithm", [("signed with RS256", "signed with EdDSA")]),
     (N, "same value, other unit", [("refresh tokens after 30 days",
                                     "refresh tokens after 720 hours")]),
     (N, "benign rewording", [("the public keys are served at", "clients fetch the public "
                               "keys from")]),
     ])

section("rb-logging", "docs/observability.md", ["Observability", "Log retention"], (
    "Application logs are kept for 30 days in Loki and 1 year in cold storage.\n"
    "Do not log request bodies; they may contain personal data.\n"
    "Log at INFO in production and DEBUG only in staging."),
    [(C, "changed number", [("kept for 30 days in Loki", "kept for 7 days in Loki")]),
     (C, "reversed instruction", [("Do not log request bodies; they may contain personal data.",
                                   "Log request bodies at DEBUG; they help reproduce "
                                   "bugs.")]),
     (C, "changed level", [("Log at INFO in production", "Log at WARNING in production")]),
     (N, "benign rewording", [("Do not log request bodies; they may contain personal data.",
                               "Request bodies must never be logged, as they can hold personal "
                               "data.")]),
     (N, "added detail", [("1 year in cold storage.", "1 year in cold storage (S3 Glacier).")]),
     ])

section("rb-flags", "docs/feature-flags.md", ["Feature flags"], (
    "New flags default to off in production and on in staging.\n"
    "Remove a flag within 30 days of reaching 100% rollout.\n"
    "Flags are evaluated server-side through `flags.is_enabled(name, user)`."),
    [(C, "reversed default", [("default to off in production and on in staging",
                               "default to on in production and off in staging")]),
     (C, "changed number", [("within 30 days", "within 90 days")]),
     (C, "renamed function", [("`flags.is_enabled(name, user)`", "`flags.variant(name, "
                               "user)`")]),
     (N, "benign rewording", [("Remove a flag within 30 days of reaching 100% rollout.",
                               "Once a flag is fully rolled out (100%), delete it within 30 "
                               "days.")]),
     ])

section("adr-queue", "docs/adr/0007-queue.md", ["ADR 0007: background jobs"], (
    "We use Celery with Redis as the broker for background jobs.\n"
    "Results are not stored; tasks report progress through the jobs table.\n"
    "Tasks must be idempotent because delivery is at least once."),
    [(C, "swapped component", [("with Redis as the broker", "with RabbitMQ as the broker")]),
     (C, "reversed statement", [("Results are not stored; tasks report progress through the "
                                 "jobs table.", "Results are stored in the Redis result "
                                 "backend for 24 hours.")]),
     (N, "benign rewording", [("Tasks must be idempotent because delivery is at least once.",
                               "Delivery is at-least-once, so every task has to be "
                               "idempotent.")]),
     ], kind="adr")

section("pol-access", "policies/production-access.md", ["Production access"], (
    "Production shell access needs an approved request in the access tool and expires after "
    "8 hours.\n"
    "Break-glass access is allowed only during a Sev-1 incident and is reviewed within 2 "
    "business days.\n"
    "Contractors do not get production access."),
    [(C, "changed number", [("expires after 8 hours", "expires after 24 hours")]),
     (C, "reversed rule", [("Contractors do not get production access.",
                            "Contractors get production access with a sponsor's "
                            "approval.")]),
     (C, "changed number", [("within 2 business days", "within 5 business days")]),
     (N, "benign rewording", [("Contractors do not get production access.",
                               "Production access is never granted to contractors.")]),
     (N, "added detail", [("in the access tool", "in the access tool (Opal)")]),
     ], kind="policy")

section("pol-retention", "policies/data-retention.md", ["Data retention"], (
    "Customer data is deleted 90 days after an account is closed.\n"
    "Invoices are kept for 10 years to meet tax law.\n"
    "Deletion requests under GDPR are completed within 30 days."),
    [(C, "changed number", [("deleted 90 days after", "deleted 30 days after")]),
     (C, "changed number", [("kept for 10 years", "kept for 7 years")]),
     (N, "benign rewording", [("Deletion requests under GDPR are completed within 30 days.",
                               "We complete GDPR deletion requests in at most 30 days.")]),
     (N, "same value, other unit", [("kept for 10 years", "kept for 120 months")]),
     ], kind="policy")

section("doc-pagination", "docs/api/pagination.md", ["Pagination"], (
    "List endpoints return 50 items per page by default and at most 200.\n"
    "Pagination is cursor-based; offset parameters are ignored.\n"
    "The next page's cursor is in the `next` field of the response."),
    [(C, "changed number", [("50 items per page", "25 items per page")]),
     (C, "reversed statement", [("offset parameters are ignored", "offset parameters are "
                                 "honoured")]),
     (C, "renamed field", [("the `next` field", "the `next_cursor` field")]),
     (N, "benign rewording", [("List endpoints return 50 items per page by default and at "
                               "most 200.", "By default a list endpoint returns 50 items a "
                               "page; the maximum is 200.")]),
     ])

section("doc-email", "docs/email.md", ["Outgoing email"], (
    "Transactional email goes through Postmark; marketing email through Mailchimp.\n"
    "Bounces are processed every 15 minutes and disable the address after 3 hard bounces.\n"
    "Set `EMAIL_BACKEND` to the console backend in development."),
    [(C, "swapped provider", [("goes through Postmark", "goes through Amazon SES")]),
     (C, "changed number", [("after 3 hard bounces", "after 1 hard bounce")]),
     (C, "changed number", [("every 15 minutes", "every 5 minutes")]),
     (N, "benign rewording", [("Set `EMAIL_BACKEND` to the console backend in development.",
                               "In development, `EMAIL_BACKEND` should be the console "
                               "backend.")]),
     ])

section("doc-versions", "docs/api/versioning.md", ["API versioning"], (
    "The current API version is v3; v2 is deprecated and will be removed on 2026-09-30.\n"
    "Clients choose a version with the `Accept-Version` header.\n"
    "Breaking changes are announced at least 6 months before a version is removed."),
    [(C, "changed date", [("removed on 2026-09-30", "removed on 2027-03-31")]),
     (C, "changed version", [("The current API version is v3; v2 is deprecated",
                              "The current API version is v4; v3 is deprecated")]),
     (C, "renamed header", [("the `Accept-Version` header", "the `X-API-Version` header")]),
     (N, "benign rewording", [("Breaking changes are announced at least 6 months before a "
                               "version is removed.", "We announce breaking changes six "
                               "months or more before removing a version.")]),
     (N, "added detail", [("will be removed on 2026-09-30.", "will be removed on 2026-09-30 "
                           "(see the changelog).")]),
     ])

# Whole-text rewrites in the same section: contradictions a word-level detector may miss, and
# rewrites that keep the facts.
add("rw-01", frag("runbooks/locks.md", ["Locks"],
                  "Distributed locks use Redis with the Redlock algorithm across 3 nodes."),
    frag("runbooks/locks.md", ["Locks"],
         "Distributed locks are PostgreSQL advisory locks taken in the job's transaction."),
    "same-section", C, "swapped component")
add("rw-02", frag("runbooks/owners.md", ["Ownership"],
                  "The platform team owns the ingress controllers and answers their pages."),
    frag("runbooks/owners.md", ["Ownership"],
         "The networking team owns the ingress controllers since the reorganisation."),
    "same-section", C, "owner changed")
add("rw-03", frag("docs/storage.md", ["Object storage"],
                  "Uploads are stored in S3 in eu-west-1 with server-side encryption."),
    frag("docs/storage.md", ["Object storage"],
         "Uploads are stored in GCS in europe-west4 with customer-managed keys."),
    "same-section", C, "swapped provider")
add("rw-04", frag("docs/search.md", ["Ranking"],
                  "Search results are ranked by BM25 alone; there is no vector search."),
    frag("docs/search.md", ["Ranking"],
         "Search fuses BM25 with dense vector search; neither leg alone decides the ranking."),
    "same-section", C, "reversed statement")
add("rw-05", frag("docs/deploy.md", ["Rollbacks"],
                  "Roll back by redeploying the previous image tag from the pipeline."),
    frag("docs/deploy.md", ["Rollbacks"],
         "To roll back, redeploy the previous image tag through the pipeline; do not edit the "
         "deployment by hand."), "same-section", N, "added instruction")
add("rw-06", frag("docs/cache.md", ["Invalidation"],
                  "The product cache is invalidated on every catalogue write."),
    frag("docs/cache.md", ["Invalidation"],
         "Every write to the catalogue invalidates the product cache, synchronously."),
    "same-section", N, "benign rewording")
add("rw-07", frag("runbooks/dns.md", ["DNS"],
                  "DNS records are managed in Terraform; changes take effect within 5 minutes "
                  "because the TTL is 300 seconds."),
    frag("runbooks/dns.md", ["DNS"],
         "Records live in Terraform. With a TTL of 300 s, a change is visible within five "
         "minutes."), "same-section", N, "benign rewording")
add("rw-08", frag("docs/secrets.md", ["Secrets"],
                  "Application secrets are read from Vault at start-up."),
    frag("docs/secrets.md", ["Secrets"],
         "Application secrets come from environment variables injected by the deploy "
         "pipeline; Vault is no longer used."), "same-section", C, "swapped component")
add("rw-09", frag("docs/timezones.md", ["Time zones"],
                  "All timestamps are stored in UTC and converted in the browser."),
    frag("docs/timezones.md", ["Time zones"],
         "Timestamps are stored in UTC; the browser converts them to local time."),
    "same-section", N, "benign rewording")
add("rw-10", frag("runbooks/vacuum.md", ["Vacuum"],
                  "Autovacuum is tuned per table; the events table uses a scale factor of "
                  "0.01."),
    frag("runbooks/vacuum.md", ["Vacuum"],
         "Autovacuum is tuned per table: the events table has a scale factor of 0.01 and a "
         "cost limit of 2000."), "same-section", N, "added detail")

# --- supersession and explicit links ------------------------------------------------------------
add("sup-01", frag("docs/adr/0003-database.md", ["ADR 0003: primary database"],
                   "We use MySQL 5.7 as the primary database.", kind="adr"),
    frag("docs/adr/0011-database.md", ["ADR 0011: primary database"],
         "We use PostgreSQL 16 as the primary database.", kind="adr"),
    "supersession", C, "superseding decision")
add("sup-02", frag("docs/adr/0004-api-style.md", ["ADR 0004: API style"],
                   "Public APIs are REST with JSON bodies. Internal services talk gRPC.",
                   kind="adr"),
    frag("docs/adr/0014-api-style.md", ["ADR 0014: API style"],
         "Public APIs are REST with JSON bodies. Internal services also talk REST; gRPC is "
         "not used any more.", kind="adr"), "supersession", C, "superseding decision")
add("sup-03", frag("policies/passwords-2024.md", ["Passwords"],
                   "Passwords must be at least 12 characters and rotated every 90 days.",
                   kind="policy"),
    frag("policies/passwords-2025.md", ["Passwords"],
         "Passwords must be at least 14 characters; periodic rotation is no longer required.",
         kind="policy"), "supersession", C, "superseding policy")
add("sup-04", frag("docs/adr/0005-logging.md", ["ADR 0005: structured logs"],
                   "Logs are JSON lines with a request id on every line.", kind="adr"),
    frag("docs/adr/0016-tracing.md", ["ADR 0016: tracing"],
         "Logs are JSON lines with a request id and a trace id on every line.", kind="adr"),
    "supersession", N, "extends the decision")
add("sup-05", frag("runbooks/restore-v1.md", ["Restore"],
                   "Restore from the nightly dump with pg_restore; it takes about 2 hours."),
    frag("runbooks/restore-v2.md", ["Restore"],
         "Restore with point-in-time recovery from the WAL archive; it takes about 20 "
         "minutes."), "supersession", C, "replaced procedure")
add("sup-06", frag("docs/onboarding-2025.md", ["Laptop setup"],
                   "Install Docker Desktop and run make bootstrap."),
    frag("docs/onboarding-2026.md", ["Laptop setup"],
         "Install Docker Desktop, then run make bootstrap and make seed."),
    "supersession", N, "added step")
add("sup-07", frag("docs/adr/0008-frontend.md", ["ADR 0008: frontend"],
                   "The console is server-rendered with HTMX; there is no single-page app.",
                   kind="adr"),
    frag("docs/adr/0017-frontend.md", ["ADR 0017: frontend"],
         "The console is server-rendered with HTMX. There is no single-page app, and no "
         "build step for JavaScript.", kind="adr"), "supersession", N, "restated decision")
add("sup-08", frag("policies/reviews.md", ["Code review"],
                   "Every change needs one approving review before merge.", kind="policy"),
    frag("policies/reviews-2026.md", ["Code review"],
         "Every change needs two approving reviews before merge; one must be from a code "
         "owner.", kind="policy"), "supersession", C, "changed number")
add("lnk-01", frag("README.md", ["Configuration"],
                   "Set `CONTEXTS_PG_PORT` to change the embedded PostgreSQL port (default "
                   "54329)."),
    frag("docs/operations.md", ["Ports"],
         "Set `CONTEXTS_DB_PORT` to change the embedded PostgreSQL port (default 54329)."),
    "link", C, "renamed setting", "README links to docs/operations.md")
add("lnk-02", frag("README.md", ["Quick start"],
                   "Run `make run` and open http://127.0.0.1:8000/ in a browser."),
    frag("docs/operations.md", ["Running"],
         "`make run` serves the console on http://127.0.0.1:8000/ by default; set PORT to "
         "change it."), "link", N, "same facts, more detail")
add("lnk-03", frag("docs/api.md", ["Errors"],
                   "Errors are returned as JSON with `code` and `message` fields."),
    frag("docs/errors.md", ["Error shape"],
         "Errors are returned as JSON with `error` and `detail` fields."),
    "link", C, "renamed fields")
add("lnk-04", frag("runbooks/incidents.md", ["Severity"],
                   "A Sev-2 incident is a partial outage affecting less than 10% of "
                   "customers."),
    frag("policies/severity.md", ["Definitions"],
         "A Sev-2 incident is a partial outage affecting less than 25% of customers."),
    "link", C, "changed threshold")
add("lnk-05", frag("docs/architecture.md", ["Storage"],
                   "PostgreSQL is the single source of truth; the search index is derived and "
                   "can be rebuilt."),
    frag("docs/search.md", ["Index"],
         "The search index is derived from PostgreSQL and can always be rebuilt from it."),
    "link", N, "consistent restatement")
add("lnk-06", frag("docs/contributing.md", ["Tests"],
                   "Run `make test` before opening a pull request; it takes about 4 minutes."),
    frag("docs/testing.md", ["Running the suite"],
         "`make test` runs the whole suite; on a laptop it takes about 4 minutes, `make "
         "test-fast` about 1 minute."), "link", N, "added detail")
add("lnk-07", frag("docs/security.md", ["Sessions"],
                   "Console sessions expire after 12 hours of inactivity."),
    frag("docs/operations.md", ["Session settings"],
         "Console sessions expire after 2 hours of inactivity (`SESSION_COOKIE_AGE`)."),
    "link", C, "changed number")
add("lnk-08", frag("docs/api.md", ["Authentication"],
                   "Send the token in the `Authorization: Bearer` header."),
    frag("docs/mcp.md", ["Authentication"],
         "MCP clients send the same token in the `Authorization: Bearer` header."),
    "link", N, "consistent restatement")

# --- one section of prose with history and examples: not contradictions -------------------------
add("hist-01", frag("docs/performance.md", ["Retrieval", "History"],
                    "| 7 | the pass starts as the request arrives (0009) | WSGI | 30.8–35.8 ms | "
                    "38.5–40.6 ms | 1.44–1.59 |"),
    frag("docs/performance.md", ["Retrieval", "History"],
         "| 8 | deferred writes run while the next retrieval waits (0010) | WSGI | 31.1–34.8 "
         "ms | 37–47 ms | 1.34–1.47 |"), "same-section", N, "benchmark history line")
add("hist-02", frag("docs/performance.md", ["Retrieval", "History"],
                    "| 7 | (same code) | ASGI | 33.0–33.2 ms | 42.0–44.0 ms | 1.51–1.56 |"),
    frag("docs/performance.md", ["Retrieval", "History"],
         "| 8 | (same code; httptools and uvloop) | ASGI | 30.8–35.7 ms | 37–47 ms | "
         "1.47–1.53 |"), "same-section", N, "benchmark history line")
add("hist-03", frag("CHANGELOG.md", ["Changelog"],
                    "## 2.3.0 — 2026-04-02\nThe default page size is 50."),
    frag("CHANGELOG.md", ["Changelog"],
         "## 2.4.0 — 2026-06-11\nThe default page size is 25."),
    "same-section", N, "changelog entries")
add("hist-04", frag("docs/retrieval-quality.md", ["Results", "History"],
                    "2026-10-02: nDCG@10 0.568 on the golden set with k1 = 1.2."),
    frag("docs/retrieval-quality.md", ["Results", "History"],
         "2026-11-20: nDCG@10 0.591 on the golden set with k1 = 1.5."),
    "same-section", N, "dated measurement")
add("hist-05", frag("docs/incidents/2026.md", ["Incident log"],
                    "- 2026-02-14: the primary ran out of disk; 40 minutes of degraded "
                    "search."),
    frag("docs/incidents/2026.md", ["Incident log"],
         "- 2026-05-03: the primary ran out of disk; 15 minutes of degraded search."),
    "same-section", N, "incident log")
add("hist-06", frag("docs/performance.md", ["Ingestion", "History"],
                    "Session 9: 41 chunks per second, overhead +12 % over raw encoding."),
    frag("docs/performance.md", ["Ingestion", "History"],
         "Session 11: 58 chunks per second, overhead +7.7 % over raw encoding."),
    "same-section", N, "benchmark history line")
add("ex-01", frag("docs/governance.md", ["Settings"],
                  "Per-kind settings are dicts with a default entry; for example `{\"default\": "
                  "180, \"policy\": 365}`."),
    frag("docs/governance.md", ["Settings"],
         "Add a kind to override the default, for example `{\"default\": 180, \"runbook\": "
         "90}`."), "same-section", N, "two examples")
add("ex-02", frag("docs/api.md", ["Examples"],
                  "```sh\ncurl -s http://127.0.0.1:8000/api/contexts/retrieve -d "
                  "'{\"budget_tokens\": 1500}'\n```"),
    frag("docs/api.md", ["Examples"],
         "```sh\ncurl -s http://127.0.0.1:8000/api/contexts/retrieve -d "
         "'{\"budget_tokens\": 800}'\n```"), "same-section", N, "two code examples")
add("ex-03", frag("docs/api.md", ["Types"],
                  "`def retrieve(request) -> None` is never called directly; the view wraps "
                  "it."),
    frag("docs/api.md", ["Types"],
         "`def retrieve(request) -> Bundle` is never called directly; the view wraps it."),
    "same-section", C, "changed signature")
add("ex-04", frag("docs/dev.md", ["Hooks"],
                  "The hook `on_saved(fragment) -> None` runs after every save."),
    frag("docs/dev.md", ["Hooks"],
         "The hook `on_saved(fragment) -> None` runs after every save and every merge."),
    "same-section", N, "-> None with added detail")
add("ex-05", frag("docs/dev.md", ["Helpers"],
                  "`find_org(slug) -> Organization | None` returns None for an unknown slug."),
    frag("docs/dev.md", ["Helpers"],
         "`find_org(slug) -> Organization | None` returns the organization for a known slug."),
    "same-section", N, "-> None, complementary statements")
add("ex-06", frag("docs/howto.md", ["Timeouts"],
                  "For example, a job that sleeps for 10 minutes is killed by the 5-minute "
                  "lease."),
    frag("docs/howto.md", ["Timeouts"],
         "For example, a job that hangs for 20 minutes is killed by the 5-minute lease."),
    "same-section", N, "changed example value")

# --- code, tests, generated files and logs of one file: their own rules (none) ------------------
PY = "python"
add("code-01", frag("contexts/settings.py", [], "GOVERNANCE_NEIGHBOURS = 10\n"
                    "GOVERNANCE_PAGERANK_DAMPING = 0.85", kind="code", language=PY),
    frag("contexts/settings.py", [], "GOVERNANCE_NEIGHBOURS = 20\n"
         "GOVERNANCE_PAGERANK_DAMPING = 0.85", kind="code", language=PY),
    "same-section", N, "code constant (code is its own truth)")
add("code-02", frag("contexts/services/fragments.py", [],
                    "def retire_fragment(principal, fragment, *, reason: str) -> None:\n"
                    "    \"\"\"Retire a fragment.\"\"\"\n    _retire(fragment, reason)",
                    kind="code", symbol="retire_fragment", language=PY),
    frag("contexts/services/fragments.py", [],
         "def retire_fragment(principal, fragment, *, reason: str) -> Fragment:\n"
         "    \"\"\"Retire a fragment and return it.\"\"\"\n    return _retire(fragment, reason)",
         kind="code", symbol="retire_fragment", language=PY),
    "same-definition", N, "-> None in code")
add("code-03", frag("app/limits.py", [], "def allowed(count: int) -> bool:\n"
                    "    # not more than 100 per minute\n    return count < 100",
                    kind="code", symbol="allowed", language=PY),
    frag("app/limits.py", [], "def allowed(count: int) -> bool:\n"
         "    # up to 200 per minute\n    return count <= 200",
         kind="code", symbol="allowed", language=PY),
    "same-definition", N, "code comment and constant")
add("code-04", frag("src/retry.go", [], "// MaxAttempts is not configurable.\n"
                    "const MaxAttempts = 3", kind="code", symbol="MaxAttempts", language="go"),
    frag("src/retry.go", [], "// MaxAttempts can be overridden with RETRY_MAX.\n"
         "var MaxAttempts = envInt(\"RETRY_MAX\", 5)", kind="code", symbol="MaxAttempts",
         language="go"), "same-definition", N, "code comment and constant")
add("code-05", frag("web/src/config.ts", [], "export const PAGE_SIZE = 50; // never above 200",
                    kind="code", symbol="PAGE_SIZE", language="typescript"),
    frag("web/src/config.ts", [], "export const PAGE_SIZE = 25; // never above 100",
         kind="code", symbol="PAGE_SIZE", language="typescript"),
    "same-definition", N, "code constant")
add("test-01", frag("tests/governance/test_nudges.py", [],
                    "def test_escalates_after_seven_days(cast):\n"
                    "    nudge = open_nudge(fragment, now=days_ago(8))\n"
                    "    assert nudge.state == 'escalated'", kind="code", language=PY,
                    symbol="test_escalates_after_seven_days"),
    frag("tests/governance/test_nudges.py", [],
         "def test_does_not_escalate_before_seven_days(cast):\n"
         "    nudge = open_nudge(fragment, now=days_ago(6))\n"
         "    assert nudge.state != 'escalated'", kind="code", language=PY,
         symbol="test_does_not_escalate_before_seven_days"),
    "same-section", N, "two tests of one file")
add("test-02", frag("tests/api/test_limits.py", [],
                    "def test_limit(client):\n    \"\"\"The bucket holds 10 requests.\"\"\"\n"
                    "    assert bucket(10).allows(10)", kind="code", language=PY,
                    symbol="test_limit"),
    frag("tests/api/test_limits.py", [],
         "def test_limit(client):\n    \"\"\"The bucket holds 20 requests.\"\"\"\n"
         "    assert bucket(20).allows(20)", kind="code", language=PY, symbol="test_limit"),
    "same-definition", N, "test fixture values")
add("test-03", frag("tests/fixtures/runbook.md", ["Rate limits"],
                    "The rate limit is configured in nginx and allows 100 requests per "
                    "second."),
    frag("tests/fixtures/runbook.md", ["Rate limits"],
         "The rate limit is configured in nginx and allows 50 requests per second."),
    "same-section", N, "test fixture prose")
add("test-04", frag("web/src/cart.spec.ts", [],
                    "it('does not apply the discount below 3 items', () => {\n"
                    "  expect(total(cart(2))).toBe(20);\n});", kind="code",
                    language="typescript"),
    frag("web/src/cart.spec.ts", [],
         "it('applies the discount from 3 items', () => {\n"
         "  expect(total(cart(3))).toBe(27);\n});", kind="code", language="typescript"),
    "same-section", N, "two tests of one file")
add("gen-01", frag("contexts/migrations/0003_nudges.py", [],
                   "migrations.AddField(model_name='nudge', name='reason', "
                   "field=models.CharField(max_length=200))", kind="code", language=PY),
    frag("contexts/migrations/0003_nudges.py", [],
         "migrations.AlterField(model_name='nudge', name='reason', "
         "field=models.CharField(max_length=300))", kind="code", language=PY),
    "same-section", N, "migration max_length")
add("gen-02", frag("contexts/migrations/0011_links.py", [],
                   "# Generated by Django 5.1 on 2026-05-02 10:14\n"
                   "field=models.CharField(max_length=16, blank=True)", kind="code",
                   language=PY),
    frag("contexts/migrations/0011_links.py", [],
         "# Generated by Django 5.1 on 2026-05-02 10:14\n"
         "field=models.CharField(max_length=32, blank=False)", kind="code", language=PY),
    "same-section", N, "migration max_length")
add("gen-03", frag("docs/api/openapi.md", ["Generated reference"],
                   "<!-- generated by manage.py spectacular; do not edit -->\n"
                   "`budget_tokens`: integer, maximum 8000."),
    frag("docs/api/openapi.md", ["Generated reference"],
         "<!-- generated by manage.py spectacular; do not edit -->\n"
         "`budget_tokens`: integer, maximum 16000."),
    "same-section", N, "generated reference")
add("gen-04", frag("web/package-lock.json", [],
                   "\"node_modules/react\": {\"version\": \"18.2.0\"}", kind="code",
                   language="json"),
    frag("web/package-lock.json", [],
         "\"node_modules/react\": {\"version\": \"18.3.1\"}", kind="code", language="json"),
    "same-section", N, "lock file")
add("log-01", frag("var/log/worker.log", [],
                   "2026-11-30 02:00:01 INFO scan: 14 of 2210 stale, not escalated"),
    frag("var/log/worker.log", [],
         "2026-12-01 02:00:01 INFO scan: 3 of 2214 stale, 1 escalated"),
    "same-section", N, "log lines")
add("log-02", frag("bench/history.jsonl", [],
                   "{\"date\": \"2026-11-02\", \"p95_ms\": 54, \"workers\": 2}"),
    frag("bench/history.jsonl", [],
         "{\"date\": \"2026-11-09\", \"p95_ms\": 48, \"workers\": 2}"),
    "same-section", N, "benchmark history lines")
add("log-03", frag("docs/sessions/2026-11-20.md", ["Session summary"],
                   "Ran the golden set: recall@10 was 0.74; the reranker is not enabled yet.",
                   kind="session-summary"),
    frag("docs/sessions/2026-11-20.md", ["Session summary"],
         "Ran the golden set again after the fix: recall@10 was 0.79 with the reranker "
         "enabled.", kind="session-summary"),
    "same-section", N, "session log")

# --- look-alike passages from different files: never compared ----------------------------------
LOOK_ALIKES = [
    ("runbooks/payments.md", ["Payments", "Card charge retries"],
     "When the card processor times out, the payments worker retries the charge up to 3 times.",
     "runbooks/payouts.md", ["Payouts", "Bank transfer retries"],
     "When the bank API times out, the payouts worker retries the transfer up to 6 times."),
    ("runbooks/backups.md", ["Backups", "Schedule and retention"],
     "Backups are kept for 35 days; monthly snapshots are kept for 1 year.",
     "runbooks/analytics-backups.md", ["Warehouse backups"],
     "Backups are kept for 7 days; monthly snapshots are not kept."),
    ("docs/api/rate-limits.md", ["Rate limits"],
     "Each API token may make 600 requests per minute.",
     "docs/webhooks.md", ["Delivery limits"],
     "Each webhook endpoint may receive 60 requests per minute."),
    ("runbooks/kafka.md", ["Kafka", "Consumer lag"],
     "Alert when consumer lag on `orders.v2` exceeds 50,000 messages for 5 minutes.",
     "runbooks/kafka-analytics.md", ["Consumer lag"],
     "Alert when consumer lag on `clicks.v1` exceeds 2,000,000 messages for 30 minutes."),
    ("docs/auth.md", ["Authentication", "Tokens"],
     "Access tokens expire after 15 minutes.",
     "docs/partner-api.md", ["Partner tokens"],
     "Partner access tokens expire after 24 hours."),
    ("runbooks/release.md", ["Release", "Deploy windows"],
     "Do not deploy on Fridays.",
     "runbooks/mobile-release.md", ["App store releases"],
     "Submit builds to the app stores on Fridays so review finishes by Monday."),
    ("contexts/migrations/0007_fragment_title.py", [],
     "migrations.AlterField(model_name='fragment', name='title', "
     "field=models.CharField(max_length=300))",
     "contexts/migrations/0019_scope_label.py", [],
     "migrations.AlterField(model_name='scope', name='label', "
     "field=models.CharField(max_length=120))"),
    ("tests/governance/test_dedup.py", [],
     "def test_pairs_within_distance(cast):\n    assert propose(cast.org, max_distance=8) == 1",
     "tests/ingestion/test_dedup.py", [],
     "def test_pairs_within_distance(cast):\n    assert collapse(cast.org, max_distance=3) == 2"),
    ("contexts/governance/nudges.py", [],
     "def escalate(nudge, *, now=None) -> None:\n    \"\"\"Escalate; never emails twice.\"\"\"",
     "contexts/governance/dedup_review.py", [],
     "def withdraw(candidate, *, now=None) -> int:\n"
     "    \"\"\"Withdraw; emails the curators.\"\"\""),
    ("runbooks/redis.md", ["Redis", "Memory"],
     "The cache cluster runs with a 6 GB limit per node and eviction enabled.",
     "runbooks/redis-sessions.md", ["Session store"],
     "The session store runs with a 2 GB limit per node and eviction disabled."),
    ("policies/production-access.md", ["Production access"],
     "Contractors do not get production access.",
     "policies/staging-access.md", ["Staging access"],
     "Contractors get staging access for the length of their contract."),
    ("docs/adr/0007-queue.md", ["ADR 0007: background jobs"],
     "We use Celery with Redis as the broker for background jobs.",
     "docs/adr/0012-analytics-pipeline.md", ["ADR 0012: analytics pipeline"],
     "We use Airflow with PostgreSQL as the metadata store for analytics jobs."),
    ("docs/performance.md", ["Retrieval"],
     "Endpoint p95 is 47 ms with two workers.",
     "docs/operations.md", ["Load test"],
     "Endpoint p95 under the load test is 180 ms with eight workers."),
    ("runbooks/database-failover.md", ["Database failover", "Promote"],
     "The whole procedure takes about 10 minutes.",
     "runbooks/cache-failover.md", ["Cache failover"],
     "The whole procedure takes about 2 minutes."),
    ("docs/api/pagination.md", ["Pagination"],
     "List endpoints return 50 items per page by default and at most 200.",
     "docs/admin/pagination.md", ["Admin lists"],
     "Admin list pages show 100 items per page by default and at most 1000."),
    ("docs/feature-flags.md", ["Feature flags"],
     "New flags default to off in production.",
     "docs/experiments.md", ["Experiments"],
     "New experiments default to on for 5% of production traffic."),
    ("runbooks/tls.md", ["TLS certificates", "Rotation"],
     "Certificates are renewed 30 days before expiry.",
     "runbooks/signing-keys.md", ["Signing keys"],
     "Signing keys are rotated 90 days before expiry."),
    ("docs/ci.md", ["Continuous integration", "Pipeline"],
     "The integration suite runs on 4 parallel runners and takes about 18 minutes.",
     "docs/nightly.md", ["Nightly builds"],
     "The end-to-end suite runs on 2 parallel runners and takes about 70 minutes."),
    ("docs/email.md", ["Outgoing email"],
     "Bounces are processed every 15 minutes.",
     "docs/sms.md", ["Outgoing SMS"],
     "Delivery receipts are processed every 1 minute."),
    ("policies/data-retention.md", ["Data retention"],
     "Customer data is deleted 90 days after an account is closed.",
     "policies/employee-data.md", ["Employee data"],
     "Employee data is deleted 6 years after employment ends."),
    ("tests/fixtures/runbook.md", ["Rate limits"],
     "The rate limit is configured in nginx and allows 100 requests per second.",
     "docs/api/rate-limits.md", ["Rate limits"],
     "The rate limit is configured in the API gateway and allows 600 requests per minute."),
    ("docs/api.md", ["Types"],
     "`def retrieve(request) -> None` is never called directly.",
     "docs/mcp.md", ["Types"],
     "`def retrieve(request) -> Bundle` is called by every MCP tool."),
    ("runbooks/k8s-prod.md", ["Node pools"],
     "The production cluster has 3 node pools of 12 nodes each.",
     "runbooks/k8s-staging.md", ["Node pools"],
     "The staging cluster has 1 node pool of 4 nodes."),
    ("docs/logging.md", ["Levels"],
     "Log at INFO in production.",
     "docs/audit-log.md", ["Levels"],
     "The audit log records every event; it has no levels and is never sampled."),
    ("docs/sessions/2026-11-02.md", ["Session summary"],
     "The golden set scored nDCG@10 0.57; not yet tuned.",
     "docs/sessions/2026-11-20.md", ["Session summary"],
     "The golden set scored nDCG@10 0.59 after tuning k1."),
]
for n, (pa, ha, ta, pb, hb, tb) in enumerate(LOOK_ALIKES, 1):
    code = pa.endswith((".py", ".go", ".ts"))
    kind = "code" if code else "prose"
    add(f"alike-{n:02d}", frag(pa, ha, ta, kind=kind, language=PY if code else ""),
        frag(pb, hb, tb, kind=kind, language=PY if code else ""), "none", N,
        "different files about similar topics")

# --- held out: written after the detector was debugged on everything above ------------------
SPLIT = "heldout"
section("ho-slo", "docs/slo.md", ["Service levels", "Search API"], (
    "The search API's availability objective is 99.9% over a rolling 28-day window.\n"
    "Latency objective: 95% of queries answer in under 300 ms.\n"
    "When the error budget is spent, feature launches stop until it recovers."),
    [(C, "changed number", [("99.9%", "99.5%")]),
     (C, "changed number", [("under 300 ms", "under 800 ms")]),
     (C, "reversed rule", [("feature launches stop until it recovers",
                            "feature launches continue; only risky migrations stop")]),
     (N, "benign rewording", [("over a rolling 28-day window", "measured over a rolling "
                               "window of 28 days")]),
     (N, "same value, other unit", [("under 300 ms", "under 0.3 seconds")]),
     ])

section("ho-webhooks", "docs/webhooks.md", ["Webhooks", "Delivery"], (
    "Failed webhook deliveries are retried 8 times over 24 hours.\n"
    "Each request is signed with HMAC-SHA256 in the `X-Signature` header.\n"
    "Endpoints must answer within 10 seconds or the delivery counts as failed."),
    [(C, "changed number", [("retried 8 times over 24 hours", "retried 5 times over 6 hours")]),
     (C, "renamed header", [("the `X-Signature` header", "the `Webhook-Signature` header")]),
     (C, "changed number", [("within 10 seconds", "within 30 seconds")]),
     (N, "added detail", [("counts as failed.", "counts as failed and is retried later.")]),
     (N, "benign rewording", [("Endpoints must answer within 10 seconds or the delivery counts "
                               "as failed.", "A delivery counts as failed when the endpoint "
                               "takes longer than 10 seconds to answer.")]),
     ])

section("ho-python", "docs/development.md", ["Toolchain"], (
    "The services run on Python 3.11; do not use 3.12-only syntax yet.\n"
    "Dependencies are pinned with `uv lock` and upgraded every Monday by the bot.\n"
    "Node is only needed for the docs site."),
    [(C, "changed version", [("run on Python 3.11", "run on Python 3.12"),
                             ("do not use 3.12-only syntax yet", "3.13-only syntax is not "
                              "allowed yet")]),
     (C, "renamed tool", [("pinned with `uv lock`", "pinned with `pip-compile`")]),
     (C, "changed schedule", [("every Monday", "on the first day of each month")]),
     (N, "benign rewording", [("Node is only needed for the docs site.",
                               "Only the docs site needs Node.")]),
     ])

section("ho-lb", "runbooks/load-balancer.md", ["Load balancer", "Health checks"], (
    "The load balancer checks `/healthz` every 5 seconds and removes an instance after 3 "
    "failed checks.\n"
    "Do not point health checks at `/readyz`; it fails during deploys on purpose.\n"
    "Connection draining lasts 30 seconds."),
    [(C, "changed number", [("every 5 seconds", "every 15 seconds")]),
     (C, "reversed instruction", [("Do not point health checks at `/readyz`; it fails during "
                                   "deploys on purpose.", "Point health checks at `/readyz`; it "
                                   "reports deploys correctly now.")]),
     (C, "changed number", [("lasts 30 seconds", "lasts 120 seconds")]),
     (N, "same value, other unit", [("lasts 30 seconds", "lasts half a minute (30 s)")]),
     (N, "added detail", [("after 3 failed checks.", "after 3 failed checks in a row.")]),
     ])

section("ho-es", "runbooks/elasticsearch.md", ["Elasticsearch", "Shards"], (
    "Keep shards between 10 and 50 GB; split an index when its shards grow past that.\n"
    "Each index has 1 replica in production.\n"
    "Force-merge read-only indices at night, never during business hours."),
    [(C, "changed number", [("between 10 and 50 GB", "between 20 and 40 GB")]),
     (C, "changed number", [("has 1 replica", "has 2 replicas")]),
     (C, "reversed instruction", [("Force-merge read-only indices at night, never during "
                                   "business hours.", "Force-merge read-only indices any time; "
                                   "it no longer affects query latency.")]),
     (N, "benign rewording", [("Each index has 1 replica in production.",
                               "In production every index carries one replica.")]),
     ])

section("ho-support", "runbooks/support-escalation.md", ["Support escalation"], (
    "Tier 1 support escalates to engineering through the `#support-escalations` channel.\n"
    "Engineering acknowledges escalations within 4 business hours.\n"
    "Customers are not told internal ticket numbers."),
    [(C, "renamed channel", [("the `#support-escalations` channel",
                              "the `#eng-help` channel")]),
     (C, "changed number", [("within 4 business hours", "within 1 business hour")]),
     (C, "reversed rule", [("Customers are not told internal ticket numbers.",
                            "Customers are told internal ticket numbers so they can refer to "
                            "them.")]),
     (N, "added detail", [("within 4 business hours.", "within 4 business hours, "
                           "Monday to Friday.")]),
     ])

section("ho-terraform", "docs/infrastructure.md", ["Terraform"], (
    "Terraform state lives in the `tf-state-prod` bucket with versioning enabled.\n"
    "Apply changes only from CI; local applies are blocked by the state lock policy.\n"
    "Plans older than 24 hours must be regenerated before apply."),
    [(C, "renamed bucket", [("the `tf-state-prod` bucket", "the `infra-state` bucket")]),
     (C, "reversed statement", [("with versioning enabled", "with versioning disabled")]),
     (C, "changed number", [("older than 24 hours", "older than 1 hour")]),
     (N, "benign rewording", [("Apply changes only from CI; local applies are blocked by the "
                               "state lock policy.", "Only CI applies changes; the state lock "
                               "policy blocks local applies.")]),
     ])

section("ho-mobile", "runbooks/mobile-release.md", ["Mobile releases"], (
    "Releases roll out to 10% of users on day one, 50% on day three and everyone on day "
    "seven.\n"
    "Halt the rollout if the crash-free rate drops below 99.5%.\n"
    "The minimum supported iOS version is 16."),
    [(C, "changed number", [("10% of users on day one", "1% of users on day one")]),
     (C, "changed number", [("below 99.5%", "below 98%")]),
     (C, "changed version", [("iOS version is 16", "iOS version is 17")]),
     (N, "benign rewording", [("Halt the rollout if the crash-free rate drops below 99.5%.",
                               "If fewer than 99.5% of sessions are crash-free, halt the "
                               "rollout.")]),
     ])

add("ho-rw-01", frag("docs/analytics.md", ["Warehouse"],
                     "Product analytics are loaded into BigQuery every hour."),
    frag("docs/analytics.md", ["Warehouse"],
         "Product analytics are loaded into Snowflake every hour."),
    "same-section", C, "swapped component")
add("ho-rw-02", frag("docs/analytics.md", ["Warehouse"],
                     "Product analytics are loaded into BigQuery every hour by Fivetran."),
    frag("docs/analytics.md", ["Warehouse"],
         "Every hour, Fivetran loads the product analytics into BigQuery."),
    "same-section", N, "benign rewording")
add("ho-rw-03", frag("docs/graphql.md", ["Limits"],
                     "Queries deeper than 10 levels are rejected."),
    frag("docs/graphql.md", ["Limits"],
         "Queries deeper than 10 levels are rejected, and so are queries costing more than "
         "5000 points."), "same-section", N, "added limit")
add("ho-rw-04", frag("docs/vpn.md", ["Access"],
                     "The VPN is required to reach the staging cluster."),
    frag("docs/vpn.md", ["Access"],
         "The staging cluster is reachable without the VPN through the identity-aware "
         "proxy."), "same-section", C, "reversed requirement")
add("ho-rw-05", frag("docs/cron.md", ["Schedules"],
                     "The invoice job runs at 02:00 UTC and the reminder job at 08:00 UTC."),
    frag("docs/cron.md", ["Schedules"],
         "The invoice job runs at 02:00 UTC; reminders go out at 08:00 UTC."),
    "same-section", N, "benign rewording")
add("ho-sup-01", frag("docs/adr/0009-auth.md", ["ADR 0009: authentication"],
                      "Employees sign in with Google Workspace accounts.", kind="adr"),
    frag("docs/adr/0019-auth.md", ["ADR 0019: authentication"],
         "Employees sign in through Okta with SAML; Google Workspace sign-in is turned off.",
         kind="adr"), "supersession", C, "superseding decision")
add("ho-sup-02", frag("policies/dependency-updates.md", ["Dependency updates"],
                      "Security updates are merged within 7 days.", kind="policy"),
    frag("policies/dependency-updates-2026.md", ["Dependency updates"],
         "Security updates are merged within 2 days; critical ones the same day.",
         kind="policy"), "supersession", C, "changed number")
add("ho-sup-03", frag("docs/adr/0010-images.md", ["ADR 0010: base images"],
                      "Services build on the `python:3.11-slim` base image.", kind="adr"),
    frag("docs/adr/0020-images.md", ["ADR 0020: base images"],
         "Services build on the `python:3.11-slim` base image, rebuilt weekly for security "
         "patches.", kind="adr"), "supersession", N, "extends the decision")
add("ho-lnk-01", frag("README.md", ["Running"],
                      "Set `WORKER_CONCURRENCY` to choose how many tasks a worker runs at "
                      "once."),
    frag("docs/operations.md", ["Workers"],
         "Set `CELERY_CONCURRENCY` to choose how many tasks a worker runs at once."),
    "link", C, "renamed setting")
add("ho-lnk-02", frag("docs/api.md", ["Limits"],
                      "A request body may be at most 1 MB."),
    frag("docs/uploads.md", ["Size limits"],
         "Upload request bodies may be at most 100 MB; other requests at most 1 MB."),
    "link", N, "consistent, more specific")
add("ho-lnk-03", frag("docs/onboarding.md", ["Accounts"],
                      "New engineers get production read access on their first day."),
    frag("policies/production-access.md", ["Production access"],
         "New engineers get production read access after their first month."),
    "link", C, "changed rule")
add("ho-hist-01", frag("docs/performance.md", ["Ingestion", "History"],
                       "| 10 | batched pointer writes | 38 chunks/s | +15 % |"),
    frag("docs/performance.md", ["Ingestion", "History"],
         "| 12 | overlapped encoding | 61 chunks/s | +6 % |"),
    "same-section", N, "benchmark history line")
add("ho-hist-02", frag("docs/releases.md", ["Release notes"],
                       "Version 4.1 drops support for PostgreSQL 13."),
    frag("docs/releases.md", ["Release notes"],
         "Version 4.2 drops support for PostgreSQL 14."),
    "same-section", N, "release notes")
add("ho-code-01", frag("app/billing.py", [], "RETRY_DELAYS = (1, 5, 30)  # seconds, never more "
                       "than three", kind="code", language="python"),
    frag("app/billing.py", [], "RETRY_DELAYS = (1, 5, 30, 120)  # seconds", kind="code",
         language="python"), "same-section", N, "code constant")
add("ho-code-02", frag("app/models.py", [], "name = models.CharField(max_length=120)",
                       kind="code", symbol="Customer", language="python"),
    frag("app/models.py", [], "name = models.CharField(max_length=255, blank=True)",
         kind="code", symbol="Customer", language="python"), "same-definition", N,
    "model field")
add("ho-test-01", frag("tests/test_billing.py", [],
                       "def test_no_retry_after_three_failures():\n"
                       "    assert not should_retry(attempt=4)", kind="test",
                       language="python"),
    frag("tests/test_billing.py", [],
         "def test_retry_after_three_failures():\n    assert should_retry(attempt=4)",
         kind="test", language="python"), "same-section", N, "test changed")
add("ho-gen-01", frag("app/migrations/0042_customer_name.py", [],
                      "field=models.CharField(max_length=120)", kind="code",
                      language="python"),
    frag("app/migrations/0042_customer_name.py", [],
         "field=models.CharField(max_length=255)", kind="code", language="python"),
    "same-section", N, "migration max_length")
add("ho-log-01", frag("ops/deploy.log", [],
                      "2026-10-01 14:02 deploy api v2.3.0 ok (12 pods)"),
    frag("ops/deploy.log", [],
         "2026-10-03 09:40 deploy api v2.3.1 ok (16 pods)"),
    "same-section", N, "log lines")
for n, (pa, ha, ta, pb, hb, tb) in enumerate([
    ("docs/slo.md", ["Service levels", "Search API"],
     "The search API's availability objective is 99.9% over 28 days.",
     "docs/slo-internal.md", ["Internal tools"],
     "The internal tools' availability objective is 99% over 28 days."),
    ("docs/webhooks.md", ["Webhooks", "Delivery"],
     "Failed webhook deliveries are retried 8 times over 24 hours.",
     "docs/email.md", ["Outgoing email"],
     "Failed email deliveries are retried 3 times over 1 hour."),
    ("runbooks/elasticsearch.md", ["Elasticsearch", "Shards"],
     "Each index has 1 replica in production.",
     "runbooks/elasticsearch-logs.md", ["Log cluster"],
     "Each index has 0 replicas; logs can be re-shipped."),
    ("runbooks/load-balancer.md", ["Load balancer", "Health checks"],
     "Do not point health checks at `/readyz`.",
     "runbooks/kubernetes.md", ["Probes"],
     "Point readiness probes at `/readyz`."),
    ("app/migrations/0042_customer_name.py", [], "field=models.CharField(max_length=120)",
     "app/migrations/0051_invoice_ref.py", [], "field=models.CharField(max_length=64)"),
    ("docs/development.md", ["Toolchain"], "The services run on Python 3.11.",
     "tools/README.md", ["Scripts"], "The maintenance scripts run on Python 3.9."),
    ("policies/dependency-updates.md", ["Dependency updates"],
     "Security updates are merged within 7 days.",
     "policies/vendor-review.md", ["Vendors"],
     "Security reviews of new vendors are completed within 30 days."),
], 1):
    code = pa.endswith(".py")
    kind = "code" if code else "prose"
    add(f"ho-alike-{n:02d}", frag(pa, ha, ta, kind=kind, language="python" if code else ""),
        frag(pb, hb, tb, kind=kind, language="python" if code else ""), "none", N,
        "different files about similar topics")


def main() -> None:
    ids = [p["id"] for p in PAIRS]
    if len(ids) != len(set(ids)):
        raise SystemExit("duplicate pair ids")
    with OUT.open("w", encoding="utf-8") as out:
        for pair in PAIRS:
            out.write(json.dumps(pair, ensure_ascii=False, sort_keys=True) + "\n")
    labels = [p["label"] for p in PAIRS]
    print(f"{len(PAIRS)} pairs ({labels.count(C)} contradicted, {labels.count(N)} not) → {OUT}")


if __name__ == "__main__":
    main()

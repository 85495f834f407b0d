"""Governance: staleness, verification, nudges, agents' sessions and proposals, re-embedding."""

from contexts.config.schema import INT, Area, Setting

AREA = Area("Governance", "Staleness, nudges, sessions and re-embedding (`docs/governance.md`).", (
    Setting("CONTEXTS_STALE_HOT_MIN_USES", INT, 5,
            "A fragment used at least this often (retrievals and citations) and not verified "
            "for longer than its kind's threshold is \"hot but unverified\"."),
    Setting("CONTEXTS_STALE_HOT_WINDOW_DAYS", INT, 30,
            "…and retrieved within this many days."),
    Setting("CONTEXTS_VERIFY_DAYS_POLICY", INT, 90,
            "A policy a person vouches for is asked about again (a `verify_due` nudge) this "
            "many days after it was last verified or edited."),
    Setting("CONTEXTS_VERIFY_DAYS_RUNBOOK", INT, 120, "The same, for a runbook."),
    Setting("CONTEXTS_VERIFY_DAYS_ADR", INT, 365, "The same, for an ADR."),
    Setting("CONTEXTS_VERIFY_DAYS_DEFAULT", INT, 180, "The same, for any other kind."),
    Setting("CONTEXTS_NUDGE_ESCALATE_AFTER_DAYS", INT, 7,
            "A nudge unanswered this long goes to the organization's tech leads and admins."),
    Setting("CONTEXTS_NUDGE_LINK_MAX_AGE_DAYS", INT, 30, "Days a nudge e-mail's link works."),
    Setting("CONTEXTS_SESSIONS_PER_TOKEN", INT, 50, "Open agent sessions per token, at most."),
    Setting("CONTEXTS_SESSION_IDLE_MINUTES", INT, 24 * 60,
            "An agent's session expires after this many minutes without a write."),
    Setting("CONTEXTS_PROPOSALS_PER_TOKEN", INT, 100,
            "Proposals one token may have waiting for review."),
    Setting("CONTEXTS_EMBEDDING_SHADOW_DAYS", INT, 14,
            "Days the previous embedding generation is kept after a model upgrade."),
    Setting("CONTEXTS_REEMBED_BATCH", INT, 128, "Fragments re-embedded per batch."),
))

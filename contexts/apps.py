from django.apps import AppConfig


class ContextsConfig(AppConfig):
    name = "contexts"
    verbose_name = "Contexts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.tokens import token_changed
        from contexts import signals  # noqa: F401 - connects receivers
        from contexts.config import checks  # noqa: F401 - registers the configuration check
        from contexts.governance import evidence, evidence_follow, nudges, secret_nudges
        from contexts.indexes import follower
        from contexts.kernel import (
            mail,  # noqa: F401 - registers its deploy check
            metrics,
        )
        from contexts.kernel.ids import register_converters
        from contexts.kernel.logfilters import redact_every_handler
        from contexts.services.evidence import documents_changed, text_written
        from contexts.services.fragments import fragments_changed
        from contexts.services.secrets import secrets_found
        from contexts.services.token_audit import record_token_change

        register_converters()  # <pid:…> and friends, before any URLconf is imported
        # settings.LOGGING's handlers redact credentials themselves; handlers made before
        # Django was set up (gunicorn's access and error logs, which uvicorn's loggers share)
        # get the same filter here.
        redact_every_handler()
        # Token changes go to the audit trail, which accounts (below contexts) cannot import.
        token_changed.connect(record_token_change, dispatch_uid="contexts.audit.tokens")
        # Connected here, once the apps are loaded, rather than as a side effect of importing
        # the nudges module: a process that never imported it would silently leave nudges
        # of edited fragments open until the next scan.
        fragments_changed.connect(nudges.follow_fragment_changes,
                                  dispatch_uid="governance.nudges.reconcile")
        # A secret found on the way in: its file's owner is asked to rotate it.
        secrets_found.connect(secret_nudges.nudge_owners,
                              dispatch_uid="governance.secret_nudges")
        # What a person's text cites is resolved as it is written; a sync that changes it
        # re-opens the fragment (docs/governance.md, "Evidence").
        text_written.connect(evidence.record, dispatch_uid="governance.evidence.record")
        documents_changed.connect(evidence_follow.follow_documents,
                                  dispatch_uid="governance.evidence.follow")
        metrics.add_scrape_collector(follower.LAG_COLLECTOR)
        from contexts.sso import oidc

        if oidc.enabled():
            # A mistake in the group mapping stops the start, naming where it is, rather than
            # answering the first sign-in with an error.
            oidc.group_mapping()

"""Token changes in the audit trail: the receiver of ``accounts.tokens.token_changed``
(connected in ``ContextsConfig.ready``; accounts sits below contexts and does not import it)."""

from __future__ import annotations

from typing import Any

from accounts.models import ApiToken
from contexts.services.audit import record


def record_token_change(sender: type, *, actor: Any, action: str, token: ApiToken,
                        change: dict[str, Any], **kwargs: Any) -> None:
    record(actor, action, token, org=token.org, **change)
